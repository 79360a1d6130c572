// Process-wide knobs of deep_gemm (API.md P0 "Runtime knobs") and the device
// facts they are checked against. Plain state with validated setters: the
// ops in ops/runtime.cpp are thin wrappers around this, and the heuristics
// read it on every call (so reads are lock-free atomics).
#pragma once

#include <deep_jit/driver.hpp>

#include <atomic>
#include <cstdint>
#include <utility>

#include "../common/errors.hpp"

namespace deep_gemm {

class DeviceRuntime {
 public:
  static DeviceRuntime& get() {
    static DeviceRuntime instance;
    return instance;
  }

  // SM count of `device`, straight from the driver (throws a clear error
  // without a driver or GPU).
  static int device_sm_count(int device) { return deep_jit::device_info(device).sm_count; }

  // 0 means "not set": use every SM of the device.
  int num_sms(int device) const {
    int n = num_sms_.load(std::memory_order_relaxed);
    return n > 0 ? n : device_sm_count(device);
  }
  void set_num_sms(int64_t n, int device) {
    check_arg(n > 0, "set_num_sms", "num_sms must be positive, got ", n);
    const int available = device_sm_count(device);
    check_arg(n <= available, "set_num_sms", "num_sms must be at most the device's SM count (", available,
              " on device ", device, "), got ", n);
    num_sms_.store(static_cast<int>(n), std::memory_order_relaxed);
  }

  int tc_util() const { return tc_util_.load(std::memory_order_relaxed); }
  void set_tc_util(int64_t pct) {
    check_arg(pct > 0 && pct <= 100, "set_tc_util", "tc_util is a percentage in [1, 100], got ", pct);
    tc_util_.store(static_cast<int>(pct), std::memory_order_relaxed);
  }

  bool pdl() const { return pdl_.load(std::memory_order_relaxed); }
  void set_pdl(bool on) { pdl_.store(on, std::memory_order_relaxed); }

  bool ignore_compile_dims() const { return ignore_compile_dims_.load(std::memory_order_relaxed); }
  void set_ignore_compile_dims(bool on) { ignore_compile_dims_.store(on, std::memory_order_relaxed); }

  // Block sizes chosen by the heuristics must be multiples of these (1 = free).
  std::pair<int, int> block_size_multiple_of() const {
    return {block_m_multiple_.load(std::memory_order_relaxed), block_n_multiple_.load(std::memory_order_relaxed)};
  }
  void set_block_size_multiple_of(int64_t m, int64_t n) {
    check_arg(m > 0 && m <= 256 && n > 0 && n <= 256, "set_block_size_multiple_of",
              "each multiple must be in [1, 256], got (", m, ", ", n, ")");
    block_m_multiple_.store(static_cast<int>(m), std::memory_order_relaxed);
    block_n_multiple_.store(static_cast<int>(n), std::memory_order_relaxed);
  }

  int mk_alignment_for_contiguous_layout() const { return mk_alignment_.load(std::memory_order_relaxed); }
  void set_mk_alignment_for_contiguous_layout(int64_t v) {
    // The grouped kernels tile M (or K) by BLOCK_M in {64, 128}; each group
    // must start on a tile boundary, so the alignment is one of those sizes
    // or a larger power of two.
    check_arg(v >= 64 && v <= 4096 && (v & (v - 1)) == 0, "set_mk_alignment_for_contiguous_layout",
              "alignment must be a power of two in [64, 4096], got ", v);
    mk_alignment_.store(static_cast<int>(v), std::memory_order_relaxed);
  }

  // Smallest alignment our SM90 grouped kernels can work with for groups of
  // about `expected_m` rows: BLOCK_M 64 serves small groups, 128 the rest.
  static int theoretical_mk_alignment(int64_t expected_m) {
    check_arg(expected_m >= 0, "get_theoretical_mk_alignment_for_contiguous_layout",
              "expected_m must be non-negative, got ", expected_m);
    return (expected_m > 0 && expected_m <= 64) ? 64 : 128;
  }

 private:
  DeviceRuntime() = default;

  std::atomic<int> num_sms_{0};
  std::atomic<int> tc_util_{100};
  std::atomic<bool> pdl_{false};
  std::atomic<bool> ignore_compile_dims_{false};
  std::atomic<int> block_m_multiple_{1};
  std::atomic<int> block_n_multiple_{1};
  std::atomic<int> mk_alignment_{128};
};

}  // namespace deep_gemm
