"""Shared-memory reads still in flight when a math warp hands its pipeline stage back.

A math warp releases a stage with an mbarrier arrive (`SYNCS.ARRIVE.TRANS64.A1T0` in the
SASS); the producer may then refill the stage with the TMA. An `LDS` of that stage must
have read shared memory by then, and ptxas (CUDA 13.0) does not make the arrive wait for an
earlier `LDS` whose result is only used later: the TMA's refill can then overtake the read
(2026-12-01, docs/design-notes.md: the 1D1D kernels scaled one K block's last columns with
the next block's SFB, in up to every run, while the other warpgroup's epilogue kept the LSU
busy). The
kernels therefore release through sm90::release_stage_after_reads, which stores a value of
the reads before the arrive. This check reads `cuobjdump --dump-sass` text and, going
through each kernel in address order, reports every consumer arrive issued while an `LDS`
result has not been waited for (its write scoreboard in no later instruction's wait mask,
no MEMBAR since). It follows straight-line order only, which is where these reads sit, and
cannot tell which stage an LDS reads: a finding is a read to look at, and every kernel of
main is expected to have none.

  cuobjdump --dump-sass kernel.cubin | python tools/sass_release_check.py [NAME]
  exit status: 0 clean, 1 an arrive with an LDS in flight (each printed)
"""
import re
import sys

INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s*(.*?);\s*/\* (0x[0-9a-f]+) \*/")
HIGH = re.compile(r"^\s*/\* (0x[0-9a-f]+) \*/\s*$")


def instructions(lines):
    """(address, text, write scoreboard or None, wait mask) per instruction."""
    for i, line in enumerate(lines[:-1]):
        m = INSN.search(line)
        h = HIGH.match(lines[i + 1]) if m else None
        if not h:
            continue
        ctrl = int(h.group(1), 16) >> 41
        wb = (ctrl >> 5) & 7
        yield int(m.group(1), 16), m.group(2).strip(), (None if wb == 7 else wb), (ctrl >> 11) & 0x3F


def check(text):
    """Arrives issued with an LDS in flight: [(address, arrive, [(address, lds)])]."""
    found, pending = [], {}
    for addr, insn, wb, wait in instructions(text.splitlines()):
        for sb in list(pending):
            if wait >> sb & 1:
                del pending[sb]
        depbar = re.search(r"DEPBAR\.LE SB(\d), 0x0", insn)
        if depbar:
            pending.pop(int(depbar.group(1)), None)
        if "MEMBAR" in insn:  # a memory barrier orders every earlier load of the warp
            pending = {}
        if "SYNCS.ARRIVE.TRANS64.A1T0" in insn and pending:
            found.append((addr, insn, sorted(pending.values())))
        if wb is not None:
            opcode = insn.split()[1] if insn.startswith("@") else insn.split()[0]
            if opcode.startswith("LDS"):
                pending[wb] = (addr, insn)
            else:
                pending.pop(wb, None)
        if insn.startswith(("EXIT", "RET")):
            pending = {}
    return found


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "stdin"
    found = check(sys.stdin.read())
    for addr, insn, lds in found:
        print(f"{name}: {addr:05x} {insn} with LDS in flight: " + "; ".join(f"{a:05x} {t}" for a, t in lds))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
