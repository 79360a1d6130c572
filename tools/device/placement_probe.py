"""Does the speed of one kernel depend on where its operands live? (GPU host)

4096x4096x7168 and 4096x7168x2048 run ~10% apart from one process to the next with the
same kernel (NOTES.md, session 6). This probe allocates several independent sets of the
operands (A with its scales, B with its scales) and of the output D in one process and
times every pairing with the bench protocol (L2 flushed before each launch, median of 30),
twice, with scales prepared in the kernel's layout (no conversion launch). If the rows
(operand sets) differ, operand placement matters; if the columns (outputs) differ, the
output's does; if the two rounds differ, it is time, not place.

  python tools/device/placement_probe.py [sets]
"""

import sys

import torch

import deep_gemm as dg
from deep_gemm import bench
from deep_gemm.utils.math import per_block_cast_to_fp8, per_token_cast_to_fp8


def main() -> None:
    sets = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    timer = bench.LaunchTimer(30, 3)
    for m, n, k in [(4096, 4096, 7168), (4096, 7168, 2048)]:
        operands, outputs = [], []
        for i in range(sets):
            torch.manual_seed(i)
            a_q = per_token_cast_to_fp8(bench.randn(m, k), use_ue8m0=False)
            b_q = per_block_cast_to_fp8(bench.randn(n, k), use_ue8m0=False)
            operands.append(((a_q[0], dg.get_mn_major_tma_aligned_tensor(a_q[1])), b_q))
            outputs.append(torch.empty(m, n, dtype=torch.bfloat16, device="cuda"))
        print(f"== {m}x{n}x{k}: rows = operand sets, columns = outputs, µs", flush=True)
        for rnd in range(2):
            for i, (a, b) in enumerate(operands):
                row = [timer.measure(lambda a=a, b=b, d=d: dg.fp8_gemm_nt(a, b, d))["us"] for d in outputs]
                mb = a[0].data_ptr() >> 20, b[0].data_ptr() >> 20
                print(f"round {rnd} set {i} (A @{mb[0]} MiB, B @{mb[1]} MiB): " + " ".join(f"{t:7.1f}" for t in row),
                      flush=True)
        del operands, outputs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
