// cuBLASLt at run time: the library torch already loaded (or the nvidia-cublas wheel's, or the
// toolkit's), found with dlopen and never linked (DESIGN.md 3: the extension links no CUDA
// library), one handle per device, and a matmul call on a caller's stream and workspace.
//
// We declare the few types, enum values and entry points we use ourselves (their values are
// the library's ABI, stable from cuBLAS 11 to 13), so that building needs no cuBLAS headers.
// Descriptors are created with the library's *Create functions, so no opaque struct size
// (which changed between majors) is assumed.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "../common/errors.hpp"

namespace deep_gemm::cublaslt {

using Status = int;  // cublasStatus_t
using Handle = void*;
using MatmulDesc = void*;
using MatrixLayout = void*;
using Preference = void*;
using Stream = void*;

// cudaDataType_t
enum DataType : int { kF32 = 0, kF16 = 2, kBF16 = 14, kE4M3 = 28 };
// cublasOperation_t
enum Op : int { kOpN = 0, kOpT = 1 };
constexpr int kComputeF32 = 68;  // CUBLAS_COMPUTE_32F
// cublasLtMatmulDescAttributes_t
constexpr int kDescScaleType = 1, kDescTransA = 3, kDescTransB = 4, kDescSmCountTarget = 15, kDescFastAccum = 25;
// cublasLtMatrixLayoutAttribute_t
constexpr int kLayoutBatchCount = 5, kLayoutBatchStride = 6;
// cublasLtMatmulPreferenceAttributes_t
constexpr int kPrefMaxWorkspaceBytes = 1;

struct Algo {
  uint64_t data[8];
};
struct HeuristicResult {
  Algo algo;
  size_t workspace_size;
  Status state;
  float waves_count;
  int reserved[4];
};

inline const char* status_name(Status s) {
  switch (s) {
    case 0: return "CUBLAS_STATUS_SUCCESS";
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case 16: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "an unknown cuBLAS status";
  }
}

// The entry points, resolved once.
struct Api {
  std::string path;  // where the library came from (for messages)
  size_t version = 0;
  Status (*create)(Handle*) = nullptr;
  size_t (*get_version)() = nullptr;
  Status (*desc_create)(MatmulDesc*, int, int) = nullptr;
  Status (*desc_destroy)(MatmulDesc) = nullptr;
  Status (*desc_set)(MatmulDesc, int, const void*, size_t) = nullptr;
  Status (*layout_create)(MatrixLayout*, int, uint64_t, uint64_t, int64_t) = nullptr;
  Status (*layout_destroy)(MatrixLayout) = nullptr;
  Status (*layout_set)(MatrixLayout, int, const void*, size_t) = nullptr;
  Status (*pref_create)(Preference*) = nullptr;
  Status (*pref_destroy)(Preference) = nullptr;
  Status (*pref_set)(Preference, int, const void*, size_t) = nullptr;
  Status (*heuristic)(Handle, MatmulDesc, MatrixLayout, MatrixLayout, MatrixLayout, MatrixLayout, Preference, int,
                      HeuristicResult*, int*) = nullptr;
  Status (*matmul)(Handle, MatmulDesc, const void*, const void*, MatrixLayout, const void*, MatrixLayout, const void*,
                   const void*, MatrixLayout, void*, MatrixLayout, const Algo*, void*, size_t, Stream) = nullptr;
};

// The library: one torch (or another extension) already loaded, else the first of the
// sonames the dynamic loader finds (LD_LIBRARY_PATH, the toolkit's ldconfig entry). The
// Python facade first loads the nvidia-cublas wheel's copy when there is one, so that the
// second step finds it too.
inline const Api& api() {
  static std::once_flag once;
  static Api a;
  static std::string error;
  std::call_once(once, [] {
    const char* sonames[] = {"libcublasLt.so.13", "libcublasLt.so.12"};
    void* lib = nullptr;
    for (const char* so : sonames)
      if ((lib = dlopen(so, RTLD_NOW | RTLD_NOLOAD)) != nullptr) { a.path = so; break; }
    std::string tried;
    if (lib == nullptr) {
      for (const char* so : sonames) {
        if ((lib = dlopen(so, RTLD_NOW | RTLD_LOCAL)) != nullptr) { a.path = so; break; }
        const char* why = dlerror();
        tried += deep_jit::detail::cat("\n  ", so, ": ", why ? why : "not found");
      }
    }
    if (lib == nullptr) {
      error = "cuBLASLt (libcublasLt.so.13 or .so.12) could not be loaded; install the nvidia-cublas wheel that "
              "torch's CUDA build depends on (pip install nvidia-cublas for CUDA 13, nvidia-cublas-cu12 for 12) or "
              "put the toolkit's lib64 on LD_LIBRARY_PATH. Tried:" + tried;
      return;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (fn == nullptr && error.empty()) error = deep_jit::detail::cat("cuBLASLt (", a.path, ") lacks ", name);
    };
    sym(a.create, "cublasLtCreate");
    sym(a.get_version, "cublasLtGetVersion");
    sym(a.desc_create, "cublasLtMatmulDescCreate");
    sym(a.desc_destroy, "cublasLtMatmulDescDestroy");
    sym(a.desc_set, "cublasLtMatmulDescSetAttribute");
    sym(a.layout_create, "cublasLtMatrixLayoutCreate");
    sym(a.layout_destroy, "cublasLtMatrixLayoutDestroy");
    sym(a.layout_set, "cublasLtMatrixLayoutSetAttribute");
    sym(a.pref_create, "cublasLtMatmulPreferenceCreate");
    sym(a.pref_destroy, "cublasLtMatmulPreferenceDestroy");
    sym(a.pref_set, "cublasLtMatmulPreferenceSetAttribute");
    sym(a.heuristic, "cublasLtMatmulAlgoGetHeuristic");
    sym(a.matmul, "cublasLtMatmul");
    if (error.empty()) a.version = a.get_version();
  });
  if (!error.empty()) throw std::runtime_error("deep_gemm: " + error);
  return a;
}

inline void check(Status s, const char* op, const char* what) {
  if (s != 0) fail_arg(op, "cuBLASLt ", what, " failed: ", status_name(s), " (", s, ")");
}

// One handle per device: created on first use with that device current (the caller's op
// runs with torch's current device set to the operands' device).
inline Handle handle(int device, const char* op) {
  static std::mutex mu;
  static std::vector<Handle> handles;
  std::lock_guard<std::mutex> lock(mu);
  if (device >= static_cast<int>(handles.size())) handles.resize(device + 1, nullptr);
  if (handles[device] == nullptr) check(api().create(&handles[device]), op, "cublasLtCreate");
  return handles[device];
}

// One column-major operand as cuBLASLt sees it, optionally strided-batched.
struct Matrix {
  int type;
  uint64_t rows, cols;
  int64_t ld;
  int batch = 1;
  int64_t batch_stride = 0;
};

// RAII holder of one cuBLASLt descriptor.
template <auto kDestroy>
struct Owned {
  void* p = nullptr;
  Owned() = default;
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() {
    if (p != nullptr) (api().*kDestroy)(p);
  }
};

struct Call {
  int trans_a = kOpN, trans_b = kOpN;
  Matrix a, b, c, d;  // D = alpha * op(A) op(B) + beta * C (column-major terms)
  const void* a_ptr = nullptr;
  const void* b_ptr = nullptr;
  const void* c_ptr = nullptr;
  void* d_ptr = nullptr;
  float beta = 0.0f;
  int sm_count = 0;  // 0: the library's choice
  bool fp8 = false;
};

inline void make_layout(const Matrix& m, Owned<&Api::layout_destroy>& out, const char* op) {
  check(api().layout_create(&out.p, m.type, m.rows, m.cols, m.ld), op, "cublasLtMatrixLayoutCreate");
  if (m.batch > 1) {
    check(api().layout_set(out.p, kLayoutBatchCount, &m.batch, sizeof(m.batch)), op, "batch count");
    check(api().layout_set(out.p, kLayoutBatchStride, &m.batch_stride, sizeof(m.batch_stride)), op, "batch stride");
  }
}

// The descriptors of a problem and cuBLASLt's first heuristic choice for them (as torch
// does), built once per problem: a repeated shape skips the descriptor set-up and the
// heuristic query. Everything the query sees is in the key (pointers, beta and the stream
// are not), so a cached plan is the choice a fresh query would make.
struct Plan {
  Owned<&Api::desc_destroy> desc;
  Owned<&Api::layout_destroy> la, lb, lc, ld;
  Algo algo{};
};

struct PlanKey {
  int device, trans_a, trans_b, sm_count;
  bool fp8;
  size_t workspace_bytes;
  Matrix a, b, c, d;
  bool operator==(const PlanKey& o) const {
    const auto same = [](const Matrix& x, const Matrix& y) {
      return x.type == y.type && x.rows == y.rows && x.cols == y.cols && x.ld == y.ld && x.batch == y.batch &&
             x.batch_stride == y.batch_stride;
    };
    return device == o.device && trans_a == o.trans_a && trans_b == o.trans_b && sm_count == o.sm_count &&
           fp8 == o.fp8 && workspace_bytes == o.workspace_bytes && same(a, o.a) && same(b, o.b) && same(c, o.c) &&
           same(d, o.d);
  }
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    size_t h = 1469598103934665603ull;
    const auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    mix(static_cast<uint64_t>(k.device));
    mix(static_cast<uint64_t>(k.trans_a) << 1 | static_cast<uint64_t>(k.trans_b) << 2 | static_cast<uint64_t>(k.fp8));
    mix(static_cast<uint64_t>(k.sm_count));
    mix(k.workspace_bytes);
    for (const Matrix* m : {&k.a, &k.b, &k.c, &k.d}) {
      mix(static_cast<uint64_t>(m->type));
      mix(m->rows);
      mix(m->cols);
      mix(static_cast<uint64_t>(m->ld));
      mix(static_cast<uint64_t>(m->batch));
      mix(static_cast<uint64_t>(m->batch_stride));
    }
    return h;
  }
};

inline std::shared_ptr<Plan> make_plan(const Call& c, int device, size_t workspace_bytes, const char* op) {
  const Api& lt = api();
  auto plan = std::make_shared<Plan>();
  const int scale_type = kF32;
  check(lt.desc_create(&plan->desc.p, kComputeF32, scale_type), op, "cublasLtMatmulDescCreate");
  check(lt.desc_set(plan->desc.p, kDescTransA, &c.trans_a, sizeof(c.trans_a)), op, "TRANSA");
  check(lt.desc_set(plan->desc.p, kDescTransB, &c.trans_b, sizeof(c.trans_b)), op, "TRANSB");
  if (c.sm_count > 0)
    check(lt.desc_set(plan->desc.p, kDescSmCountTarget, &c.sm_count, sizeof(c.sm_count)), op, "SM_COUNT_TARGET");
  if (c.fp8) {
    const int8_t fast_accum = 0;  // full-precision FP8 accumulation, as upstream
    check(lt.desc_set(plan->desc.p, kDescFastAccum, &fast_accum, sizeof(fast_accum)), op, "FAST_ACCUM");
  }
  make_layout(c.a, plan->la, op);
  make_layout(c.b, plan->lb, op);
  make_layout(c.c, plan->lc, op);
  make_layout(c.d, plan->ld, op);
  Owned<&Api::pref_destroy> pref;
  check(lt.pref_create(&pref.p), op, "cublasLtMatmulPreferenceCreate");
  check(lt.pref_set(pref.p, kPrefMaxWorkspaceBytes, &workspace_bytes, sizeof(workspace_bytes)), op, "workspace size");
  HeuristicResult result{};
  int found = 0;
  check(lt.heuristic(handle(device, op), plan->desc.p, plan->la.p, plan->lb.p, plan->lc.p, plan->ld.p, pref.p, 1,
                     &result, &found),
        op, "cublasLtMatmulAlgoGetHeuristic");
  check_arg(found > 0, op, "cuBLASLt has no algorithm for this problem (", c.d.cols, " x ", c.d.rows, ", K = ",
            c.trans_a == kOpN ? c.a.cols : c.a.rows, "); check the operands' dtypes, majorness and alignment");
  plan->algo = result.algo;
  return plan;
}

// Plans kept per process; past this many distinct problems (a caller sweeping shapes) the
// cache starts over rather than grow without bound.
constexpr size_t kMaxCachedPlans = 4096;

// A shared handle: a call keeps its plan alive even if another thread's miss starts the
// cache over meanwhile. The cache itself is never destroyed: no descriptor is freed through
// the library during static destruction at exit.
inline std::shared_ptr<const Plan> plan_for(const Call& c, int device, size_t workspace_bytes, const char* op) {
  static std::mutex mu;
  static auto& plans = *new std::unordered_map<PlanKey, std::shared_ptr<const Plan>, PlanKeyHash>();
  const PlanKey key{device, c.trans_a, c.trans_b, c.sm_count, c.fp8, workspace_bytes, c.a, c.b, c.c, c.d};
  std::lock_guard<std::mutex> lock(mu);
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  std::shared_ptr<const Plan> plan = make_plan(c, device, workspace_bytes, op);  // throws before anything is cached
  if (plans.size() >= kMaxCachedPlans) plans.clear();
  plans.emplace(key, plan);
  return plan;
}

// Runs one matmul on `stream` with the given workspace, with the problem's cached plan.
inline void matmul(const Call& c, int device, Stream stream, void* workspace, size_t workspace_bytes,
                   const char* op) {
  const std::shared_ptr<const Plan> held = plan_for(c, device, workspace_bytes, op);
  const Plan& plan = *held;
  const float alpha = 1.0f;
  check(api().matmul(handle(device, op), plan.desc.p, &alpha, c.a_ptr, plan.la.p, c.b_ptr, plan.lb.p, &c.beta,
                     c.c_ptr != nullptr ? c.c_ptr : c.d_ptr, plan.lc.p, c.d_ptr, plan.ld.p, &plan.algo, workspace,
                     workspace_bytes, stream),
        op, "cublasLtMatmul");
}

}  // namespace deep_gemm::cublaslt
