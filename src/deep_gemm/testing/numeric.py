"""Numeric helpers for tests and benchmarks (plain PyTorch, CPU or CUDA)."""

import torch

__all__ = ["assert_bitwise_equal", "calc_diff", "count_bytes"]


def calc_diff(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Normalised squared distance ``1 - 2 * sum(x * y) / sum(x * x + y * y)``, in float64.

    0 for identical tensors, 2 for ``y == -x``, 1 for orthogonal ones; it equals
    ``sum((x - y)**2) / sum(x**2 + y**2)``. Returns a 0-dim float64 tensor (as
    upstream), usable in comparisons and f-strings. NaN when both are all zero.
    """
    x, y = x.double(), y.double()
    denominator = (x * x + y * y).sum()
    return 1 - 2 * (x * y).sum() / denominator


def count_bytes(*tensors) -> int:
    """Total storage bytes (numel * element_size) of the given tensors.

    Accepts tensors, ``None`` (skipped) and tuples/lists of them, nested to any
    depth, so ``count_bytes((a, sfa), (b, sfb), d, None)`` works as upstream.
    """
    total = 0
    for t in tensors:
        if t is None:
            continue
        if isinstance(t, (tuple, list)):
            total += count_bytes(*t)
        elif isinstance(t, torch.Tensor):
            total += t.numel() * t.element_size()
        else:
            raise TypeError(f"count_bytes: expected tensors, None or tuples/lists of them, got {type(t).__name__}")
    return total


_BIT_VIEWS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def assert_bitwise_equal(x: torch.Tensor, y: torch.Tensor, label: str = "") -> None:
    """Raise AssertionError unless ``x`` and ``y`` have the same shape and dtype and every
    element has the same bit pattern (so ``-0.0 != 0.0``, and NaNs match only bit for bit).

    The message names ``label``, the number of differing elements and the first of them.
    Works on CPU and CUDA tensors, of any layout (compared element by element).
    """
    where = f"{label}: " if label else ""
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise TypeError(f"assert_bitwise_equal: {where}expected two tensors, got {type(x).__name__} and "
                        f"{type(y).__name__}")
    if x.shape != y.shape or x.dtype != y.dtype:
        raise AssertionError(f"{where}shape/dtype differ: {tuple(x.shape)} {x.dtype} vs {tuple(y.shape)} {y.dtype}")
    if x.device != y.device:
        y = y.to(x.device)
    if x.numel() == 0:
        return
    if x.dtype == torch.bool:
        xb, yb = x.contiguous().view(torch.uint8), y.contiguous().view(torch.uint8)
    elif x.is_complex():
        xb, yb = torch.view_as_real(x.contiguous()), torch.view_as_real(y.contiguous())
        xb, yb = xb.view(_BIT_VIEWS[xb.element_size()]), yb.view(_BIT_VIEWS[yb.element_size()])
    else:
        view = _BIT_VIEWS[x.element_size()]
        xb, yb = x.contiguous().view(view), y.contiguous().view(view)
    differ = xb != yb
    count = int(differ.sum().item())
    if count:
        first = tuple(int(i) for i in differ.nonzero()[0].tolist())
        if x.is_complex():
            first = first[:-1]
        raise AssertionError(f"{where}{count} of {x.numel()} elements differ bitwise; first at index {first}: "
                             f"{x[first].item()!r} vs {y[first].item()!r}")
