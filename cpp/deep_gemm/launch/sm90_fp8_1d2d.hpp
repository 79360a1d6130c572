// What the dense and the m-grouped launchers of the 1D2D kernel share: the tuning knobs that
// restrict or refine its configurations, and its launch (with the tile-trace buffer of a
// diagnostics build).
#pragma once

#include "../heuristics/sm90_fp8_gemm.hpp"
#include "common.hpp"
#include "sm90_fp8_source.hpp"

namespace deep_gemm::launch::detail {

// DG_DEV_SM90_FP8_BLOCK_M=64|128|256 restricts the dense and m-grouped 1D2D choices to that
// BLOCK_M (the 1D1D kernels ignore it); unset, the heuristics choose. For tuning and for
// testing a tile path on shapes that would not pick it.
inline int forced_block_m() {
  static const int value = env_int_knob(
      "DG_DEV_SM90_FP8_BLOCK_M", [](int v) { return v == 64 || v == 128 || v == 256; }, "64, 128 or 256");
  return value;
}

// DG_DEV_SM90_FP8_GROUP_N=<even number, 2..64> sets the tile scheduler's group width (n-blocks
// per L2 group) of the dense and m-grouped 1D2D kernels; unset, 16. For tuning.
inline int forced_group_n() {
  static const int value = env_int_knob(
      "DG_DEV_SM90_FP8_GROUP_N", [](int v) { return v >= 2 && v <= 64 && v % 2 == 0; }, "an even number in [2, 64]");
  return value;
}

// DG_DEV_SM90_FP8_STAGES=<2..12> caps the pipeline depth of the dense and m-grouped FP8 GEMMs at
// that many stages; unset, a tile takes as many as fit. For tuning (e.g. how much a
// cluster pair's coupled stage ring needs).
inline int forced_max_stages() {
  static const int value =
      env_int_knob("DG_DEV_SM90_FP8_STAGES", [](int v) { return v >= 2 && v <= h::kSm90Fp8MaxStages; }, "in [2, 12]");
  return value;
}

// The tuning knobs that refine a chosen configuration: the scheduler group width (1D2D)
// and the stage cap, where set.
inline h::Sm90Fp8GemmConfig with_tuning_knobs(h::Sm90Fp8GemmConfig c) {
  if (forced_group_n() != 0 && c.kind == h::Sm90Fp8Kind::k1D2D) c.group_n = forced_group_n();
  if (forced_max_stages() != 0 && c.stages > forced_max_stages()) {
    c.stages = forced_max_stages();
    c.smem_bytes = h::sm90_fp8_smem_bytes(c.kind, c.block_m, c.block_n, c.stages);
  }
  return c;
}

inline bool block_m_allowed(const h::Sm90Fp8GemmConfig& c) {
  return forced_block_m() == 0 || c.kind == h::Sm90Fp8Kind::k1D1D || c.block_m == forced_block_m();
}

// DG_DEV_TRACE_TILES_PTR: the stamp buffer of a tile trace (trace_tiles_enabled()), read per launch
// while tracing; a trace without it fails loudly rather than writing through null.
inline unsigned long long* trace_tiles_buffer() {
  const char* v = std::getenv("DG_DEV_TRACE_TILES_PTR");
  const unsigned long long address = v ? std::strtoull(v, nullptr, 10) : 0;
  if (address == 0)
    throw std::runtime_error("deep_gemm: DG_DEV_TRACE_TILES is set but DG_DEV_TRACE_TILES_PTR (the stamp buffer's device "
                             "address) is not");
  return reinterpret_cast<unsigned long long*>(static_cast<uintptr_t>(address));
}

// Launches a 1D2D kernel (dense or m-grouped) with `args`, plus the stamp buffer when the
// kernels were built for a tile trace (their entry then takes it last).
template <typename... Args>
void launch_1d2d(const deep_jit::Kernel& kernel, const deep_jit::LaunchConfig& lc, const Args&... args) {
  if (trace_tiles_enabled())
    deep_jit::launch(kernel, lc, args..., trace_tiles_buffer());
  else
    deep_jit::launch(kernel, lc, args...);
}

}  // namespace deep_gemm::launch::detail
