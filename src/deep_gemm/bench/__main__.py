"""``python -m deep_gemm.bench``: see :mod:`deep_gemm.bench`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
