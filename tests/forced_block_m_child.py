"""Child process of test_grouped.py::test_forced_block_m_edge_layouts (DG_DEV_SM90_FP8_BLOCK_M is
read once per process). Runs the dense and m-grouped bf16-out GEMMs on layouts whose tiles
are only partly valid, against a float reference with the output poisoned (NaN) first, and
prints one line per case: "CASE <name> OK" or raises."""

from __future__ import annotations

import torch

import deep_gemm
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

I32 = torch.int32
N, K = 384, 512


def deq_rows(x, sf):
    return x.float() * sf.repeat_interleave(128, dim=-1)[..., : x.shape[-1]]


def deq_blocks(b, sfb):
    s = sfb.repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)
    return b.float() * s[: b.shape[0], : b.shape[1]]


def grouped_b(g):
    parts = [per_block_cast_to_fp8(torch.randn(N, K, device="cuda"), use_ue8m0=False) for _ in range(g)]
    return torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])


def check(name, got, ref):
    assert not got.isnan().any(), f"{name}: rows that must be written were not"
    diff = calc_diff(got, ref).item()
    assert diff < 1e-3, f"{name}: calc_diff {diff:.2e}"


def dense():
    # M tails that leave whole 64-row slabs of the last tile empty.
    for m in (1, 65, 129, 200, 4097):
        a = per_token_cast_to_fp8(torch.randn(m, K, device="cuda"), use_ue8m0=False)
        b = per_block_cast_to_fp8(torch.randn(N, K, device="cuda"), use_ue8m0=False)
        d = torch.full((m, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        deep_gemm.fp8_gemm_nt(a, b, d)
        torch.cuda.synchronize()
        check(f"dense m={m}", d, deq_rows(*a) @ deq_blocks(*b).t())
        print(f"CASE dense_m{m} OK", flush=True)


def contiguous():
    align = deep_gemm.get_mk_alignment_for_contiguous_layout()
    # Groups starting at odd and even multiples of 128, an empty group, a group of one
    # row, and a 128-row block of pure padding before a group that starts mid-tile.
    rows = [100, 0, 300, 7, 128, 129, 256, 1, 255]
    index, ends, starts = [], [], []
    for grp, r in enumerate(rows):
        if grp == 6:
            index += [-1] * align
        starts.append(len(index))
        index += [grp] * r
        ends.append(len(index))
        index += [-1] * ((r + align - 1) // align * align - r)
    index += [-1] * align  # trailing padding block
    index_t = torch.tensor(index, dtype=I32, device="cuda")
    a, sfa = per_token_cast_to_fp8(torch.randn(len(index), K, device="cuda"), use_ue8m0=False)
    b, sfb = grouped_b(len(rows))
    a_deq = deq_rows(a, sfa)
    for kind in ("index", "psum"):
        d = torch.full((len(index), N), float("nan"), device="cuda", dtype=torch.bfloat16)
        if kind == "index":
            deep_gemm.m_grouped_fp8_gemm_nt_contiguous((a, sfa), (b, sfb), d, index_t)
            torch.cuda.synchronize()
            valid = index_t >= 0
            assert d[~valid].isnan().all(), "index: padding rows were written"
            for grp, (s, r) in enumerate(zip(starts, rows, strict=True)):
                if r:
                    check(f"index group {grp}", d[s:s + r], a_deq[s:s + r] @ deq_blocks(b[grp], sfb[grp]).t())
        else:
            # psum: group g starts at align_up(end of g-1); no gaps, so lay the rows out again.
            p_index, p_ends, p_starts = [], [], []
            for grp, r in enumerate(rows):
                p_starts.append(len(p_index))
                p_index += [grp] * r
                p_ends.append(len(p_index))
                p_index += [-1] * ((r + align - 1) // align * align - r)
            m_sum = len(p_index)
            pa, psfa = a[:m_sum], sfa[:m_sum]
            d = torch.full((m_sum, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            ends_t = torch.tensor(p_ends, dtype=I32, device="cuda")
            deep_gemm.m_grouped_fp8_gemm_nt_contiguous((pa, psfa), (b, sfb), d, ends_t, use_psum_layout=True,
                                                       expected_m_for_psum_layout=150, ensure_zero_padding=False)
            torch.cuda.synchronize()
            valid = torch.tensor(p_index, device="cuda") >= 0
            assert d[~valid].isnan().all(), "psum: rows outside the groups were written"
            for grp, (s, r) in enumerate(zip(p_starts, rows, strict=True)):
                if r:
                    check(f"psum group {grp}", d[s:s + r], a_deq[s:s + r] @ deq_blocks(b[grp], sfb[grp]).t())
        print(f"CASE contiguous_{kind} OK", flush=True)


def masked():
    rows = [0, 1, 63, 64, 65, 128, 129, 191, 192, 255, 256, 257, 300]
    g, max_m = len(rows), 320
    a, sfa = per_token_cast_to_fp8(torch.randn(g * max_m, K, device="cuda"), use_ue8m0=False)
    a, sfa = a.view(g, max_m, K), sfa.view(g, max_m, -1)
    b, sfb = grouped_b(g)
    d = torch.full((g, max_m, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    deep_gemm.m_grouped_fp8_gemm_nt_masked((a, sfa), (b, sfb), d, torch.tensor(rows, dtype=I32, device="cuda"), 160)
    torch.cuda.synchronize()
    for grp, r in enumerate(rows):
        assert d[grp, r:].isnan().all(), f"masked group {grp}: rows >= masked_m were written"
        if r:
            check(f"masked group {grp}", d[grp, :r], deq_rows(a[grp, :r], sfa[grp, :r]) @ deq_blocks(b[grp], sfb[grp]).t())
    print("CASE masked OK", flush=True)


if __name__ == "__main__":
    torch.manual_seed(5)
    dense()
    contiguous()
    masked()
    print("LOADED", ",".join(deep_gemm.get_jit().loaded_kernels), flush=True)
