"""The kernels' machine code, on the CPU machine: tools/sass_release_check.py on SASS text
of a 1D1D kernel, then the chosen kernels of the benchmark suites and of small-M, tail and
FP32-out shapes compiled and disassembled (cuobjdump and nvdisasm: `nox -s tests` installs
them from pip), checked for QGMMA, local memory and stage releases with a read in flight."""

import glob
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "sass_release_check", Path(__file__).resolve().parents[1] / "tools" / "sass_release_check.py")
check_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_module)

# LDS (write scoreboard 0), a NOP, then the stage release with an empty wait mask: the
# sequence of the 1D1D K loop before its proxy fence (cuobjdump 13.2, CUDA 13.0 ptxas).
LDS = ("        /*1100*/                   LDS.64 R24, [R147+0x30de0] ;        /* 0x030de00093187984 */\n"
       "                                                                       /* 0x000e220000000a00 */\n")
NOP = ("        /*1110*/                   NOP ;                               /* 0x0000000000007918 */\n"
       "                                                                       /* 0x000fe20000000000 */\n")
MEMBAR = ("        /*1114*/                   MEMBAR.ALL.CTA ;                 /* 0x0000000000007992 */\n"
          "                                                                    /* 0x000bec0000008000 */\n")


def _arrive(wait_mask):
    high = 0x000FE20008100006 & ~(0x3F << 52) | (wait_mask << 52)
    return ("        /*1120*/              @!P0 SYNCS.ARRIVE.TRANS64.A1T0 RZ, [UR6], RZ ;   /* 0x000000ffffff89a7 */\n"
            f"                                                                       /* 0x{high:016x} */\n")


def test_release_behind_an_lds_is_reported():
    found = check_module.check(LDS + NOP + _arrive(0))
    assert len(found) == 1
    addr, insn, lds = found[0]
    assert addr == 0x1120 and "SYNCS.ARRIVE" in insn and lds == [(0x1100, "LDS.64 R24, [R147+0x30de0]")]


def test_release_after_the_lds_is_waited_for_or_fenced_is_clean():
    assert check_module.check(LDS + NOP + _arrive(0b000001)) == []
    assert check_module.check(LDS + MEMBAR + _arrive(0)) == []
    # A wait on another scoreboard does not cover the LDS.
    assert len(check_module.check(LDS + NOP + _arrive(0b000010))) == 1


def _sass_tools_dir():
    """The folder holding cuobjdump and nvdisasm: PATH, the CUDA toolkit, or pip's nvidia wheels."""
    found = shutil.which("cuobjdump")
    candidates = [os.path.dirname(found)] if found else []
    candidates.append("/usr/local/cuda/bin")
    for root in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        candidates += glob.glob(os.path.join(root, "nvidia", "cu1*", "bin"))
    for d in candidates:
        if os.path.isfile(os.path.join(d, "cuobjdump")) and os.path.isfile(os.path.join(d, "nvdisasm")):
            return d
    return None


SASS_TOOLS = _sass_tools_dir()
HAS_NVCC = shutil.which("nvcc") is not None or os.path.exists("/usr/local/cuda/bin/nvcc")


@pytest.mark.skipif(SASS_TOOLS is None or not HAS_NVCC, reason="needs nvcc, cuobjdump and nvdisasm")
def test_chosen_kernels_use_qgmma_no_local_memory_and_release_after_their_reads(tmp_path):
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path))
    shapes = ["1,2112,7168", "65,2112,7168", "129,4096,7168", "200,384,512", "4097,7168,2048",
              "4096,7168,2048:fp32", "128,7168,2048:fp32", "4097,2112,7168:fp32"]
    runs = [["--suite", "fp8"], ["--suite", "grouped"], [a for s in shapes for a in ("--shape", s)]]
    cubins = []
    for args in runs:
        out = subprocess.run([sys.executable, "-m", "deep_gemm.warmup", "--num-sms", "132", *args], env=env,
                             capture_output=True, text=True, timeout=1800)
        assert out.returncode == 0, out.stderr[-3000:]
        cubins += [(line.split()[-2], line.split()[-1]) for line in out.stdout.strip().splitlines()]
    gemms = {name: path for name, path in cubins if name.startswith("sm90_fp8_")}
    assert len(gemms) >= 25, sorted(gemms)
    tool_env = dict(os.environ, PATH=SASS_TOOLS + os.pathsep + os.environ.get("PATH", ""))
    problems = []
    for name, path in sorted(gemms.items()):
        dump = subprocess.run([os.path.join(SASS_TOOLS, "cuobjdump"), "--dump-sass", path], env=tool_env,
                              capture_output=True, text=True, timeout=300)
        assert dump.returncode == 0, dump.stderr[-2000:]
        sass = dump.stdout
        if "QGMMA" not in sass:
            problems.append(f"{name}: no QGMMA")
        if "LDL" in sass or "STL" in sass:
            problems.append(f"{name}: local memory")
        problems += [f"{name}: release at {addr:05x} with {lds}" for addr, _, lds in check_module.check(sass)]
    assert not problems, problems
