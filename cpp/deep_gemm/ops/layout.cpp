// Ops: scale-factor layouts (API.md P0 layout helpers) on the GPU. The Python
// facade (deep_gemm/_sf_layout.py) routes CPU tensors to plain torch and CUDA
// or meta tensors here.
//   get_mn_major_tma_aligned_tensor: fp32 scales, MN-major, TMA-aligned (SM90's layout).
//   get_mn_major_tma_aligned_packed_ue8m0_tensor,
//   get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor: upstream's packed-UE8M0 layouts
//     (four exponents per int32; the SM100 format), impls/sf_pack_ue8m0.cuh. The facade checks
//     every argument first (ValueError / TypeError); the checks here repeat the ones a direct
//     torch.ops call needs to stay in bounds. Neither op reads device memory on the host.
#include <torch/csrc/stable/library.h>

#include <optional>
#include <string>
#include <vector>

#include "../launch/sf_pack_ue8m0.hpp"
#include "../runtime/device_runtime.hpp"
#include "../torch/sf_layout.hpp"

namespace deep_gemm::ops {
namespace {

constexpr const char* kPackOp = "get_mn_major_tma_aligned_packed_ue8m0_tensor";
constexpr const char* kKGroupedPackOp = "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor";
constexpr int64_t kBelow31 = int64_t(1) << 31;

// Always a fresh tensor (the facade returns already-aligned inputs unchanged).
Tensor get_mn_major_tma_aligned_tensor(Tensor sf) {
  return mn_major_tma_aligned_copy(sf, "get_mn_major_tma_aligned_tensor");
}

// A 1-D, contiguous int32 table (psum_layout / grouped_layout) on sf's device.
void check_int_table(const ArgChecker& chk, const Tensor& sf, const Tensor& t, const char* op, const char* name) {
  chk.same_cuda_device({{sf, "sf"}, {t, name}});
  chk.dtype({t, name}, ScalarType::Int);
  chk.dim({t, name}, 1);
  check_arg(t.size(0) >= 1, op, name, " must hold at least one group, got shape ", shape_str(t));
  check_arg(t.size(0) < kBelow31, op, name, " must hold fewer than 2^31 groups, got ", t.size(0));
  check_arg(t.stride(0) == 1 || t.size(0) == 1, op, name, " must be contiguous, got strides ", stride_str(t));
}

// sf [mn, sf_k] or [g, mn, sf_k] fp32 (powers of two) -> int32 [.., mn, ceil(sf_k / 4)] with
// strides (.., 1, align(mn, 4)): the [.., mn, packed_k] view of storage [.., packed_k, align(mn, 4)].
Tensor get_mn_major_tma_aligned_packed_ue8m0_tensor(Tensor sf, std::optional<Tensor> psum_layout) {
  const ArgChecker chk(kPackOp);
  check_arg(sf.dim() == 2 || sf.dim() == 3, kPackOp, "sf must be 2-D [mn, sf_k] or 3-D [groups, mn, sf_k], got shape ",
            shape_str(sf));
  chk.dtype({sf, "sf"}, ScalarType::Float);
  const bool batched = sf.dim() == 3;
  const int64_t g = batched ? sf.size(0) : 1, mn = sf.size(batched), sf_k = sf.size(batched + 1);
  chk.below_2_31({{"sf.shape[0] (groups)", g}, {"mn", mn}, {"sf_k", sf_k}});
  const int64_t packed_k = (sf_k + 3) / 4, pad = tma_align4(mn);
  if (psum_layout) {
    check_int_table(chk, sf, *psum_layout, kPackOp, "psum_layout");
    check_arg(g == 1, kPackOp, "psum_layout needs one group of scales (2-D sf, or 3-D with shape[0] == 1), got sf of "
              "shape ", shape_str(sf));
  } else if (!is_meta(sf)) {
    check_arg(sf.is_cuda(), kPackOp, "sf must be a CUDA tensor here, got one on ",
              sf.is_cpu() ? "the CPU" : "another device");
  }
  const int64_t storage_shape[3] = {g, packed_k, pad};  // [packed_k, pad] when not batched
  Tensor storage = empty_on_device_of(sf, storage_shape + (batched ? 0 : 1), batched ? 3 : 2, aoti_torch_dtype_int32());
  if (!is_meta(sf) && g > 0 && packed_k > 0 && pad > 0) {
    launch::PackUe8m0MnMajorProblem p;
    p.in = static_cast<const float*>(sf.data_ptr());
    p.out = static_cast<uint32_t*>(storage.data_ptr());
    p.groups = g;
    p.mn = mn;
    p.sf_k = sf_k;
    p.packed_k = packed_k;
    p.out_ld = pad;
    p.stride_g = batched ? sf.stride(0) : 0;
    p.stride_mn = sf.stride(batched);
    p.stride_k = sf.stride(batched + 1);
    if (psum_layout) {
      p.psum = static_cast<const int*>(psum_layout->data_ptr());
      p.num_psum = psum_layout->size(0);
      p.m_alignment = DeviceRuntime::get().mk_alignment_for_contiguous_layout();
    }
    p.device = sf.get_device_index();
    launch::PackUe8m0Launcher::get().run(p);
  }
  Tensor transposed = torch::stable::transpose(storage, batched, batched + 1);
  return torch::stable::narrow(transposed, batched, 0, mn);
}

// sf [sf_rows, mn] fp32 (K blocks as rows, groups back to back) -> int32 [packed_rows, mn],
// contiguous. ks_cpu empty: no host sizes (use_psum_layout only): packed_rows is the upper
// bound (sf_rows + 3 * groups) / 4. k_alignment is resolved by the facade (default gran_k).
Tensor get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(Tensor sf, Tensor grouped_layout,
                                                              std::vector<int64_t> ks_cpu, int64_t gran_k,
                                                              int64_t k_alignment, bool use_psum_layout) {
  const char* op = kKGroupedPackOp;
  const ArgChecker chk(op);
  chk.dim({sf, "sf"}, 2);
  chk.dtype({sf, "sf"}, ScalarType::Float);
  check_int_table(chk, sf, grouped_layout, op, "grouped_layout");
  const int64_t sf_rows = sf.size(0), mn = sf.size(1), groups = grouped_layout.size(0);
  chk.below_2_31({{"sf.shape[0] (K blocks)", sf_rows}, {"mn", mn}});
  check_arg(mn % 4 == 0, op, "sf.shape[1] (mn) must be a multiple of 4 (the output's rows must be 16-byte aligned for "
            "TMA), got shape ", shape_str(sf));
  check_arg(gran_k >= 1 && gran_k < kBelow31, op, "gran_k must be in [1, 2^31), got ", gran_k);
  check_arg(k_alignment >= 1 && k_alignment < kBelow31, op, "k_alignment must be in [1, 2^31), got ", k_alignment);
  int64_t packed_rows = 0;
  if (ks_cpu.empty()) {
    check_arg(use_psum_layout, op, "ks_cpu must list every group's K (", groups, " groups) unless use_psum_layout");
    packed_rows = (sf_rows + 3 * groups) / 4;
  } else {
    check_arg(static_cast<int64_t>(ks_cpu.size()) == groups, op, "ks_cpu has ", ks_cpu.size(),
              " entries but grouped_layout holds ", groups, " groups");
    int64_t rows = 0;
    for (size_t i = 0; i < ks_cpu.size(); ++i) {
      const int64_t k = ks_cpu[i];
      check_arg(k >= 0 && k < kBelow31, op, "ks_cpu[", i, "] must be in [0, 2^31), got ", k);
      if (!use_psum_layout)
        check_arg(k % gran_k == 0 && k % k_alignment == 0, op, "ks_cpu[", i, "] must be a multiple of gran_k (", gran_k,
                  ") and of k_alignment (", k_alignment, "), got ", k);
      const int64_t n = (k + gran_k - 1) / gran_k;
      rows += n;
      packed_rows += (n + 3) / 4;
    }
    if (!use_psum_layout)
      check_arg(rows == sf_rows, op, "sf.shape[0] must be sum(ks_cpu) / gran_k = ", rows, " (one row per K block), got "
                "shape ", shape_str(sf));
  }
  check_arg(packed_rows < kBelow31, op, "the output's rows (", packed_rows, ") must be fewer than 2^31");
  const int64_t shape[2] = {packed_rows, mn};
  Tensor out = empty_on_device_of(sf, shape, 2, aoti_torch_dtype_int32());
  if (is_meta(sf) || packed_rows == 0 || mn == 0) return out;
  launch::PackUe8m0KGroupedProblem p;
  p.in = static_cast<const float*>(sf.data_ptr());
  p.out = static_cast<uint32_t*>(out.data_ptr());
  p.mn = mn;
  p.sf_rows = sf_rows;
  p.packed_rows = packed_rows;
  p.stride_k = sf.stride(0);
  p.stride_mn = sf.stride(1);
  p.layout = static_cast<const int*>(grouped_layout.data_ptr());
  p.num_groups = groups;
  p.gran_k = gran_k;
  p.k_alignment = k_alignment;
  p.psum = use_psum_layout;
  p.device = sf.get_device_index();
  launch::PackUe8m0Launcher::get().run(p);
  return out;
}

// Compile-only (no GPU needed): the cubin paths of both packed-UE8M0 kernels, exactly the
// sources the launcher loads. For the tests and warmup.
std::vector<std::string> sf_pack_ue8m0_build() {
  auto& rt = deep_jit::Runtime::get();
  return {rt.build(launch::PackUe8m0Launcher::mn_major_source()),
          rt.build(launch::PackUe8m0Launcher::k_grouped_source())};
}

}  // namespace
}  // namespace deep_gemm::ops

STABLE_TORCH_LIBRARY_FRAGMENT(deep_gemm, m) {
  m.def("get_mn_major_tma_aligned_tensor(Tensor sf) -> Tensor");
  m.def("get_mn_major_tma_aligned_packed_ue8m0_tensor(Tensor sf, Tensor? psum_layout=None) -> Tensor");
  m.def("get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(Tensor sf, Tensor grouped_layout, int[] ks_cpu, "
        "int gran_k, int k_alignment, bool use_psum_layout=False) -> Tensor");
  m.def("sf_pack_ue8m0_build() -> str[]");
}

STABLE_TORCH_LIBRARY_IMPL(deep_gemm, CompositeExplicitAutograd, m) {
  using namespace deep_gemm::ops;
  m.impl("get_mn_major_tma_aligned_tensor", TORCH_BOX(&get_mn_major_tma_aligned_tensor));
  m.impl("get_mn_major_tma_aligned_packed_ue8m0_tensor", TORCH_BOX(&get_mn_major_tma_aligned_packed_ue8m0_tensor));
  m.impl("get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor",
         TORCH_BOX(&get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor));
  m.impl("sf_pack_ue8m0_build", TORCH_BOX(&sf_pack_ue8m0_build));
}
