"""Run-to-run determinism of the k-grouped GEMM (GPU host): one problem of
tests/test_k_grouped.py (16 groups, M 2112, N 4096, ~1024 tokens per group, group 0
empty, C separate from D), computed twice through the tn path and RUNS times through the
nt path, each output compared bitwise with the first nt one. Prints only the pairs that
differ, with where the differing elements lie (groups, rows, columns within the 128x128
tile). Session 22 used it on branch `epilogue-1d1d-batched-loads-experiment`, where 2 to 3
runs in 15 differed.

  python tools/device/kg_diff_probe.py [RUNS]      (run from the repository root)
"""
import sys

import torch

sys.path.insert(0, "tests")
from test_k_grouped import Problem, _draw_ks  # noqa: E402

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 15


def main():
    g, m, n, mean_k = 16, 2112, 4096, 1024
    ks = _draw_ks(g, mean_k, seed=g * 7 + n, empty=(0,))
    p = Problem(m, n, ks, seed=g * 3 + n)
    c = torch.randn(g, m, n, device="cuda")
    outs = {}
    for name in ["tn1", "tn2"] + [f"nt{i}" for i in range(1, RUNS + 1)]:
        d = torch.full((g, m, n), float("nan"), device="cuda")
        (p.nt if name.startswith("nt") else p.tn)(d, c=c)
        torch.cuda.synchronize()
        outs[name] = d
    print("ks", ks)
    differ = 0
    for x, y in [("tn1", "tn2"), ("nt1", "tn1")] + [("nt1", f"nt{i}") for i in range(2, RUNS + 1)]:
        ne = (outs[x] != outs[y]).nonzero()
        if ne.shape[0] == 0:
            continue
        differ += 1
        print(x, y, "mismatches", ne.shape[0], "groups", ne[:, 0].unique().tolist()[:20],
              "rows", ne[:, 1].min().item(), ne[:, 1].max().item(), "cols", ne[:, 2].min().item(),
              ne[:, 2].max().item(), "max |diff|", (outs[x] - outs[y]).abs().max().item())
        print("  rows % 128 by 16:", torch.bincount((ne[:, 1] % 128) // 16, minlength=8).tolist(),
              " cols % 128 by 16:", torch.bincount((ne[:, 2] % 128) // 16, minlength=8).tolist())
    print(f"{differ} of {RUNS + 1} pairs differ")


if __name__ == "__main__":
    main()
