// The deep_gemm extension: a shared object loaded with torch.ops.load_library.
// It defines the `deep_gemm` op namespace (ops/extension_info.cpp); each
// ops/*.cpp adds its family as a fragment. Its only Python content is an empty
// module (limited API 3.10), so the file can carry the abi3 name and even be
// imported without harm (DESIGN.md 2); Python code reaches the ops through
// torch.ops only.
//
// One registration per process. A second copy of this file (another venv's, a
// vendored one) loaded into a process where a deep_gemm build already registered
// torch.ops.deep_gemm would have its static initializers re-define every schema;
// the dispatcher refuses, the stable-ABI macros throw inside dlopen and the
// process aborts. So this file owns the registration calls of the whole .so:
//
//   * it defines the LibTorch C-shim registration functions the
//     STABLE_TORCH_LIBRARY* macros call (aoti_torch_library_init_*, _def, _impl,
//     torch_library_impl, aoti_torch_library_delete_object) with hidden
//     visibility, so every call from this .so binds here at link time (the
//     strictest visibility of a symbol wins, ELF gABI) and nothing outside this
//     .so is affected; each forwards to LibTorch's function (dlsym RTLD_NEXT);
//   * before the first of them, the guard below looks for another loaded copy
//     (any loaded object exporting deep_gemm_extension_identity_v1, found with
//     dl_iterate_phdr: process-wide, nothing inherited by child processes) that
//     registered the ops. Same build id (the GNU build-id note): this copy
//     registers nothing, silently, and the ops are the first copy's. Different
//     build: it registers nothing and prints one line naming both files to
//     stderr (a static initializer cannot raise a Python exception); the
//     deep_gemm._C facade turns that state into an ImportError naming both.
//     Older builds (without the identity symbol) are recognised by their
//     PyInit__C_extension plus a registered deep_gemm::get_tc_util, and treated
//     as a different build.
//
// deep_gemm_extension_identity_v1() reports, tab separated:
//   path, build id, state (registered | same_build | other_build), and for the
//   last two the other copy's path and build id.
#include <Python.h>

#include <dlfcn.h>
#include <link.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {
PyModuleDef empty_module = {PyModuleDef_HEAD_INIT, "_C_extension", nullptr, 0, nullptr, nullptr, nullptr, nullptr, nullptr};
}  // namespace

PyMODINIT_FUNC PyInit__C_extension(void) { return PyModule_Create(&empty_module); }

// ---- the C-shim types (as in torch/csrc/inductor/aoti_torch/c/shim.h; this file
// includes no torch header so that its definitions below are the only ones) ----
class TorchLibraryOpaque;
using TorchLibraryHandle = TorchLibraryOpaque*;
using AOTITorchError = int32_t;
using StableIValue = uint64_t;
using BoxedFn = void (*)(StableIValue*, uint64_t, uint64_t);
constexpr AOTITorchError kTorchSuccess = 0;

extern "C" const char* deep_gemm_extension_identity_v1();

namespace {

struct Identity {
  std::string path, build_id, state = "registered", other_path, other_build_id;
  std::string line;  // the tab-separated report
};

Identity& identity() {
  static Identity id;
  return id;
}

bool g_checked = false;
bool g_skip = false;  // register nothing: another copy owns torch.ops.deep_gemm

std::string hex(const unsigned char* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) s += {digits[p[i] >> 4], digits[p[i] & 15]};
  return s;
}

// The GNU build-id note of the object loaded at `base`, "gnu:<hex>"; without a note,
// an FNV-1a hash of the file, "fnv:<hex>".
struct BuildIdQuery {
  uintptr_t base;
  std::string id;
};

int find_build_id(dl_phdr_info* info, size_t, void* data) {
  auto* q = static_cast<BuildIdQuery*>(data);
  if (info->dlpi_addr != q->base) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
    const unsigned char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const unsigned char* name = p + sizeof(ElfW(Nhdr));
      const unsigned char* desc = name + ((nh->n_namesz + 3) & ~3u);
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0 &&
          desc + nh->n_descsz <= end) {
        q->id = "gnu:" + hex(desc, nh->n_descsz);
        return 1;
      }
      p = desc + ((nh->n_descsz + 3) & ~3u);
    }
  }
  return 1;
}

std::string file_hash(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return "unknown";
  uint64_t h = 1469598103934665603ull;
  unsigned char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
    for (size_t i = 0; i < n; ++i) h = (h ^ buf[i]) * 1099511628211ull;
  std::fclose(f);
  const unsigned char bytes[8] = {static_cast<unsigned char>(h >> 56), static_cast<unsigned char>(h >> 48),
                                  static_cast<unsigned char>(h >> 40), static_cast<unsigned char>(h >> 32),
                                  static_cast<unsigned char>(h >> 24), static_cast<unsigned char>(h >> 16),
                                  static_cast<unsigned char>(h >> 8), static_cast<unsigned char>(h)};
  return "fnv:" + hex(bytes, 8);
}

struct Loaded {
  std::string name;
  uintptr_t base;
};

int list_loaded(dl_phdr_info* info, size_t, void* data) {
  if (info->dlpi_name && info->dlpi_name[0]) static_cast<std::vector<Loaded>*>(data)->push_back({info->dlpi_name, info->dlpi_addr});
  return 0;
}

std::vector<std::string> split_tabs(const std::string& s) {
  std::vector<std::string> out(1);
  for (char ch : s) {
    if (ch == '\t') out.emplace_back();
    else out.back() += ch;
  }
  return out;
}

// An older deep_gemm build (no identity symbol) that registered the ops: ask the
// dispatcher for one op every build has. Only reached when some other loaded object
// exports PyInit__C_extension without the identity symbol.
bool older_build_registered() {
  using CallFn = AOTITorchError (*)(const char*, const char*, StableIValue*);
  auto call = reinterpret_cast<CallFn>(dlsym(RTLD_NEXT, "aoti_torch_call_dispatcher"));
  if (!call) return false;
  StableIValue stack[1] = {0};
  return call("deep_gemm::get_tc_util", "", stack) == kTorchSuccess;
}

void check_other_copies() {
  if (g_checked) return;
  g_checked = true;
  Identity& me = identity();
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&deep_gemm_extension_identity_v1), &self) && self.dli_fname) {
    char resolved[PATH_MAX];
    me.path = realpath(self.dli_fname, resolved) ? resolved : self.dli_fname;
  }
  BuildIdQuery q{reinterpret_cast<uintptr_t>(self.dli_fbase), ""};
  dl_iterate_phdr(find_build_id, &q);
  me.build_id = q.id.empty() ? file_hash(me.path) : q.id;

  std::vector<Loaded> loaded;
  dl_iterate_phdr(list_loaded, &loaded);
  std::string older;  // an older build's path, if any candidate
  for (const auto& obj : loaded) {
    if (obj.base == q.base) continue;  // this copy
    void* h = dlopen(obj.name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (!h) continue;
    void* sym = dlsym(h, "deep_gemm_extension_identity_v1");
    Dl_info where{};
    const bool own_symbol = sym && dladdr(sym, &where) && reinterpret_cast<uintptr_t>(where.dli_fbase) == obj.base;
    if (own_symbol) {
      const auto fields = split_tabs(reinterpret_cast<const char* (*)()>(sym)());
      if (fields.size() >= 3 && fields[2] == "registered") {
        me.other_path = fields[0];
        me.other_build_id = fields[1];
        me.state = fields[1] == me.build_id ? "same_build" : "other_build";
      }
    } else if (older.empty()) {
      void* init = dlsym(h, "PyInit__C_extension");
      if (init && dladdr(init, &where) && reinterpret_cast<uintptr_t>(where.dli_fbase) == obj.base) older = obj.name;
    }
    dlclose(h);
    if (me.state != "registered") break;
  }
  if (me.state == "registered" && !older.empty() && older_build_registered()) {
    me.state = "other_build";
    me.other_path = older;
    me.other_build_id = "unknown (an older deep_gemm build)";
  }
  g_skip = me.state != "registered";
  me.line = me.path + "\t" + me.build_id + "\t" + me.state + "\t" + me.other_path + "\t" + me.other_build_id;
  if (me.state == "other_build") {
    std::fprintf(stderr,
                 "deep_gemm: %s (build %s) registers no ops: torch.ops.deep_gemm is already registered in this "
                 "process by %s (build %s), a different build; the ops stay the first copy's (two deep_gemm builds "
                 "cannot share one process)\n",
                 me.path.c_str(), me.build_id.c_str(), me.other_path.c_str(), me.other_build_id.c_str());
    std::fflush(stderr);
  }
}

// Before any default-priority static initializer of this .so (the registrations);
// the forwarders below also run it first, so the order does not depend on this.
__attribute__((constructor(101))) void run_guard_early() { check_other_copies(); }

template <class Fn>
Fn real(const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (!p) {
    std::fprintf(stderr, "deep_gemm: LibTorch does not export %s (%s); the ops cannot be registered\n", name, dlerror());
    std::fflush(stderr);
  }
  return reinterpret_cast<Fn>(p);
}

constexpr AOTITorchError kTorchFailure = 1;

}  // namespace

extern "C" {

__attribute__((visibility("default"))) const char* deep_gemm_extension_identity_v1() {
  check_other_copies();
  return identity().line.c_str();
}

// The registration entry points (see the top of this file).
#define DG_FORWARD(name, sig, ...)                                   \
  static const auto fn = real<AOTITorchError(*) sig>(name);          \
  return fn ? fn(__VA_ARGS__) : kTorchFailure

__attribute__((visibility("hidden"))) AOTITorchError aoti_torch_library_init_impl(const char* ns, const char* k,
                                                                                  const char* file, uint32_t line,
                                                                                  TorchLibraryHandle* ret) {
  check_other_copies();
  if (g_skip) return *ret = nullptr, kTorchSuccess;
  DG_FORWARD("aoti_torch_library_init_impl", (const char*, const char*, const char*, uint32_t, TorchLibraryHandle*),
             ns, k, file, line, ret);
}

__attribute__((visibility("hidden"))) AOTITorchError aoti_torch_library_init_def(const char* ns, const char* file,
                                                                                 uint32_t line, TorchLibraryHandle* ret) {
  check_other_copies();
  if (g_skip) return *ret = nullptr, kTorchSuccess;
  DG_FORWARD("aoti_torch_library_init_def", (const char*, const char*, uint32_t, TorchLibraryHandle*), ns, file, line,
             ret);
}

__attribute__((visibility("hidden"))) AOTITorchError aoti_torch_library_init_fragment(const char* ns, const char* file,
                                                                                      uint32_t line,
                                                                                      TorchLibraryHandle* ret) {
  check_other_copies();
  if (g_skip) return *ret = nullptr, kTorchSuccess;
  DG_FORWARD("aoti_torch_library_init_fragment", (const char*, const char*, uint32_t, TorchLibraryHandle*), ns, file,
             line, ret);
}

__attribute__((visibility("hidden"))) AOTITorchError aoti_torch_library_def(TorchLibraryHandle self,
                                                                            const char* schema) {
  check_other_copies();
  if (g_skip) return kTorchSuccess;
  DG_FORWARD("aoti_torch_library_def", (TorchLibraryHandle, const char*), self, schema);
}

__attribute__((visibility("hidden"))) AOTITorchError aoti_torch_library_impl(TorchLibraryHandle self, const char* name,
                                                                             BoxedFn fn_) {
  check_other_copies();
  if (g_skip) return kTorchSuccess;
  DG_FORWARD("aoti_torch_library_impl", (TorchLibraryHandle, const char*, BoxedFn), self, name, fn_);
}

__attribute__((visibility("hidden"))) AOTITorchError torch_library_impl(TorchLibraryHandle self, const char* name,
                                                                        BoxedFn fn_, uint64_t version) {
  check_other_copies();
  if (g_skip) return kTorchSuccess;
  DG_FORWARD("torch_library_impl", (TorchLibraryHandle, const char*, BoxedFn, uint64_t), self, name, fn_, version);
}

__attribute__((visibility("hidden"))) AOTITorchError aoti_torch_delete_library_object(TorchLibraryHandle tlh) {
  if (tlh == nullptr) return kTorchSuccess;  // a skipped registration
  DG_FORWARD("aoti_torch_delete_library_object", (TorchLibraryHandle), tlh);
}

#undef DG_FORWARD

}  // extern "C"
