"""compute-sanitizer memcheck driver for the kernel paths added on 2026-11-30 (run on the
GPU host under `compute-sanitizer --tool memcheck`): BLOCK_M 256 (two slabs per math
warpgroup), BLOCK_N 192, the overlapped contiguous grouped kernel, PDL launches, and (since
2026-12-01) the tail boxes of dense GEMMs whose M is not a multiple of BLOCK_M.
Shapes are small so the sanitizer finishes quickly; the choices were checked with
DG_PRINT_CONFIGS."""
import torch

import deep_gemm as dg
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

for pdl in (False, True):
    dg.set_pdl(pdl)
    # 129, 200, 5, 389: tail boxes (the last m-block's own tensor maps), bf16 and fp32 out.
    for m, n, k in [(2048, 4096, 512), (129, 12288, 512), (128, 24576, 1536), (200, 2112, 512), (5, 4096, 512)]:
        a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda"), use_ue8m0=False)
        b = per_block_cast_to_fp8(torch.randn(n, k, device="cuda"), use_ue8m0=False)
        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        dg.fp8_gemm_nt(a, b, d)
    for m, n, k in [(389, 576, 512), (5, 2112, 512)]:
        a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda"), use_ue8m0=False)
        b = per_token_cast_to_fp8(torch.randn(n, k, device="cuda"), use_ue8m0=False)
        d = torch.zeros(m, n, device="cuda")
        dg.fp8_gemm_nt(a, b, d, c=d, recipe=(1, 1, 128))
    g, n, k, align = 3, 2048, 512, dg.get_mk_alignment_for_contiguous_layout()
    index = []
    for grp, r in enumerate([300, 0, 130]):
        index += [grp] * r + [-1] * ((r + align - 1) // align * align - r)
    a = per_token_cast_to_fp8(torch.randn(len(index), k, device="cuda"), use_ue8m0=False)
    parts = [per_block_cast_to_fp8(torch.randn(n, k, device="cuda"), use_ue8m0=False) for _ in range(g)]
    b = (torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts]))
    d = torch.empty(len(index), n, device="cuda", dtype=torch.bfloat16)
    dg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, torch.tensor(index, dtype=torch.int32, device="cuda"))
dg.set_pdl(False)
torch.cuda.synchronize()
print("sanitizer script done")
