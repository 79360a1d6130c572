"""Argument checks shared by the Python facade (``_runtime.py``, ``_fp8_gemm.py``, ``_grouped.py``,
``_k_grouped.py``, ``_sf_layout.py``).

Every rejection names the public function and the argument: ``deep_gemm.<fn>: <arg> ...``.
``TypeError`` for a value of the wrong type, ``ValueError`` for a value of the right type
that is out of range. The ops (C++) check shapes, dtypes, devices and memory; these checks
cover what reaches Python first: ints, bools, strings, tensors, ``(tensor, scale)`` pairs
and recipes. They run on every call, so each is a few ``isinstance`` tests on the common
path; building a message happens only on failure.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

_Tensor = torch.Tensor
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _what(value: Any) -> str:
    if isinstance(value, _Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} ({text})"


def int_(fn: str, name: str, value: Any, *, min: Optional[int] = None, max: Optional[int] = None) -> int:
    """An int (not a bool, not a float), within ``[min, max]`` and int64."""
    # bool is an int subclass; a flag passed where a count belongs is a bug.
    if value.__class__ is not int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"deep_gemm.{fn}: {name} must be an int, got {_what(value)}")
    lo = _INT64_MIN if min is None else min
    hi = _INT64_MAX if max is None else max
    if not lo <= value <= hi:
        if min is not None and value < min:
            raise ValueError(f"deep_gemm.{fn}: {name} must be >= {min}, got {value}")
        if max is not None and value > max:
            raise ValueError(f"deep_gemm.{fn}: {name} must be <= {max}, got {value}")
        raise ValueError(f"deep_gemm.{fn}: {name} must fit in 64 bits, got {value}")
    return int(value)


def opt_int(fn: str, name: str, value: Any, *, min: Optional[int] = None, max: Optional[int] = None) -> Optional[int]:
    return None if value is None else int_(fn, name, value, min=min, max=max)


def bool_(fn: str, name: str, value: Any) -> bool:
    """A bool (True/False); ints, strings and None are refused."""
    if value is not True and value is not False:
        raise TypeError(f"deep_gemm.{fn}: {name} must be a bool, got {_what(value)}")
    return value


def opt_bool(fn: str, name: str, value: Any) -> Optional[bool]:
    if value is not None and value is not True and value is not False:
        raise TypeError(f"deep_gemm.{fn}: {name} must be a bool or None, got {_what(value)}")
    return value


def str_(fn: str, name: str, value: Any, example: str = "") -> str:
    if not isinstance(value, str):
        hint = f" such as {example!r}" if example else ""
        raise TypeError(f"deep_gemm.{fn}: {name} must be a str{hint}, got {_what(value)}")
    return value


def tensor(fn: str, name: str, value: Any, what: str = "a tensor") -> torch.Tensor:
    if not isinstance(value, _Tensor):
        raise TypeError(f"deep_gemm.{fn}: {name} must be {what}, got {_what(value)}")
    return value


def opt_tensor(fn: str, name: str, value: Any, what: str = "a tensor") -> Optional[torch.Tensor]:
    if value is not None and not isinstance(value, _Tensor):
        raise TypeError(f"deep_gemm.{fn}: {name} must be {what} or None, got {_what(value)}")
    return value


def pair(fn: str, name: str, value: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tensor, scale_factors)``: a tuple or list of two tensors."""
    # Unrolled (no generator): this runs twice on every GEMM call.
    cls = value.__class__
    if (cls is tuple or cls is list) and len(value) == 2:
        t, sf = value
        if isinstance(t, _Tensor) and isinstance(sf, _Tensor):
            return t, sf
    if isinstance(value, (tuple, list)) and len(value) == 2:
        t, sf = value
        if isinstance(t, _Tensor) and isinstance(sf, _Tensor):
            return t, sf
        bad, which = (t, "tensor") if not isinstance(t, _Tensor) else (sf, "scale factors")
        raise TypeError(f"deep_gemm.{fn}: {name} must be a pair (tensor, scale_factors); its {which} is {_what(bad)}")
    if isinstance(value, (tuple, list)):
        raise TypeError(f"deep_gemm.{fn}: {name} must be a pair (tensor, scale_factors), got a {type(value).__name__} "
                        f"of {len(value)} elements")
    raise TypeError(f"deep_gemm.{fn}: {name} must be a pair (tensor, scale_factors), got {_what(value)}")


def dims(fn: str, name: str, t: torch.Tensor, n: int, form: str) -> None:
    """``t`` has ``n`` dimensions (checked before a view that needs them, e.g. a transpose)."""
    if t.dim() != n:
        raise ValueError(f"deep_gemm.{fn}: {name} must be {n}-D {form}, got shape {tuple(t.shape)}")


def ints(fn: str, name: str, value: Any, length: Optional[int] = None, what: str = "ints") -> tuple[int, ...]:
    """A tuple or list of ints (``length`` of them when given), as a tuple."""
    if not isinstance(value, (tuple, list)):
        count = f"{length} " if length is not None else ""
        raise TypeError(f"deep_gemm.{fn}: {name} must be a tuple of {count}{what}, got {_what(value)}")
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"deep_gemm.{fn}: {name}[{i}] must be an int, got {_what(v)}")
        if not _INT64_MIN <= v <= _INT64_MAX:
            raise ValueError(f"deep_gemm.{fn}: {name}[{i}] must fit in 64 bits, got {v}")
    if length is not None and len(value) != length:
        raise ValueError(f"deep_gemm.{fn}: {name} must have {length} elements, got {tuple(value)!r}")
    return tuple(value)


def recipe(fn: str, name: str, value: Any, length: int = 3) -> tuple[int, ...]:
    """A recipe: ``(gran_m, gran_n, gran_k)`` (3) or one operand's ``(gran_mn, gran_k)`` (2)."""
    if value.__class__ is tuple and len(value) == length:
        for v in value:
            if v.__class__ is not int:
                break
        else:
            return value
    what = "(gran_m, gran_n, gran_k)" if length == 3 else "(gran_mn, gran_k)"
    return ints(fn, name, value, length, what=f"ints {what}")


def one_recipe(fn: str, recipe_: Any, recipe_a: Any, recipe_b: Any) -> Optional[tuple[int, int, int]]:
    """``recipe``, or the GEMM recipe that ``recipe_a`` / ``recipe_b`` (2 ints each) make up;
    None when neither is given."""
    if recipe_a is None and recipe_b is None:
        return None if recipe_ is None else recipe(fn, "recipe", recipe_)
    if recipe_ is not None:
        raise ValueError(f"deep_gemm.{fn}: pass either recipe or recipe_a/recipe_b, not both")
    if recipe_a is None or recipe_b is None:
        raise ValueError(f"deep_gemm.{fn}: recipe_a and recipe_b go together (got only "
                         f"{'recipe_a' if recipe_b is None else 'recipe_b'})")
    ra = recipe(fn, "recipe_a", recipe_a, 2)
    rb = recipe(fn, "recipe_b", recipe_b, 2)
    if ra[1] != rb[1]:
        raise ValueError(f"deep_gemm.{fn}: recipe_a and recipe_b must have the same gran_k, got {ra} and {rb}")
    return (ra[0], rb[0], ra[1])


def layout_alias(fn: str, grouped_layout: Any, m_indices: Any) -> Any:
    """``m_indices`` is the older upstream keyword of ``grouped_layout`` (SGLang still passes it)."""
    if m_indices is not None:
        if grouped_layout is not None:
            raise TypeError(f"deep_gemm.{fn}: pass grouped_layout or its alias m_indices, not both")
        return m_indices
    if grouped_layout is None:
        raise TypeError(f"deep_gemm.{fn}: missing grouped_layout (alias m_indices)")
    return grouped_layout


__all__ = ["int_", "opt_int", "bool_", "opt_bool", "str_", "tensor", "opt_tensor", "pair", "dims", "ints", "recipe",
           "one_recipe", "layout_alias"]
