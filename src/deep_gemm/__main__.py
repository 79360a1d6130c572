"""python -m deep_gemm: the doctor (python -m deep_gemm.doctor --help)."""

from .doctor import main

raise SystemExit(main())
