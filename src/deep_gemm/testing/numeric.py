"""Numeric helpers for tests and benchmarks (plain PyTorch, CPU or CUDA)."""

import torch

__all__ = ["calc_diff", "count_bytes"]


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
