"""Run-to-run determinism of the 1D1D kernels (GPU host).

k-grouped: one problem of tests/test_k_grouped.py (16 groups, M 2112, N 4096, ~1024 tokens
per group, group 0 empty), computed twice through the tn path and RUNS times through the nt
path, each output compared bitwise with the first nt one. KG_C picks the accumulation
source: `sep` (C separate from D, the default), `none` (no C) or `same` (C is D, refilled
from a saved copy before each run).

dense (KG_DENSE="m,n,k", optional): the dense FP32-out GEMM with C separate, RUNS times.

For every pair that differs it prints where the differing elements lie (groups, rows,
columns within the 128x128 tile) and, for a few of them, the bad and good values, C, and
where else in the good result (minus C) the bad result (minus C) occurs exactly: that tells
a lost or doubled partial sum from another tile's or another column's value.
Session 22 used the first form on branch `epilogue-1d1d-batched-loads-experiment`, where 2
to 3 runs in 15 differed.

  python tools/device/kg_diff_probe.py [RUNS]      (run from the repository root)
"""
import os
import sys

import torch

sys.path.insert(0, "tests")
from test_k_grouped import Problem, _draw_ks  # noqa: E402

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 15
MODE = os.environ.get("KG_C", "sep")


def explain(name, bad, good, c, max_items=4):
    """bad / good: two outputs that differ ([..., M, N]); c: the accumulation source or None."""
    ne = (bad != good).nonzero()
    lead = ne[:, :-2].unique(dim=0).tolist() if ne.shape[1] > 2 else []
    rows, cols = ne[:, -2], ne[:, -1]
    print(f"  {name}: {ne.shape[0]} elements, lead idx {lead[:8]}, rows {rows.min().item()}-{rows.max().item()}, "
          f"cols {cols.min().item()}-{cols.max().item()}, max |diff| {(bad - good).abs().max().item():.3g}")
    print("    tiles (row//128, col//128):", sorted({(r // 128, q // 128) for r, q in
                                                       zip(rows.tolist(), cols.tolist(), strict=True)})[:8],
          " rows%128 by 16:", torch.bincount((rows % 128) // 16, minlength=8).tolist(),
          " cols%128 by 8:", torch.bincount((cols % 128) // 8, minlength=16).tolist())
    good_res = good - c if c is not None else good
    for idx in ne[:: max(1, ne.shape[0] // max_items)][:max_items].tolist():
        i = tuple(idx)
        cv = c[i].item() if c is not None else 0.0
        b_res, g_res = bad[i].item() - cv, good[i].item() - cv
        hits = (good_res[i[:-2]] == b_res).nonzero()[:3].tolist() if len(i) > 2 else (good_res == b_res).nonzero()[:3].tolist()
        print(f"    at {i}: bad {bad[i].item():.6g} good {good[i].item():.6g} c {cv:.6g}  "
              f"bad-c {b_res:.6g} good-c {g_res:.6g}  bad-c found in good-c at {hits}")


def k_grouped():
    g, m, n, mean_k = 16, 2112, 4096, 1024
    ks = _draw_ks(g, mean_k, seed=g * 7 + n, empty=(0,))
    p = Problem(m, n, ks, seed=g * 3 + n)
    c = torch.randn(g, m, n, device="cuda") if MODE != "none" else None

    def run(fn):
        if MODE == "same":
            d = c.clone()
            fn(d, c=d)
        else:
            d = torch.full((g, m, n), float("nan"), device="cuda")
            fn(d, c=c)
        torch.cuda.synchronize()
        return d

    print(f"k-grouped, C {MODE}, ks {ks}")
    tn1, tn2, first = run(p.tn), run(p.tn), run(p.nt)
    differ = 0
    for name, x, y in [("tn1 tn2", tn1, tn2), ("nt1 tn1", first, tn1)]:
        if not torch.equal(x, y):
            differ += 1
            explain(name, y, x, c)
    del tn1, tn2
    for i in range(2, RUNS + 1):
        d = run(p.nt)
        if not torch.equal(d, first):
            differ += 1
            explain(f"nt1 nt{i}", d, first, c)
    print(f"k-grouped C {MODE}: {differ} of {RUNS + 1} pairs differ")


def dense(shape):
    import deep_gemm
    from deep_gemm.utils import per_token_cast_to_fp8
    m, n, k = shape
    torch.manual_seed(1)
    a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda"), use_ue8m0=False)
    b = per_token_cast_to_fp8(torch.randn(n, k, device="cuda"), use_ue8m0=False)
    c = torch.randn(m, n, device="cuda")
    first, differ = None, 0
    for i in range(1, RUNS + 1):
        d = torch.full((m, n), float("nan"), device="cuda")
        deep_gemm.fp8_gemm_nt(a, b, d, c=c, recipe=(1, 1, 128))
        torch.cuda.synchronize()
        if first is None:
            first = d
        elif not torch.equal(d, first):
            differ += 1
            explain(f"dense 1 {i}", d, first, c)
    print(f"dense {m}x{n}x{k} C sep: {differ} of {RUNS - 1} pairs differ")


if __name__ == "__main__":
    k_grouped()
    if os.environ.get("KG_DENSE"):
        dense(tuple(int(v) for v in os.environ["KG_DENSE"].split(",")))
