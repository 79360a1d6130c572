"""Small test utilities: architecture query and upstream's test decorators."""

import functools
import os
from collections.abc import Callable

import torch

__all__ = ["get_arch_major", "ignore_env", "require_cuda", "test_filter"]


def require_cuda(what: str) -> None:
    """Raise RuntimeError naming ``what`` unless a CUDA device is usable."""
    if not torch.cuda.is_available():
        raise RuntimeError(
            f"deep_gemm.testing.{what} needs a CUDA GPU, but torch.cuda.is_available() is False "
            f"(torch {torch.__version__}, built for CUDA {torch.version.cuda})"
        )


def get_arch_major() -> int:
    """Compute-capability major of the current CUDA device (9 for Hopper)."""
    require_cuda("get_arch_major")
    major, _minor = torch.cuda.get_device_capability()
    return major


def test_filter(condition: Callable[[], bool]):
    """Decorator: run the function only when ``condition()`` is true, else print why not."""

    def decorator(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if condition():
                return func(*args, **kwargs)
            print(f"{func.__name__}:")
            print(f" > Filtered by {condition}")
            print()
            return None

        return wrapper

    return decorator


test_filter.__test__ = False  # not a pytest test despite its name


def ignore_env(name: str, condition: Callable[[], bool]):
    """Decorator: while ``condition()`` holds, run the function with env var ``name`` unset."""

    def decorator(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if not condition():
                return func(*args, **kwargs)
            saved = os.environ.pop(name, None)
            try:
                return func(*args, **kwargs)
            finally:
                if saved is not None:
                    os.environ[name] = saved

        return wrapper

    return decorator
