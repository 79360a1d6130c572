"""A small serving-like workload over every kernel family (dense FP8 GEMM with bf16 and fp32
output and the small-M kernel, m-grouped contiguous and masked, k-grouped nt and tn, the
scale layout op), then one JSON line of what the JIT did: compiles, disk hits, backend.

    python3 tools/device/deploy_workload.py [--max-compiles N] [--label TEXT]

Run under DG_JIT_RECORD=path to record the kernels it uses, or against a warmed cache with
--max-compiles 0 (exit 1 when more compiles happened). tools/device/deploy_check.sh runs it
from several installs and users; opcheck_moe.py reuses its operands.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

import deep_gemm
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

BF16, I32 = torch.bfloat16, torch.int32


def dense(m: int, n: int, k: int):
    a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda", dtype=BF16), use_ue8m0=False)
    b = per_block_cast_to_fp8(torch.randn(n, k, device="cuda", dtype=BF16), use_ue8m0=False)
    return a, b, torch.empty(m, n, device="cuda", dtype=BF16)


def dense_fp32(m: int, n: int, k: int):
    a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda", dtype=BF16), use_ue8m0=False)
    b = per_token_cast_to_fp8(torch.randn(n, k, device="cuda", dtype=BF16), use_ue8m0=False)
    c = torch.randn(m, n, device="cuda")
    return a, b, torch.empty(m, n, device="cuda"), c


def grouped_b(g: int, n: int, k: int):
    parts = [per_block_cast_to_fp8(torch.randn(n, k, device="cuda", dtype=BF16), use_ue8m0=False) for _ in range(g)]
    return torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])


def contiguous_index(rows: list[int]) -> torch.Tensor:
    """Per-row group index, each group padded with -1 rows to the contiguous-layout alignment."""
    align = deep_gemm.get_mk_alignment_for_contiguous_layout()
    index: list[int] = []
    for grp, r in enumerate(rows):
        index += [grp] * r + [-1] * ((r + align - 1) // align * align - r)
    return torch.tensor(index, dtype=I32, device="cuda")


def contiguous(rows: list[int], n: int, k: int):
    index = contiguous_index(rows)
    a = per_token_cast_to_fp8(torch.randn(len(index), k, device="cuda", dtype=BF16), use_ue8m0=False)
    return a, grouped_b(len(rows), n, k), torch.empty(len(index), n, device="cuda", dtype=BF16), index


def masked(g: int, max_m: int, n: int, k: int):
    x = torch.randn(g * max_m, k, device="cuda", dtype=BF16)
    a, sfa = per_token_cast_to_fp8(x, use_ue8m0=False)
    a = (a.view(g, max_m, k), sfa.view(g, max_m, -1))
    masked_m = torch.tensor([max_m // 2 + 7 * i for i in range(g)], dtype=I32, device="cuda").clamp(max=max_m)
    return a, grouped_b(g, n, k), torch.empty(g, max_m, n, device="cuda", dtype=BF16), masked_m


def k_grouped(ks: list[int], m: int, n: int, tn: bool):
    sum_k = sum(ks)
    xa = torch.randn(sum_k, m, device="cuda", dtype=BF16)
    xb = torch.randn(sum_k, n, device="cuda", dtype=BF16)
    # One scale per row per 128 K: quantise the transposed [M, sum_k] views per token.
    qa, sa = per_token_cast_to_fp8(xa.t().contiguous(), use_ue8m0=False)
    qb, sb = per_token_cast_to_fp8(xb.t().contiguous(), use_ue8m0=False)
    if tn:
        a, b = (qa.t().contiguous(), sa.t().contiguous()), (qb.t().contiguous(), sb.t().contiguous())
    else:  # each group's K-major [M, k_g] block back to back, flat
        offs = [sum(ks[:i]) for i in range(len(ks))]
        a = (torch.cat([qa[:, o:o + kg].contiguous().flatten() for o, kg in zip(offs, ks, strict=True)]),
             sa.t().contiguous())
        b = (torch.cat([qb[:, o:o + kg].contiguous().flatten() for o, kg in zip(offs, ks, strict=True)]),
             sb.t().contiguous())
    d = torch.zeros(len(ks), m, n, device="cuda")
    return a, b, d, ks, torch.tensor(ks, dtype=I32, device="cuda")


def run() -> list[str]:
    """Every family once (each a kernel of its own); returns what it checked."""
    torch.manual_seed(0)
    done = []
    a, b, d = dense(256, 1024, 1024)
    deep_gemm.fp8_gemm_nt(a, b, d)
    ref = per_token_dequant(a) @ per_block_dequant(b).t()
    assert calc_diff(d, ref) < 1e-3, calc_diff(d, ref)
    done.append("dense bf16 256x1024x1024")
    a, b, d = dense(16, 1024, 1024)  # small M: the kernel that reads per-token scales as given
    deep_gemm.fp8_gemm_nt(a, b, d)
    done.append("dense bf16 16x1024x1024")
    a, b, d, c = dense_fp32(128, 512, 512)
    deep_gemm.fp8_gemm_nt(a, b, d, c=c, recipe=(1, 1, 128))
    done.append("dense fp32 + c 128x512x512")
    a, b, d, index = contiguous([100, 0, 300, 50], 512, 1024)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, index)
    done.append("m-grouped contiguous 4 groups")
    a, b, d, mm = masked(4, 256, 512, 1024)
    deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, mm, 128)
    done.append("m-grouped masked 4 x 256")
    for tn in (False, True):
        a, b, d, ks, kt = k_grouped([256, 0, 128], 256, 384, tn)
        fn = deep_gemm.k_grouped_fp8_gemm_tn_contiguous if tn else deep_gemm.k_grouped_fp8_gemm_nt_contiguous
        fn(a, b, d, ks, kt)
        done.append(f"k-grouped {'tn' if tn else 'nt'} 3 groups")
    sf = torch.randn(130, 7, device="cuda")
    out = deep_gemm.get_mn_major_tma_aligned_tensor(sf)
    assert torch.equal(out, sf) and out.stride() == (1, 132)
    done.append("get_mn_major_tma_aligned_tensor")
    torch.cuda.synchronize()
    return done


def per_token_dequant(a):
    x, sf = a
    return x.float() * sf.repeat_interleave(128, 1)[:, : x.shape[1]]


def per_block_dequant(b):
    x, sf = b
    return x.float() * sf.repeat_interleave(128, 0)[: x.shape[0]].repeat_interleave(128, 1)[:, : x.shape[1]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-compiles", type=int, default=None, help="fail when the JIT compiled more kernels")
    ap.add_argument("--label", default="", help="names this run in the JSON line")
    args = ap.parse_args()
    done = run()
    info = deep_gemm.get_jit()
    report = {"label": args.label, "checked": done, "compiles": info.compiles, "compile_failures": info.compile_failures,
              "disk_hits": info.disk_cache_hits, "loaded": info.num_loaded_kernels, "backend": info.backend,
              "compiler": info.compiler_version, "cache_roots": info.cache_roots,
              "deep_gemm": deep_gemm.__file__}
    print(json.dumps(report), flush=True)
    if args.max_compiles is not None and info.compiles > args.max_compiles:
        print(f"deploy_workload: {info.compiles} compiles, expected at most {args.max_compiles}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
