// deep_jit: the CUDA driver API, reached at run time only.
//
// Decision 3: nothing links against libcuda. We dlopen("libcuda.so.1") on
// first need, take `cuGetProcAddress` from it with dlsym, and fetch every
// other entry point through it at a fixed ABI version (CUDA 12.0), so that the
// same binary runs on any 12.x or 13.x driver. A machine without a driver gets
// an Error from the first GPU call, never a crash at load time.
//
// cuda.h is included for its types only; we never call its declared functions.
#pragma once

#include <cuda.h>
#include <dlfcn.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "error.hpp"

namespace deep_jit {

struct DeviceInfo {
  int sm_count = 0;
  int cc_major = 0;
  int cc_minor = 0;
  int max_shared_optin = 0;  // bytes of dynamic shared memory a block may opt into
  int l2_bytes = 0;
  std::string name;
};

namespace detail {

// The ABI version we ask the driver for. Every function below exists with the
// signature we declare at this version on all 12.x and 13.x drivers.
inline constexpr int kDriverAbiVersion = 12000;

// Function-pointer types written out here rather than taken from cuda.h's
// declarations, because cuda.h remaps names (e.g. cuGetProcAddress ->
// cuGetProcAddress_v2, per-thread-stream variants) by macro.
struct DriverApi {
  using GetProcAddressV2 = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  using GetProcAddressV1 = CUresult (*)(const char*, void**, int, cuuint64_t);

  CUresult (*get_error_name)(CUresult, const char**) = nullptr;
  CUresult (*get_error_string)(CUresult, const char**) = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*driver_get_version)(int*) = nullptr;
  CUresult (*device_get_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_get_attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*device_get_name)(char*, int, CUdevice) = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*ctx_get_current)(CUcontext*) = nullptr;
  CUresult (*ctx_set_current)(CUcontext) = nullptr;
  CUresult (*ctx_push_current)(CUcontext) = nullptr;
  CUresult (*ctx_pop_current)(CUcontext*) = nullptr;
  CUresult (*ctx_synchronize)() = nullptr;
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*module_unload)(CUmodule) = nullptr;
  CUresult (*func_set_attribute)(CUfunction, CUfunction_attribute, int) = nullptr;
  CUresult (*func_get_attribute)(int*, CUfunction_attribute, CUfunction) = nullptr;
  CUresult (*launch_kernel_ex)(const CUlaunchConfig*, CUfunction, void**, void**) = nullptr;
  CUresult (*stream_is_capturing)(CUstream, CUstreamCaptureStatus*) = nullptr;
  CUresult (*tensor_map_encode_tiled)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                      const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                      CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill) = nullptr;
  // Memory helpers: used by the self-test and handy for glue code.
  CUresult (*mem_alloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*memcpy_htod)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*memcpy_dtoh)(void*, CUdeviceptr, size_t) = nullptr;

  int driver_version = 0;
  CUresult init_result = CUDA_SUCCESS;  // CUDA_ERROR_NO_DEVICE is kept, not thrown
};

// Resolves `name` through cuGetProcAddress (v2 if the driver has it).
class SymbolResolver {
 public:
  explicit SymbolResolver(void* lib) {
    v2_ = reinterpret_cast<DriverApi::GetProcAddressV2>(dlsym(lib, "cuGetProcAddress_v2"));
    if (!v2_) v1_ = reinterpret_cast<DriverApi::GetProcAddressV1>(dlsym(lib, "cuGetProcAddress"));
    if (!v2_ && !v1_)
      fail("The CUDA driver library libcuda.so.1 was found but exports no cuGetProcAddress; "
           "the installed NVIDIA driver is too old (CUDA 12.0 or newer is required).");
  }

  template <class Fn>
  void resolve(Fn& out, const char* name) const {
    void* p = nullptr;
    CUresult r = v2_ ? v2_(name, &p, kDriverAbiVersion, CU_GET_PROC_ADDRESS_DEFAULT, nullptr)
                     : v1_(name, &p, kDriverAbiVersion, CU_GET_PROC_ADDRESS_DEFAULT);
    if (r != CUDA_SUCCESS || !p)
      fail(cat("The CUDA driver does not provide ", name, " (cuGetProcAddress returned ", static_cast<int>(r),
               "); the installed NVIDIA driver is too old (CUDA 12.0 or newer is required)."));
    out = reinterpret_cast<Fn>(p);
  }

 private:
  DriverApi::GetProcAddressV2 v2_ = nullptr;
  DriverApi::GetProcAddressV1 v1_ = nullptr;
};

inline void resolve_all(DriverApi& api, const SymbolResolver& r) {
  r.resolve(api.get_error_name, "cuGetErrorName");
  r.resolve(api.get_error_string, "cuGetErrorString");
  r.resolve(api.init, "cuInit");
  r.resolve(api.driver_get_version, "cuDriverGetVersion");
  r.resolve(api.device_get_count, "cuDeviceGetCount");
  r.resolve(api.device_get, "cuDeviceGet");
  r.resolve(api.device_get_attribute, "cuDeviceGetAttribute");
  r.resolve(api.device_get_name, "cuDeviceGetName");
  r.resolve(api.primary_ctx_retain, "cuDevicePrimaryCtxRetain");
  r.resolve(api.ctx_get_current, "cuCtxGetCurrent");
  r.resolve(api.ctx_set_current, "cuCtxSetCurrent");
  r.resolve(api.ctx_push_current, "cuCtxPushCurrent");
  r.resolve(api.ctx_pop_current, "cuCtxPopCurrent");
  r.resolve(api.ctx_synchronize, "cuCtxSynchronize");
  r.resolve(api.module_load_data, "cuModuleLoadData");
  r.resolve(api.module_get_function, "cuModuleGetFunction");
  r.resolve(api.module_unload, "cuModuleUnload");
  r.resolve(api.func_set_attribute, "cuFuncSetAttribute");
  r.resolve(api.func_get_attribute, "cuFuncGetAttribute");
  r.resolve(api.launch_kernel_ex, "cuLaunchKernelEx");
  r.resolve(api.stream_is_capturing, "cuStreamIsCapturing");
  r.resolve(api.tensor_map_encode_tiled, "cuTensorMapEncodeTiled");
  r.resolve(api.mem_alloc, "cuMemAlloc");
  r.resolve(api.mem_free, "cuMemFree");
  r.resolve(api.memcpy_htod, "cuMemcpyHtoD");
  r.resolve(api.memcpy_dtoh, "cuMemcpyDtoH");
}

// Loads the driver once per process. The library handle is never closed: the
// driver must outlive every module and context we hand out.
inline std::unique_ptr<DriverApi> load_driver() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    fail(cat("No CUDA driver: libcuda.so.1 could not be loaded (", why ? why : "unknown reason",
             "). GPU operations need an NVIDIA driver; compiling kernels to cubin works without one."));
  }
  auto api = std::make_unique<DriverApi>();
  SymbolResolver resolver(lib);
  resolve_all(*api, resolver);
  api->init_result = api->init(0);
  if (api->init_result != CUDA_SUCCESS && api->init_result != CUDA_ERROR_NO_DEVICE) {
    const char* name = nullptr;
    api->get_error_name(api->init_result, &name);
    fail(cat("No usable CUDA driver: cuInit(0) failed with ", name ? name : "an unknown error", " (",
             static_cast<int>(api->init_result), ")."));
  }
  api->driver_get_version(&api->driver_version);
  if (api->driver_version < kDriverAbiVersion)
    fail(cat("The NVIDIA driver supports CUDA ", api->driver_version / 1000, ".", (api->driver_version % 1000) / 10,
             " but deep_gemm needs CUDA 12.0 or newer."));
  return api;
}

// Holds either the loaded driver or the reason it could not be loaded, so a
// failure is reported the same way on every call instead of retried.
struct DriverSlot {
  std::unique_ptr<DriverApi> api;
  std::string error;
};

inline const DriverSlot& driver_slot() {
  static const DriverSlot slot = [] {
    DriverSlot s;
    try {
      s.api = load_driver();
    } catch (const Error& e) {
      s.error = e.what();
    }
    return s;
  }();
  return slot;
}

// The loaded driver; throws the load failure otherwise.
inline const DriverApi& driver() {
  const DriverSlot& slot = driver_slot();
  if (!slot.api) fail(slot.error);
  return *slot.api;
}

// "CUDA_ERROR_X (message)" for a driver result code.
inline std::string describe(CUresult r) {
  const DriverApi& api = driver();
  const char* name = nullptr;
  const char* text = nullptr;
  api.get_error_name(r, &name);
  api.get_error_string(r, &text);
  return cat(name ? name : "CUDA_ERROR_UNKNOWN", " (", text ? text : "no description", ")");
}

// Throws an Error naming the call and what it was for when `r` is a failure.
inline void check(CUresult r, const char* call, const std::string& what) {
  if (r == CUDA_SUCCESS) return;
  fail(cat("CUDA driver call ", call, " failed while ", what, ": ", describe(r), "."));
}

}  // namespace detail

// True when libcuda.so.1 loaded and initialised (there may still be 0 devices).
inline bool driver_available() noexcept { return detail::driver_slot().api != nullptr; }

// The driver's CUDA version as 1000*major + 10*minor; throws without a driver.
inline int driver_version() { return detail::driver().driver_version; }

// Number of visible CUDA devices. Throws an Error when there is no driver;
// returns 0 when the driver is present but sees no device.
inline int device_count() {
  const detail::DriverApi& api = detail::driver();
  if (api.init_result == CUDA_ERROR_NO_DEVICE) return 0;
  int n = 0;
  detail::check(api.device_get_count(&n), "cuDeviceGetCount", "counting CUDA devices");
  return n;
}

namespace detail {

// Throws unless `device` names a visible device; returns its handle.
inline CUdevice device_handle(int device) {
  int n = device_count();
  if (n == 0) fail("No CUDA device is visible: the driver is loaded but reports no GPU (check CUDA_VISIBLE_DEVICES).");
  if (device < 0 || device >= n)
    fail(cat("CUDA device index ", device, " is out of range: ", n, " device(s) are visible."));
  CUdevice dev = 0;
  check(driver().device_get(&dev, device), "cuDeviceGet", cat("opening CUDA device ", device));
  return dev;
}

inline int device_attribute(CUdevice dev, CUdevice_attribute attr, const char* what) {
  int v = 0;
  check(driver().device_get_attribute(&v, attr, dev), "cuDeviceGetAttribute", cat("reading ", what));
  return v;
}

inline DeviceInfo query_device_info(int device) {
  CUdevice dev = device_handle(device);
  DeviceInfo info;
  info.sm_count = device_attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "the SM count");
  info.cc_major = device_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "the compute capability");
  info.cc_minor = device_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "the compute capability");
  info.max_shared_optin =
      device_attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "the opt-in shared memory size");
  info.l2_bytes = device_attribute(dev, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "the L2 cache size");
  char name[256] = {};
  check(driver().device_get_name(name, sizeof(name) - 1, dev), "cuDeviceGetName", "reading the device name");
  info.name = name;
  return info;
}

// The device's primary context (the one torch uses), retained once and kept
// for the life of the process.
inline CUcontext primary_context(int device) {
  static std::mutex mu;
  static std::map<int, CUcontext> contexts;
  std::lock_guard<std::mutex> lock(mu);
  auto it = contexts.find(device);
  if (it != contexts.end()) return it->second;
  CUdevice dev = device_handle(device);
  CUcontext ctx = nullptr;
  check(driver().primary_ctx_retain(&ctx, dev), "cuDevicePrimaryCtxRetain",
        cat("retaining the primary context of device ", device));
  contexts.emplace(device, ctx);
  return ctx;
}

// Makes the device's primary context current for a scope. A thread with no
// context keeps the primary one afterwards (as torch would set it); a thread
// that had another context gets it back on exit.
class ScopedDeviceContext {
 public:
  explicit ScopedDeviceContext(int device) {
    CUcontext target = primary_context(device);
    CUcontext current = nullptr;
    check(driver().ctx_get_current(&current), "cuCtxGetCurrent", "reading the current CUDA context");
    if (current == target) return;
    if (current == nullptr) {
      check(driver().ctx_set_current(target), "cuCtxSetCurrent",
            cat("making the primary context of device ", device, " current"));
      return;
    }
    check(driver().ctx_push_current(target), "cuCtxPushCurrent",
          cat("switching to the primary context of device ", device));
    pushed_ = true;
  }
  ~ScopedDeviceContext() {
    if (pushed_) {
      CUcontext popped = nullptr;
      driver().ctx_pop_current(&popped);  // cannot throw from a destructor; nothing useful to do on failure
    }
  }
  ScopedDeviceContext(const ScopedDeviceContext&) = delete;
  ScopedDeviceContext& operator=(const ScopedDeviceContext&) = delete;

 private:
  bool pushed_ = false;
};

}  // namespace detail

// Properties of `device`, queried once and cached for the process. Throws a
// clear Error when there is no driver or no such device.
inline const DeviceInfo& device_info(int device) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<DeviceInfo>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(device);
  if (it != cache.end()) return *it->second;
  auto info = std::make_unique<DeviceInfo>(detail::query_device_info(device));
  return *cache.emplace(device, std::move(info)).first->second;
}

}  // namespace deep_jit
