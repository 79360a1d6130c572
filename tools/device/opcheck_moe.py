"""torch.library.opcheck over every registered deep_gemm op that takes tensors, with real CUDA
operands; then a small MoE block (quantise with deep_gemm.utils, m-grouped contiguous FP8
GEMM, SiLU-and-mul, second m-grouped GEMM) under torch.compile(fullgraph=True) against eager.
One PASS/FAIL line per check; exit 1 on any FAIL.

    python3 tools/device/opcheck_moe.py
"""

from __future__ import annotations

import sys
import traceback

import torch

import deep_gemm
from deep_gemm._stubgen import registered_op_names
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_token_cast_to_fp8

import deploy_workload as w

# Ops with tensor arguments that opcheck does not apply to, and why.
NOT_CHECKED = {
    "jit_selftest": "the doctor's diagnostic (compiles and launches a test kernel); never traced, no fake impl",
}


def samples() -> dict[str, list[tuple]]:
    """op name -> argument tuples in schema order (real CUDA tensors, outputs zeroed)."""
    torch.manual_seed(1)
    s: dict[str, list[tuple]] = {}
    (a, sfa), (b, sfb), d = w.dense(256, 512, 1024)
    (a16, sfa16), (b16, sfb16), d16 = w.dense(16, 512, 1024)
    (af, sfaf), (bf, sfbf), df, c = w.dense_fp32(128, 256, 512)
    s["fp8_gemm_nt"] = [(a, sfa, b, sfb, d.zero_(), None, "nk"), (a16, sfa16, b16, sfb16, d16.zero_(), None, "nk"),
                        (af, sfaf, bf, sfbf, df.zero_(), c, "nk")]
    s["get_mn_major_tma_aligned_tensor"] = [(torch.randn(130, 7, device="cuda"),),
                                            (torch.randn(3, 129, 5, device="cuda"),)]
    (a, sfa), (b, sfb), d, index = w.contiguous([100, 0, 300, 50], 512, 1024)
    s["m_grouped_fp8_gemm_nt_contiguous"] = [(a, sfa, b, sfb, d.zero_(), index, "nk", False, None, False)]
    (a, sfa), (b, sfb), d, mm = w.masked(4, 256, 512, 1024)
    s["m_grouped_fp8_gemm_nt_masked"] = [(a, sfa, b, sfb, d.zero_(), mm, 128, "nk")]
    for tn in (False, True):
        (a, sfa), (b, sfb), d, ks, kt = w.k_grouped([256, 0, 128], 256, 384, tn)
        name = f"k_grouped_fp8_gemm_{'tn' if tn else 'nt'}_contiguous"
        s[name] = [(a, sfa, b, sfb, d, ks, kt, None, "mn"), (a, sfa, b, sfb, d, ks, kt, torch.randn_like(d), "mn")]
    (a, sfa), (b, sfb), _ = w.dense(256, 512, 1024)
    s["fp8_gemm_nt_skip_head_mid"] = [(a, sfa, b, sfb, torch.zeros(256, 512 + 2 * 64, device="cuda",
                                                                     dtype=torch.bfloat16), [128, 64, 128], "nk")]
    bf = lambda *shape: torch.randn(*shape, device="cuda", dtype=torch.bfloat16)  # noqa: E731
    f32 = lambda *shape: torch.zeros(*shape, device="cuda")  # noqa: E731
    s["bf16_gemm_nt"] = [(bf(256, 512), bf(384, 512), bf(256, 384).zero_(), None, "nk"),
                         (bf(512, 256).t(), bf(512, 384).t(), f32(256, 384), None, "nk")]
    s["cublaslt_gemm_nt"] = [(bf(256, 512), bf(384, 512), bf(256, 384).zero_(), None)]
    s["cublaslt_bmm_nt"] = [(bf(4, 128, 256), bf(4, 64, 256), bf(4, 128, 64).zero_(), None)]
    s["bf16_bmk_bnk_mn"] = [(bf(8, 128, 256), bf(8, 64, 256), bf(128, 64).zero_(), None)]
    index = w.contiguous_index([100, 0, 300, 50])
    s["m_grouped_bf16_gemm_nt_contiguous"] = [(bf(len(index), 512), bf(4, 256, 512), bf(len(index), 256).zero_(), index,
                                               "nk", False, None, False)]
    s["m_grouped_bf16_gemm_nt_masked"] = [(bf(4, 128, 512), bf(4, 256, 512), bf(4, 128, 256).zero_(),
                                           torch.tensor([3, 0, 128, 77], dtype=torch.int32, device="cuda"), 64, "nk")]
    pow2 = lambda *shape: torch.exp2(torch.randint(-8, 8, shape, device="cuda").float())  # noqa: E731
    s["get_mn_major_tma_aligned_packed_ue8m0_tensor"] = [(pow2(130, 7), None)]
    s["get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor"] = [
        (pow2(6, 256), torch.tensor([512, 0, 256], dtype=torch.int32, device="cuda"), [512, 0, 256], 128, 128, False)]
    return s


# torch.library.opcheck's schema test mutates and compares the inputs with ops that have no
# FP8 kernels ("mul_cuda" not implemented for 'Float8_e4m3fn'): for ops with FP8 operands it
# runs the other tests.
NO_SCHEMA_TEST = ("test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic")


def _has_fp8(args: tuple) -> bool:
    return any(isinstance(x, torch.Tensor) and x.dtype == torch.float8_e4m3fn for x in args)


def tensor_ops() -> list[str]:
    out = []
    for name in registered_op_names():
        packet = getattr(torch.ops.deep_gemm, name)
        schemas = [getattr(packet, o)._schema for o in packet.overloads()]
        if any("Tensor" in str(a.type) for sch in schemas for a in sch.arguments):
            out.append(name)
    return out


def moe_block(x, w1, w2, index):
    """Two m-grouped FP8 GEMMs around SiLU-and-mul, the tokens already in the contiguous layout."""
    h = torch.zeros(x.shape[0], w1[0].shape[1], device=x.device, dtype=torch.bfloat16)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(per_token_cast_to_fp8(x, use_ue8m0=False), w1, h, index)
    gate, up = h.chunk(2, dim=-1)
    act = (torch.nn.functional.silu(gate.float()) * up.float()).to(torch.bfloat16)
    out = torch.zeros(x.shape[0], w2[0].shape[1], device=x.device, dtype=torch.bfloat16)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(per_token_cast_to_fp8(act, use_ue8m0=False), w2, out, index)
    return out


def check_moe() -> str:
    torch.manual_seed(2)
    hidden, inter = 1024, 512
    index = w.contiguous_index([100, 0, 300, 50])
    x = torch.randn(len(index), hidden, device="cuda", dtype=torch.bfloat16)
    w1 = w.grouped_b(4, 2 * inter, hidden)
    w2 = w.grouped_b(4, hidden, inter)
    eager = moe_block(x, w1, w2, index)
    compiled = torch.compile(moe_block, fullgraph=True)(x, w1, w2, index)
    torch.cuda.synchronize()
    valid = index >= 0
    diff = calc_diff(compiled[valid], eager[valid]).item()
    assert not compiled[valid].isnan().any(), "NaN in the compiled MoE block's output"
    assert diff < 1e-3, f"compiled vs eager calc_diff {diff:.2e}"
    return f"calc_diff(compiled, eager) = {diff:.1e} over {int(valid.sum())} tokens"


def main() -> int:
    failed = 0

    def report(ok: bool, what: str, detail: str = "") -> None:
        nonlocal failed
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {what}{'  ' + detail if detail else ''}", flush=True)

    s = samples()
    for name in tensor_ops():
        if name in NOT_CHECKED:
            print(f"SKIP  opcheck {name}: {NOT_CHECKED[name]}")
            continue
        if name not in s:
            report(False, f"opcheck {name}", "no CUDA sample in tools/device/opcheck_moe.py: add one")
            continue
        op = getattr(torch.ops.deep_gemm, name).default
        for i, args in enumerate(s[name]):
            try:
                if _has_fp8(args):
                    torch.library.opcheck(op, args, test_utils=NO_SCHEMA_TEST)
                    report(True, f"opcheck {name} [{i}]", "(no test_schema: FP8 operands)")
                else:
                    torch.library.opcheck(op, args)
                    report(True, f"opcheck {name} [{i}]")
            except Exception as e:  # noqa: BLE001 (reported)
                report(False, f"opcheck {name} [{i}]", f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")
    try:
        report(True, "MoE block under torch.compile(fullgraph=True) vs eager", check_moe())
    except Exception as e:  # noqa: BLE001 (reported)
        traceback.print_exc()
        report(False, "MoE block under torch.compile(fullgraph=True) vs eager", f"{type(e).__name__}: {e}"[:400])
    print(f"opcheck_moe: {'all passed' if not failed else f'{failed} failed'} (JIT compiles in this process: "
          f"{deep_gemm.get_jit().compiles})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
