"""Pick the distribution variant of this source tree (rewrites pyproject.toml).

    python tools/variant.py --cuda 12|13 [--pin-torch X.Y] [--repo-url URL]

--cuda picks the distribution name (deep-gemm-cu12 / deep-gemm-cu13), the
CUDA-major dependencies (which NVRTC and CUDA header wheels the JIT uses) and
the "Environment :: GPU :: NVIDIA CUDA :: N" classifier. The compiled extension
is the same for both: it links no CUDA library.

--pin-torch X.Y makes a packager's wheel for exactly one torch release: version
``<v>+torchX.Y``, dependency ``torch==X.Y.*``, stable ABI targeted at X.Y, and
``torch==X.Y.*`` in the isolated build environment too. Without it the wheel is portable:
``torch>=2.11`` with the 2.11 stable-ABI target.

--repo-url URL (the repository the wheel is built from; the wheels workflow
passes its own) fills the project URLs; without it they are left as they are.

Only the regions between the ``# >>> variant`` markers are rewritten, so the
script is idempotent and the rest of pyproject.toml stays hand-written.
tools/build_backend/dg_build.py applies the same rewrite for `pip install .` and
`python -m build` from DG_CUDA_MAJOR, DG_PIN_TORCH and DG_REPO_URL.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

OLDEST_TORCH = (2, 11)

# CUDA major -> (distribution name, dependencies besides torch)
CUDA_VARIANTS = {
    12: ("deep-gemm-cu12", ["nvidia-cuda-nvrtc-cu12>=12.8,<13", "nvidia-cuda-runtime-cu12>=12.8,<13",
                            "nvidia-cuda-cccl-cu12>=12.8,<13"]),
    13: ("deep-gemm-cu13", ["nvidia-cuda-nvrtc>=13,<14", "nvidia-cuda-runtime>=13,<14", "nvidia-cuda-cccl>=13,<14"]),
}


def parse_torch(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)\.(\d+)", text)
    if not m:
        raise SystemExit(f"variant.py: --pin-torch wants MAJOR.MINOR such as 2.13, got {text!r}")
    version = (int(m.group(1)), int(m.group(2)))
    if version < OLDEST_TORCH:
        raise SystemExit(f"variant.py: torch {text} is older than the oldest supported {OLDEST_TORCH[0]}.{OLDEST_TORCH[1]}")
    return version


def torch_target_version(major: int, minor: int) -> str:
    # TORCH_TARGET_VERSION layout: major in bits 56..63, minor in bits 48..55.
    return f"0x{major:02x}{minor:02x}000000000000"


def replace_region(text: str, tag: str, body: str) -> str:
    pattern = re.compile(rf"(# >>> {tag}\n).*?(# <<< {tag}\n)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"variant.py: marker region '{tag}' missing from pyproject.toml")
    return pattern.sub(lambda m: m.group(1) + body + m.group(2), text, count=1)


def render(text: str, cuda: int, pin: tuple[int, int] | None, repo_url: str | None = None) -> str:
    name, cuda_deps = CUDA_VARIANTS[cuda]
    torch_req = f"torch=={pin[0]}.{pin[1]}.*" if pin else f"torch>={OLDEST_TORCH[0]}.{OLDEST_TORCH[1]}"
    deps = "".join(f'    "{d}",\n' for d in [torch_req, *cuda_deps])
    text = replace_region(text, "variant", f'name = "{name}"\ndependencies = [\n{deps}]\n')
    suffix = f"+torch{pin[0]}.{pin[1]}" if pin else ""
    text = replace_region(text, "variant-version", f'result = "{{value}}{suffix}"\n')
    text = replace_region(text, "variant-build", f'requires = ["scikit-build-core>=0.11", "{torch_req}"]\n')
    text = replace_region(text, "variant-classifiers", f'    "Environment :: GPU :: NVIDIA CUDA :: {cuda}",\n    ')
    if repo_url:
        url = repo_url.rstrip("/")
        text = replace_region(text, "variant-urls", f'Homepage = "{url}"\nSource = "{url}"\nIssues = "{url}/issues"\n'
                              f'Changelog = "{url}/releases"\n')
    target = torch_target_version(*(pin or OLDEST_TORCH))
    return replace_region(text, "variant-target", f'DG_TORCH_TARGET_VERSION = "{target}"\n')


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuda", type=int, choices=sorted(CUDA_VARIANTS), required=True)
    ap.add_argument("--pin-torch", default=None, help="MAJOR.MINOR of the torch to pin to")
    ap.add_argument("--repo-url", default=None, help="the repository's address, for the project URLs")
    ap.add_argument("--pyproject", type=Path, default=Path(__file__).resolve().parent.parent / "pyproject.toml")
    args = ap.parse_args(argv)
    pin = parse_torch(args.pin_torch) if args.pin_torch else None
    path: Path = args.pyproject
    path.write_text(render(path.read_text(), args.cuda, pin, args.repo_url))
    print(f"variant.py: {CUDA_VARIANTS[args.cuda][0]}, "
          + (f"pinned to torch {pin[0]}.{pin[1]}" if pin else "portable (torch>=2.11)"), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
