"""Checks an sdist made by `nox -s sdist`: it holds what a wheel build needs, it is the
variant asked for, and every classifier is a known one (PyPI refuses unknown
classifiers at upload; twine check does not look).

    python tools/check_sdist.py dist/deep_gemm_cu13-0.1.0.tar.gz 13
"""

import sys
import tarfile
import tomllib

from trove_classifiers import classifiers

NEEDED = {"CMakeLists.txt", "pyproject.toml", "README.md", "LICENSE", "tools/variant.py", "tools/build_backend/dg_build.py",
          "src/deep_gemm/__init__.py", "cpp/deep_jit/include/deep_jit/runtime.hpp", "cuda/deep_gemm/impls/sf_layout.cuh"}


def main(path: str, cuda: str) -> int:
    with tarfile.open(path) as tf:
        members = tf.getmembers()
        names = {m.name.split("/", 1)[1] for m in members if "/" in m.name}
        root = members[0].name.split("/")[0]
        project = tomllib.loads(tf.extractfile(f"{root}/pyproject.toml").read().decode())["project"]
    problems = []
    if NEEDED - names:
        problems.append(f"the sdist lacks {sorted(NEEDED - names)}")
    if project["name"] != f"deep-gemm-cu{cuda}":
        problems.append(f"its name is {project['name']}, not deep-gemm-cu{cuda}")
    if f"Environment :: GPU :: NVIDIA CUDA :: {cuda}" not in project["classifiers"]:
        problems.append(f"it lacks the classifier Environment :: GPU :: NVIDIA CUDA :: {cuda}")
    unknown = [c for c in project["classifiers"] if c not in classifiers]
    if unknown:
        problems.append(f"unknown trove classifiers: {unknown}")
    for p in problems:
        print(f"check_sdist: {path}: {p}", file=sys.stderr)
    if not problems:
        print(f"check_sdist: {path}: {project['name']}, {len(names)} files, every classifier known")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:3]))
