"""Will deep_gemm work here, and why not?

:func:`check_jit` is the cheap probe for callers (nothing is compiled; with
``gpu=False`` the driver is not touched either, safe before forking workers);
``python -m deep_gemm.doctor`` prints the same findings in full and, in
addition, compiles a tiny kernel (and runs it on an SM90 GPU). A *problem*
stops deep_gemm from running GEMMs here and comes with its fix; a *warning*
is worth knowing but does not.
"""

from __future__ import annotations

import ctypes
import dataclasses
import glob
import os
import sys
from typing import Any, Optional

from . import _variant

# What the kernels include from the compiler's own headers (ops/jit.cpp's kRequiredHeaders).
REQUIRED_HEADERS = (("CUDA runtime headers", "cuda_bf16.h"), ("CCCL headers", "cuda/std/cstdint"))


@dataclasses.dataclass(frozen=True)
class Problem:
    what: str
    fix: str

    def __str__(self) -> str:
        return f"{self.what} (fix: {self.fix})" if self.fix else self.what


@dataclasses.dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    arch: str  # "sm_90"
    sm_count: int


@dataclasses.dataclass(frozen=True)
class JitVerdict:
    """The answer of :func:`check_jit`: ``ok`` (also its truth value) when nothing needed is missing."""

    ok: bool
    problems: tuple[Problem, ...]
    warnings: tuple[Problem, ...]
    backend: str  # "nvcc", "nvrtc" or "" when no compiler is usable
    compiler: str
    gpus: tuple[Gpu, ...]
    facts: dict[str, str]  # what the doctor prints, label -> value

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if self.ok:
            return f"deep_gemm can run here ({self.backend} {self.compiler})"
        return "deep_gemm cannot run here: " + "; ".join(str(p) for p in self.problems)


class _Findings:
    def __init__(self) -> None:
        self.facts: dict[str, str] = {}
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []
        self.gpus: list[Gpu] = []
        self.backend = ""
        self.compiler = ""

    def fact(self, label: str, value: str) -> None:
        self.facts[label] = value

    def problem(self, what: str, fix: str) -> None:
        self.problems.append(Problem(what, fix))

    def warn(self, what: str, fix: str = "") -> None:
        self.warnings.append(Problem(what, fix))

    def verdict(self) -> JitVerdict:
        return JitVerdict(not self.problems, tuple(self.problems), tuple(self.warnings), self.backend, self.compiler,
                          tuple(self.gpus), dict(self.facts))


# ---- the package -------------------------------------------------------------------------


def _check_package(f: _Findings) -> bool:
    """Version, variant and the extension; False when the extension is not usable."""
    import deep_gemm

    f.fact("deep_gemm", f"{deep_gemm.__version__} at {os.path.dirname(os.path.abspath(deep_gemm.__file__))}")
    variants = _variant.installed()
    if len(variants) > 1:
        f.problem(_variant.conflict_message(variants, _torch_cuda()).removeprefix("deep_gemm: "),
                  f"pip uninstall -y {' '.join(v.name for v in variants)}, then install one of them")
    elif variants:
        f.fact("variant", variants[0].describe())
    else:
        f.fact("variant", "none recorded (no deep-gemm-cu12/-cu13 metadata: a source or development install)")
    err = getattr(deep_gemm, "_import_error", None)
    if err is not None and len(variants) <= 1:
        f.problem(f"import deep_gemm fails: {err}", "reinstall the wheel (pip install --force-reinstall "
                  f"{variants[0].name if variants else 'deep-gemm-cu13'}) into this environment")
    return err is None


def _torch_cuda() -> Optional[str]:
    try:
        import torch
    except Exception:
        return None
    return torch.version.cuda


def _check_torch(f: _Findings, extension_ok: bool, variants: list[_variant.Variant]) -> Optional[str]:
    import torch

    cuda = torch.version.cuda
    target = ""
    if extension_ok:
        major, minor = torch.ops.deep_gemm._build_info()
        target = f"{major}.{minor}"
        have = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
        if have < (major, minor):
            f.problem(f"torch {torch.__version__} is older than {target}, the stable-ABI target this build needs",
                      f"pip install 'torch>={target}'")
    f.fact("torch", f"{torch.__version__} ({f'CUDA {cuda}' if cuda else 'CPU build, no CUDA'})"
           + (f", stable-ABI target {target} (runs on torch >= {target})" if target else ""))
    if not cuda:
        f.problem(f"torch {torch.__version__} is a CPU build: deep_gemm's GEMMs take CUDA tensors",
                  "install a CUDA build of torch (torch.version.cuda 13.x for deep-gemm-cu13, 12.x for -cu12)")
    elif variants and variants[0].cuda_major != int(cuda.split(".")[0]):
        v = variants[0]
        f.warn(f"{v.name} is meant for a torch built with CUDA {v.cuda_major}; this torch has CUDA {cuda}",
               f"pip uninstall -y {v.name} && pip install deep-gemm-cu{cuda.split('.')[0]}")
    return cuda


# ---- the driver and the GPUs ---------------------------------------------------------------


_ATTR_SM_COUNT, _ATTR_CC_MAJOR, _ATTR_CC_MINOR = 16, 75, 76


def probe_driver() -> dict[str, Any]:
    """The driver through libcuda itself (not torch, whose build may lack CUDA):
    {"error": why} or {"version": (major, minor), "gpus": [Gpu, ...], "error": ...}."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return {"error": f"libcuda.so.1 cannot be loaded ({e})"}

    def name_of(code: int) -> str:
        text = ctypes.c_char_p()
        try:
            lib.cuGetErrorName(code, ctypes.byref(text))
        except AttributeError:  # pragma: no cover - very old drivers
            pass
        return text.value.decode() if text.value else f"CUresult {code}"

    out: dict[str, Any] = {"gpus": []}
    version = ctypes.c_int(0)
    if lib.cuDriverGetVersion(ctypes.byref(version)) == 0:
        out["version"] = (version.value // 1000, version.value % 1000 // 10)
    rc = lib.cuInit(0)
    if rc != 0:
        out["error"] = f"cuInit failed: {name_of(rc)}"
        return out
    count = ctypes.c_int(0)
    rc = lib.cuDeviceGetCount(ctypes.byref(count))
    if rc != 0:
        out["error"] = f"cuDeviceGetCount failed: {name_of(rc)}"
        return out
    for i in range(count.value):
        dev = ctypes.c_int(0)
        if lib.cuDeviceGet(ctypes.byref(dev), i) != 0:
            continue
        buf = ctypes.create_string_buffer(256)
        lib.cuDeviceGetName(buf, 256, dev)
        attrs = []
        for attr in (_ATTR_SM_COUNT, _ATTR_CC_MAJOR, _ATTR_CC_MINOR):
            v = ctypes.c_int(0)
            lib.cuDeviceGetAttribute(ctypes.byref(v), attr, dev)
            attrs.append(v.value)
        out["gpus"].append(Gpu(i, buf.value.decode(errors="replace"), f"sm_{attrs[1]}{attrs[2]}", attrs[0]))
    return out


def _check_gpus(f: _Findings, torch_cuda: Optional[str]) -> None:
    d = probe_driver()
    f.fact("driver", f"supports CUDA {d['version'][0]}.{d['version'][1]}" if "version" in d else "not found")
    if "error" in d:
        f.fact("GPU", "none")
        if "version" not in d:
            f.problem(f"no NVIDIA driver: {d['error']}",
                      "run on a machine with an NVIDIA Hopper (SM90) GPU and its driver; without one, kernels can "
                      "still be compiled ahead of time (python -m deep_gemm.warmup)")
        else:
            f.problem(f"the NVIDIA driver sees no usable GPU: {d['error']}",
                      "check CUDA_VISIBLE_DEVICES, the container's GPU access (--gpus) and nvidia-smi")
        return
    f.gpus = d["gpus"]
    for g in f.gpus:
        f.fact(f"GPU {g.index}", f"{g.name}, {g.arch}, {g.sm_count} SMs")
    if not f.gpus:
        f.problem("the NVIDIA driver sees no GPU", "check CUDA_VISIBLE_DEVICES and the container's GPU access")
        return
    hopper = [g for g in f.gpus if g.arch == "sm_90"]
    if not hopper:
        f.problem(f"no SM90 (Hopper) GPU: found {', '.join(f'{g.name} ({g.arch})' for g in f.gpus)}; deep_gemm's "
                  "kernels are built for sm_90a only", "run on an H100, H800, H200 or GH200")
    elif len(hopper) < len(f.gpus):
        f.warn("some GPUs are not SM90: deep_gemm's ops raise a clear error on those",
               "restrict CUDA_VISIBLE_DEVICES to the Hopper GPUs")
    if torch_cuda and hopper:
        import torch

        if not torch.cuda.is_available():
            f.problem(f"torch (CUDA {torch_cuda}) cannot use the GPU (torch.cuda.is_available() is False)",
                      "check that torch's CUDA major is supported by the driver (nvidia-smi)")
    drv = d.get("version")
    major = _compiler_cuda_major(f.compiler)
    if drv and major and drv[0] < major:
        f.problem(f"the driver supports CUDA {drv[0]}.{drv[1]}, but the JIT compiler is CUDA {major}: its kernels "
                  "will not load", f"upgrade the NVIDIA driver to one for CUDA {major}, or use the CUDA "
                  f"{drv[0]} variant (deep-gemm-cu{drv[0]}) with a CUDA {drv[0]} torch")


def _compiler_cuda_major(version: str) -> int:
    for word in version.replace(",", " ").split():
        head = word.split(".")[0]
        if "." in word and head.isdigit():
            return int(head)
    return 0


# ---- the JIT ----------------------------------------------------------------------------


def _split_fix(message: str) -> tuple[str, str]:
    """(what, fix) out of one of deep_jit's messages, which name the fix in their last sentence."""
    for marker in (" Fix: ", "; fix ", "; unset it or ", ". Install ", ". Set "):
        at = message.find(marker)
        if at >= 0:
            return message[:at], message[at:].lstrip(" .;").removeprefix("Fix: ")
    return message, "see the message"


# What each piece of the pip-only toolchain comes from: piece -> distributions (CUDA 13, CUDA 12).
_WHEELS = {"nvrtc": ("nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu12"),
           "cuda_bf16.h": ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12"),
           "cuda/std/cstdint": ("nvidia-cuda-cccl", "nvidia-cuda-cccl-cu12")}


def _wheel_of(piece: str, path: str) -> str:
    """"the <dist> <version> wheel" when `path` lies in that installed distribution's site directory."""
    import importlib.metadata

    for name in _WHEELS[piece]:
        try:
            dist = importlib.metadata.distribution(name)
            site = os.path.realpath(os.fspath(dist.locate_file("")))
        except Exception:
            continue
        if os.path.realpath(path).startswith(site + os.sep):
            return f"the {name} {dist.version} wheel"
    return ""


def _header_dir(dirs: list[str], header: str) -> str:
    return next((d for d in dirs if os.path.isfile(os.path.join(d, header))), "")


def _toolkit_include_dirs(nvcc: str) -> list[str]:
    """The folders nvcc itself adds (its INCLUDES and SYSTEM_INCLUDES, from `nvcc --dryrun`), else
    the toolkit layout guessed from its real path."""
    import re
    import subprocess

    dirs: list[str] = []
    try:
        out = subprocess.run([nvcc, "--dryrun", "-cubin", "-arch=sm_90a", "x.cu", "-o", "x.cubin"],
                             capture_output=True, text=True, timeout=60).stderr
        for line in out.splitlines():
            if line.startswith("#$ INCLUDES=") or line.startswith("#$ SYSTEM_INCLUDES="):
                dirs += [os.path.normpath(d) for d in re.findall(r'"(?:-I)?([^"-][^"]*)"', line)]
    except (OSError, subprocess.SubprocessError):
        pass
    if not dirs:
        root = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
        dirs = [os.path.join(root, "include"), *sorted(glob.glob(os.path.join(root, "targets", "*", "include")))]
    return [p for d in dict.fromkeys(dirs) for p in (d, os.path.join(d, "cccl")) if os.path.isdir(p)]


def _check_jit(f: _Findings) -> None:
    from . import _jit

    info = _jit.get_jit()
    if not os.path.isdir(os.path.join(info.include_root, "deep_gemm", "impls")):
        f.problem(f"the kernel headers are missing from {info.include_root}", "reinstall the wheel")
    if info.compiler_version.startswith("unavailable: "):
        what, fix = _split_fix(info.compiler_version.removeprefix("unavailable: "))
        f.fact("JIT backend", "none usable")
        f.problem(f"no usable JIT compiler: {what}", fix)
        env_dirs = os.environ.get("DG_JIT_NVRTC_INCLUDE_DIRS", "")
        dirs = [d for d in env_dirs.split(":") if d] or list(_jit.find_wheel_nvrtc()[1])
    else:
        f.backend, f.compiler = info.backend, info.compiler_version
        f.fact("JIT backend", f"{info.compiler_version} ({info.compiler_path})" if info.backend == "nvrtc" else
               f"{info.backend} {info.compiler_version} ({info.compiler_path})")
        why = info.selection
        if info.backend == "nvrtc" and "(configured by the caller)" in why:
            why = why.replace("(configured by the caller)", f"({_wheel_of('nvrtc', info.compiler_path) or 'found by deep_gemm'})")
        f.fact("why", why)
        if info.backend == "nvrtc":
            dirs = info.system_include_dirs
        else:
            dirs = _toolkit_include_dirs(info.compiler_path)
    for label, header in REQUIRED_HEADERS:
        where = _header_dir(dirs, header)
        wheel = _wheel_of(header, where) if where else ""
        f.fact(label, f"{where} ({header}{', ' + wheel if wheel else ''})" if where else
               f"missing ({header} in none of {dirs or 'no folders'})")
        # With NVRTC a missing header is already the "no usable JIT compiler" problem above; for nvcc
        # the toolkit may know folders of its own (nvcc.profile), so it is only a warning.
        if not where and info.backend == "nvcc":
            f.warn(f"nvcc's toolkit seems to lack {header}", "install the toolkit's cudart and cccl headers")


def _cache_root_state(root: str) -> tuple[bool, bool]:
    """(exists, writable): a root that does not exist yet is writable if it can be created."""
    if os.path.isdir(root):
        return True, os.access(root, os.W_OK | os.X_OK)
    parent = root
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    return False, bool(parent) and os.path.isdir(parent) and os.access(parent, os.W_OK | os.X_OK)


def _entries(root: str, deep: bool) -> tuple[int, int, dict[str, int]]:
    """(entries, bytes, {"<backend> <compiler>": count}); sizes and manifests only when `deep`."""
    cache = os.path.join(root, "cache")
    try:
        names = os.listdir(cache)
    except OSError:
        return 0, 0, {}
    if not deep:
        return len(names), 0, {}
    total, kinds = 0, {}
    for name in names:
        entry = os.path.join(cache, name)
        try:
            for file in os.scandir(entry):
                total += file.stat(follow_symlinks=False).st_size
            with open(os.path.join(entry, "manifest"), encoding="utf-8", errors="replace") as fh:
                fields = dict(line.partition(" ")[::2] for line in fh.read(65536).splitlines())
        except OSError:
            continue
        kind = f"{fields.get('backend', '?')} {fields.get('compiler_version', '')}".strip()
        kinds[kind] = kinds.get(kind, 0) + 1
    return len(names), total, kinds


def _check_cache(f: _Findings, deep: bool) -> None:
    roots = _cache_roots()
    for i, root in enumerate(roots):
        exists, writable = _cache_root_state(root)
        n, size, kinds = _entries(root, deep)
        detail = f"{n} entries" + (f", {size / 2**20:.1f} MiB" if deep else "")
        if kinds:
            detail += " (" + ", ".join(f"{c} {k}" for k, c in sorted(kinds.items())) + ")"
        state = ("writable" if writable else "read-only") if exists else ("will be created" if writable else
                                                                          "cannot be created")
        f.fact("cache root" if i == 0 else f"cache root {i + 1}", f"{root}: {state}, {detail}")
        if i == 0 and not writable:
            others = sum(_entries(r, False)[0] for r in roots)
            if others:
                f.warn(f"the first cache root {root} is not writable: only kernels already in the cache can be used, "
                       "and any other fails", "put a writable directory first: DG_JIT_CACHE_DIR=/writable/dir:"
                       + ":".join(roots))
            else:
                f.problem(f"the JIT cache root {root} is not writable and holds no kernels",
                          "set DG_JIT_CACHE_DIR to a writable directory")
        if kinds and f.backend:
            mine = sum(c for k, c in kinds.items() if k.split(" ")[0] == f.backend)
            if not mine:
                other = sorted({k.split(' ')[0] for k in kinds})
                f.warn(f"the cache {root} holds kernels built with {', '.join(other)} only, and this runtime "
                       f"compiles with {f.backend}: they will not be used",
                       "DG_JIT_USE_NVRTC=1 to use NVRTC's entries" if "nvrtc" in other else
                       "warm the cache with the runtime's backend (python -m deep_gemm.warmup --backend "
                       f"{f.backend})")
    record = os.environ.get("DG_JIT_RECORD")
    if record:
        f.fact("recording", f"every kernel used is appended to {record} (DG_JIT_RECORD)")


def _cache_roots() -> list[str]:
    try:
        from . import _jit

        return _jit.get_jit().cache_roots
    except Exception:  # no extension: the runtime's rule (DG_JIT_CACHE_DIR, else ~/.deep_gemm)
        value = os.environ.get("DG_JIT_CACHE_DIR", "")
        roots = [r for r in value.split(":") if r] or [os.path.join(os.path.expanduser("~"), ".deep_gemm")]
        return [os.path.abspath(r) for r in roots]


# ---- together --------------------------------------------------------------------------------


def collect(gpu: bool = True, deep: bool = False) -> _Findings:
    """Every finding; `deep` adds the cache's size and contents (reads every manifest)."""
    f = _Findings()
    f.fact("python", f"{sys.version.split()[0]} ({sys.executable})")
    extension_ok = _check_package(f)
    variants = _variant.installed()
    try:
        torch_cuda = _check_torch(f, extension_ok, variants)
    except ImportError as e:
        f.problem(f"torch cannot be imported: {e}", "pip install 'torch>=2.11' (a CUDA build)")
        return f
    if extension_ok:
        _check_jit(f)
    _check_cache(f, deep)
    if gpu:
        _check_gpus(f, torch_cuda)
    return f


def check_jit(gpu: bool = True) -> JitVerdict:
    """Whether deep_gemm can compile and run its kernels here, and if not why, with the fix.

    Cheap: nothing is compiled. With ``gpu=False`` the CUDA driver is not touched
    (safe in a parent process that forks workers later); the verdict then speaks
    of the compiler, headers and cache only. ``python -m deep_gemm.doctor`` prints
    the same findings and also compiles and runs a tiny kernel.
    """
    from . import _args

    return collect(gpu=_args.bool_("check_jit", "gpu", gpu)).verdict()


def selftest(f: _Findings) -> None:
    """Compiles the self-test kernel into a fresh cache root (so the compiler itself is
    exercised, whatever the cache holds) and, on an SM90 GPU, runs it."""
    import tempfile
    import time

    import torch

    from . import _jit

    run = bool(f.gpus) and any(g.arch == "sm_90" for g in f.gpus) and torch.cuda.is_available()
    saved = {k: os.environ.get(k) for k in ("DG_JIT_CACHE_DIR", "DG_JIT_RECORD")}
    with tempfile.TemporaryDirectory(prefix="deep_gemm-doctor-") as tmp:
        os.environ["DG_JIT_CACHE_DIR"] = tmp
        os.environ.pop("DG_JIT_RECORD", None)
        try:
            _jit.configure()
            t0 = time.perf_counter()
            torch.ops.deep_gemm.jit_selftest(None)
            took = time.perf_counter() - t0
            f.fact("self-test compile", f"a tiny kernel compiled with {f.backend} in {took:.1f} s")
            if run:
                out = torch.full((1000,), -1, dtype=torch.int32, device="cuda")
                torch.ops.deep_gemm.jit_selftest(out)
                want = (torch.arange(1000, device="cuda", dtype=torch.int32) % 256) * 3 + 2
                bad = int((out != want).sum())
                name = torch.cuda.get_device_name()
                if bad:
                    f.problem(f"the self-test kernel ran on {name} but wrote {bad} of 1000 wrong values",
                              "report this with the doctor's output")
                else:
                    f.fact("self-test run", f"ran on {name}: all 1000 values right")
            elif f.gpus or not f.problems:
                f.fact("self-test run", "skipped (no usable SM90 GPU)")
        except RuntimeError as e:
            what, fix = _split_fix(str(e))
            f.problem(f"the self-test kernel failed: {what}", fix)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            _jit.configure()
