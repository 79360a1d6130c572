"""tools/sass_release_check.py on SASS text taken from a 1D1D kernel (CPU only)."""

import importlib.util
from pathlib import Path

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
