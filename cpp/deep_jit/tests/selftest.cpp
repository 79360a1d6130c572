// deep_jit self-test. Usage: selftest <tests-dir>   (see run.sh)
//
// Compiles a real sm_90a kernel (TMA + mbarrier + wgmma inline PTX) through
// each available backend and checks the cache: hits start no compiler, corrupt
// entries are rebuilt, include edits recompile, a killed compiler publishes
// nothing, 8 processes compiling one key end with one valid entry, read-only
// roots and bad paths give clear errors, diagnostics work. With a Hopper GPU
// it also loads and launches the kernels and checks their results.
#include <deep_jit/deep_jit.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace dj = deep_jit;
namespace fs = std::filesystem;
using dj::detail::cat;

namespace {

int g_failures = 0;
int g_checks = 0;

void check(bool ok, const std::string& what) {
  ++g_checks;
  std::printf("  [%s] %s\n", ok ? "ok" : "FAIL", what.c_str());
  if (!ok) ++g_failures;
  std::fflush(stdout);
}

// Runs `fn`, expecting an Error whose message contains every one of `needles`.
void expect_error(const std::string& what, const std::function<void()>& fn, const std::vector<std::string>& needles) {
  try {
    fn();
    check(false, what + " (no error was raised)");
  } catch (const dj::Error& e) {
    std::string msg = e.what();
    bool all = true;
    for (const auto& n : needles) all = all && msg.find(n) != std::string::npos;
    std::string first_line = msg.substr(0, msg.find('\n'));
    if (first_line.size() > 400) first_line = first_line.substr(0, 400) + "...";
    check(all, what + " -> Error: " + first_line);
    if (!all) std::printf("      full message: %s\n", msg.c_str());
  }
}

struct Paths {
  std::string self;          // this executable
  std::string tests_dir;     // cpp/deep_jit/tests
  std::string tmp;           // scratch, with a space in its name
  std::string include_root;  // a copy of tests/kernels we may edit
};

Paths g_paths;

// The kernel is read from the include root (a copy of tests/kernels), which
// child processes receive on their command line.
std::string kernel_code(const std::string& include_root) {
  return dj::detail::read_file(include_root + "/tma_wgmma.cu");
}

dj::KernelSource tma_kernel(const std::string& include_root, const std::string& tag = "") {
  dj::KernelSource src;
  src.name = "djtest_tma_wgmma";
  src.code = kernel_code(include_root);
  src.entry = "djtest_tma_wgmma";
  src.options.include_dirs = {include_root};
  if (!tag.empty()) src.options.defines = {"DJ_TAG=" + tag};
  return src;
}

dj::KernelSource attrs_kernel() {
  dj::KernelSource src;
  src.name = "djtest_attrs";
  src.entry = "djtest_attrs";
  src.code = R"(
extern "C" __global__ void djtest_attrs(int* out) {
  extern __shared__ int buf[];
  buf[threadIdx.x] = threadIdx.x;
  __syncthreads();
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  if (threadIdx.x == 0) out[blockIdx.x] = buf[5] + 1000 * (int)rank;
}
)";
  return src;
}

size_t count_entries(const std::string& root, const std::string& prefix) {
  size_t n = 0;
  for (const auto& name : dj::detail::list_dir(root + "/cache"))
    if (name.rfind(prefix, 0) == 0) ++n;
  return n;
}

void configure(const std::string& root, const std::string& backend, const std::string& nvcc = "") {
  dj::RuntimeConfig cfg;
  cfg.cache_roots = {root};
  cfg.backend = backend;
  cfg.nvcc_path = nvcc;
  dj::Runtime::get().configure(cfg);
}

bool has_nvrtc() {
  try {
    return !dj::detail::find_nvrtc_library().empty();
  } catch (const dj::Error&) {
    return false;
  }
}

// ------------------------------------------------------------ driver & TMA

void test_driver() {
  std::printf("driver:\n");
  if (!dj::driver_available()) {
    expect_error("device_count() without a driver", [] { dj::device_count(); }, {"libcuda.so.1"});
    expect_error("device_info(0) without a driver", [] { dj::device_info(0); }, {"No CUDA driver"});
    return;
  }
  int n = dj::device_count();
  check(true, cat("driver CUDA ", dj::driver_version(), ", ", n, " device(s)"));
  if (n > 0) {
    const auto& d = dj::device_info(0);
    check(d.sm_count > 0, cat("device 0: ", d.name, ", sm_", d.cc_major, d.cc_minor, ", ", d.sm_count, " SMs, ",
                              d.max_shared_optin, " B opt-in smem, ", d.l2_bytes, " B L2"));
  }
  expect_error("device_info(99)", [] { dj::device_info(99); }, {"99"});
}

// A 2-D bf16 map over 64 rows of 16 elements, rows `stride` bytes apart.
dj::TensorMapSpec spec(const void* base, uint64_t stride, uint32_t box_inner, CUtensorMapSwizzle sw) {
  dj::TensorMapSpec s;
  s.base = base;
  s.dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  s.rank = 2;
  s.dims[0] = 16;
  s.dims[1] = 64;
  s.strides_bytes[0] = stride;
  s.box[0] = box_inner;
  s.box[1] = 64;
  s.swizzle = sw;
  return s;
}

void test_tma_checks() {
  std::printf("TMA argument checks:\n");
  alignas(16) static char buf[4096];
  expect_error("misaligned base", [&] { dj::detail::check_tensor_map(spec(buf + 8, 32, 16, CU_TENSOR_MAP_SWIZZLE_32B)); },
               {"16-byte aligned"});
  expect_error("stride not a multiple of 16", [&] { dj::detail::check_tensor_map(spec(buf, 40, 16, CU_TENSOR_MAP_SWIZZLE_NONE)); },
               {"multiple of 16"});
  expect_error("box wider than the swizzle span",
               [&] { dj::detail::check_tensor_map(spec(buf, 256, 32, CU_TENSOR_MAP_SWIZZLE_32B)); }, {"swizzle span"});
  expect_error("box of 0", [&] { dj::detail::check_tensor_map(spec(buf, 32, 0, CU_TENSOR_MAP_SWIZZLE_NONE)); },
               {"box dimension 0"});
  try {
    dj::detail::check_tensor_map(spec(buf, 32, 16, CU_TENSOR_MAP_SWIZZLE_32B));
    check(true, "valid 2-D spec accepted");
  } catch (const dj::Error& e) {
    check(false, std::string("valid 2-D spec rejected: ") + e.what());
  }
  if (!dj::driver_available())
    expect_error("make_tensor_map_2d without a driver",
                 [&] {
                   dj::make_tensor_map_2d(buf, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 16, 64, 32, 16, 64,
                                          CU_TENSOR_MAP_SWIZZLE_32B);
                 },
                 {"No CUDA driver"});
}

void test_tma_memo() {
  std::printf("Tensor-map memo:\n");
  alignas(16) static char buf[4096];
  const dj::TensorMapSpec a = spec(buf, 32, 16, CU_TENSOR_MAP_SWIZZLE_32B);
  auto memo = std::make_unique<dj::detail::TensorMapMemo>();
  check(memo->find(a) == nullptr, "an empty memo has no map");
  CUtensorMap fake{};
  fake.opaque[0] = 0x1234;
  memo->put(a, fake);
  const CUtensorMap* hit = memo->find(a);
  check(hit != nullptr && hit->opaque[0] == 0x1234, "the same spec finds the stored map");
  dj::TensorMapSpec b = a;
  b.dims[1] = 65;  // rows
  check(memo->find(b) == nullptr, "another row count misses");
  b = a;
  b.base = buf + 16;
  check(memo->find(b) == nullptr, "another base address misses");
  b = a;
  b.strides_bytes[0] = 64;
  check(memo->find(b) == nullptr, "another row stride misses");
  b = a;
  b.box[1] = 32;
  check(memo->find(b) == nullptr, "another box misses");
  b = a;
  b.swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
  check(memo->find(b) == nullptr, "another swizzle misses");
  b = a;
  b.dims[3] = 7;  // beyond the rank: not part of the spec
  check(memo->find(b) != nullptr, "fields beyond the rank are ignored");
  // Fill the memo with other specs: the slot of `a` gets overwritten at some point, and a
  // lookup never returns another spec's map.
  bool wrong = false;
  for (uint64_t i = 1; i <= 4 * dj::detail::TensorMapMemo::kSlots; ++i) {
    b = a;
    b.dims[1] = 64 + i;
    CUtensorMap m{};
    m.opaque[0] = i;
    memo->put(b, m);
    const CUtensorMap* got = memo->find(b);
    wrong = wrong || got == nullptr || got->opaque[0] != i;
  }
  const CUtensorMap* after = memo->find(a);
  check(!wrong && (after == nullptr || after->opaque[0] == 0x1234), "evictions keep every hit exact");
}

// ------------------------------------------------------------ per backend

// Switch parsing, build-directory owner names and hostile entry files, with
// no compiler: junk switch values are Errors, a FIFO or a link to /dev/zero
// in an entry is refused without blocking or reading it.
void test_env_and_hostile_entries() {
  std::printf("environment and hostile entries:\n");
  for (const char* on : {"1", "true", "TRUE", "On", "yes"}) {
    ::setenv("DJ_TEST_SWITCH", on, 1);
    check(dj::detail::env_flag("DJ_TEST_SWITCH"), cat("switch value '", on, "' is on"));
  }
  for (const char* off : {"0", "false", "OFF", "No", ""}) {
    ::setenv("DJ_TEST_SWITCH", off, 1);
    check(!dj::detail::env_flag("DJ_TEST_SWITCH"), cat("switch value '", off, "' is off"));
  }
  ::setenv("DJ_TEST_SWITCH", "maybe", 1);
  expect_error("a junk switch value", [] { dj::detail::env_flag("DJ_TEST_SWITCH"); },
               {"DJ_TEST_SWITCH", "'maybe'", "1/0, true/false, on/off or yes/no"});
  ::unsetenv("DJ_TEST_SWITCH");
  ::setenv("DG_JIT_CACHE_DIR", "::::", 1);
  expect_error("DG_JIT_CACHE_DIR naming no directory", [] { dj::RuntimeConfig::from_env(); },
               {"DG_JIT_CACHE_DIR", "'::::'", "names no directory"});
  ::unsetenv("DG_JIT_CACHE_DIR");

  std::string name = dj::detail::owned_temp_prefix("k.v1-abc") + ".Ab3dEf";
  auto owner = dj::detail::temp_owner(name);
  check(owner && owner->pid == ::getpid() && owner->tag == dj::detail::pid_space_tag() && !owner->tag.empty(),
        "a build directory name records its owner: " + name);
  check(!dj::detail::temp_owner("djtest_tma_wgmma-0123.XXXXXX") && !dj::detail::temp_owner("corrupt.Ab3dEf"),
        "old-style names record no owner");
  check(dj::detail::process_alive(::getpid()) && !dj::detail::process_alive(0), "process_alive");

  std::string entry = g_paths.tmp + "/hostile entry";
  dj::detail::make_dirs(entry, "test directory");
  ::mkfifo((entry + "/manifest").c_str(), 0644);
  std::string why;
  auto start = std::chrono::steady_clock::now();
  bool refused = !dj::detail::read_valid_entry(entry, "k", &why);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  check(refused && s < 5 && why.find("not a regular file") != std::string::npos,
        "a FIFO manifest is refused without blocking: " + why);
  ::unlink((entry + "/manifest").c_str());
  dj::detail::write_file(entry + "/manifest",
                         cat(dj::detail::kManifestMagic, "\nkey k\ncubin_bytes 100\ncubin_sha256 x\n"));
  ::symlink("/dev/zero", (entry + "/kernel.cubin").c_str());
  refused = !dj::detail::read_valid_entry(entry, "k", &why);
  check(refused && why.find("symbolic link") != std::string::npos, "a cubin linked to /dev/zero is not followed: " + why);
  ::unlink((entry + "/kernel.cubin").c_str());
  dj::detail::write_file(entry + "/kernel.cubin", std::string(1000, 'x'));
  refused = !dj::detail::read_valid_entry(entry, "k", &why);
  check(refused && why.find("more than the 100") != std::string::npos, "a cubin larger than recorded is not read: " + why);
  std::string file_entry = g_paths.tmp + "/file entry";
  dj::detail::write_file(file_entry, "x");
  refused = !dj::detail::read_valid_entry(file_entry, "k", &why);
  check(refused && why.find("regular file is where") != std::string::npos,
        "a file where the entry directory belongs is reported (and so repaired): " + why);
}

void corrupt_file(const std::string& path, bool truncate) {
  std::string data = dj::detail::read_file(path);
  if (truncate) data.resize(data.size() / 2);
  else data[data.size() / 2] ^= 0x5a;
  dj::detail::write_file(path, data);
}

void test_backend(const std::string& backend) {
  std::printf("backend %s:\n", backend.c_str());
  std::string root = g_paths.tmp + "/cache " + backend;
  configure(root, backend);
  auto& rt = dj::Runtime::get();
  dj::JitInfo info = rt.info();
  check(info.backend == backend, cat("backend ", info.backend, ": ", info.compiler_path, " [", info.compiler_version, "]"));

  dj::KernelSource src = tma_kernel(g_paths.include_root);
  size_t compiles0 = rt.info().compiles;
  std::string path = rt.build(src);
  dj::JitInfo after = rt.info();
  check(after.compiles == compiles0 + 1 && dj::detail::has_elf_magic(dj::detail::read_file(path)),
        "first build compiles a cubin: " + path);

  size_t hits0 = after.disk_hits;
  std::string again = rt.build(src);
  after = rt.info();
  check(again == path && after.compiles == compiles0 + 1 && after.disk_hits == hits0 + 1,
        "second build is a cache hit (no compiler started)");

  corrupt_file(path, /*truncate=*/true);
  std::string rebuilt = rt.build(src);
  after = rt.info();
  check(rebuilt == path && after.compiles == compiles0 + 2 && after.repaired >= 1 &&
            dj::detail::has_elf_magic(dj::detail::read_file(path)),
        "a truncated cubin is detected and rebuilt");

  corrupt_file(path, /*truncate=*/false);
  rt.build(src);
  after = rt.info();
  check(after.compiles == compiles0 + 3, "a cubin with a flipped byte (same size) is detected and rebuilt");

  // Editing a transitively included header changes the key.
  std::string header = g_paths.include_root + "/djtest/mbarrier.cuh";
  std::string original = dj::detail::read_file(header);
  dj::detail::write_file(header, original + "\n// edited by the self-test (" + backend + ")\n");
  std::string edited = rt.build(src);
  dj::detail::write_file(header, original);
  after = rt.info();
  check(edited != path && after.compiles == compiles0 + 4, "editing a transitively included header recompiles");
  check(rt.build(src) == path, "restoring the header finds the original entry again");

  // Threads of one process compiling one new key: one compile, all succeed.
  {
    dj::KernelSource fresh = tma_kernel(g_paths.include_root, "4242");
    size_t before = rt.info().compiles;
    std::vector<std::thread> threads;
    std::atomic<int> ok{0};
    for (int i = 0; i < 4; ++i)
      threads.emplace_back([&] {
        try {
          if (dj::detail::has_elf_magic(dj::detail::read_file(rt.build(fresh)))) ++ok;
        } catch (const dj::Error& e) {
          std::printf("      thread error: %s\n", e.what());
        }
      });
    for (auto& t : threads) t.join();
    check(ok == 4 && rt.info().compiles == before + 1, "4 threads building one new key: 4 succeed, 1 compile");
  }

  // A second root is searched: an entry there is used without compiling, and
  // misses go to the first root.
  {
    std::string first = g_paths.tmp + "/cache first " + backend;
    dj::RuntimeConfig cfg;
    cfg.cache_roots = {first, root};
    cfg.backend = backend;
    rt.configure(cfg);
    size_t before = rt.info().compiles;
    check(rt.build(src) == path && rt.info().compiles == before, "an entry in the second cache root is used");
    configure(root, backend);
  }

  dj::KernelSource bad = src;
  bad.name = "djtest_broken_" + backend;
  bad.code += "\nthis is not CUDA;\n";
  expect_error("a compile error names the kernel, the compiler output and the kept source",
               [&] { rt.build(bad); }, {"djtest_broken_" + backend, "failed", root + "/failed/", "kernel.cu", "error"});

  dj::KernelSource missing = src;
  missing.options.include_dirs = {g_paths.tmp + "/no such dir"};
  expect_error("a missing include directory", [&] { rt.build(missing); }, {"no such dir", "does not exist"});
}

// ------------------------------------------------------------ NVCC-only

std::string write_kill_wrapper(const std::string& real_nvcc) {
  std::string dir = g_paths.tmp + "/bin with space";
  dj::detail::make_dirs(dir, "wrapper directory");
  std::string path = dir + "/nvcc";
  // Pretends to be nvcc; when DJ_TEST_KILL is set it writes half a cubin to
  // the -o target and SIGKILLs itself, like a compiler killed by the OOM killer.
  std::string script = cat(
      "#!/bin/sh\n"
      "if [ -n \"$DJ_TEST_KILL\" ] && [ \"$1\" != \"--version\" ]; then\n"
      "  out=\"\"; prev=\"\"\n"
      "  for a in \"$@\"; do [ \"$prev\" = \"-o\" ] && out=\"$a\"; prev=\"$a\"; done\n"
      "  printf '\\177ELFhalf' > \"$out\"\n"
      "  kill -9 $$\n"
      "fi\n"
      "if [ -n \"$DJ_TEST_SLOW\" ] && [ \"$1\" != \"--version\" ]; then sleep 3; fi\n"
      "exec '",
      real_nvcc, "' \"$@\"\n");
  dj::detail::write_file(path, script);
  ::chmod(path.c_str(), 0755);
  return path;
}

void test_killed_compiler(const std::string& real_nvcc) {
  std::string wrapper = write_kill_wrapper(real_nvcc);
  std::string root = g_paths.tmp + "/cache killed";
  configure(root, "nvcc", wrapper);
  dj::KernelSource src = tma_kernel(g_paths.include_root, "7");
  ::setenv("DJ_TEST_KILL", "1", 1);
  expect_error("a compiler killed by SIGKILL raises", [&] { dj::Runtime::get().build(src); }, {"signal 9"});
  ::unsetenv("DJ_TEST_KILL");
  check(count_entries(root, "djtest_tma_wgmma") == 0, "... and publishes no cache entry");
  std::string path = dj::Runtime::get().build(src);
  check(dj::detail::has_elf_magic(dj::detail::read_file(path)), "the next call succeeds (compiler path has spaces)");
}

pid_t spawn_child(const std::vector<std::string>& args, const std::string& log);

// The calling process itself is SIGKILLed while its compiler runs: nothing may
// be published, and the next build (which must wait for nobody) succeeds.
void test_killed_caller(const std::string& real_nvcc) {
  std::string wrapper = write_kill_wrapper(real_nvcc);
  std::string root = g_paths.tmp + "/cache killed caller";
  std::string tag = std::to_string(::getpid()) + "9";  // DJ_TAG must be a number
  ::setenv("DJ_TEST_SLOW", "1", 1);
  ::setenv("DG_JIT_NVCC_COMPILER", wrapper.c_str(), 1);
  pid_t pid = spawn_child({g_paths.self, "--child-build", root, "nvcc", g_paths.include_root, tag},
                          g_paths.tmp + "/child-killed.log");
  ::unsetenv("DJ_TEST_SLOW");
  ::unsetenv("DG_JIT_NVCC_COMPILER");
  ::usleep(1500 * 1000);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  check(WIFSIGNALED(status) && count_entries(root, "djtest_tma_wgmma") == 0,
        "a process SIGKILLed mid-compile publishes no cache entry");
  configure(root, "nvcc", wrapper);  // same compiler identity, so the same key and lock file
  std::string path = dj::Runtime::get().build(tma_kernel(g_paths.include_root, tag));
  check(dj::detail::has_elf_magic(dj::detail::read_file(path)), "... and the next build succeeds");
}

pid_t spawn_child(const std::vector<std::string>& args, const std::string& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0].c_str(), &fa, nullptr, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

bool wait_ok(pid_t pid) {
  int status = 0;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void test_many_processes(const std::string& backend, bool locks) {
  std::string root = g_paths.tmp + "/cache multi " + backend + (locks ? "" : " nolock");
  if (!locks) ::setenv("DG_JIT_DISABLE_LOCKS", "1", 1);
  std::string tag = std::to_string(::getpid());
  std::vector<pid_t> pids;
  for (int i = 0; i < 8; ++i)
    pids.push_back(spawn_child({g_paths.self, "--child-build", root, backend, g_paths.include_root, tag},
                               cat(g_paths.tmp, "/child-", backend, "-", i, ".log")));
  int ok = 0;
  for (pid_t p : pids) ok += wait_ok(p) ? 1 : 0;
  ::unsetenv("DG_JIT_DISABLE_LOCKS");
  check(ok == 8, cat("8 processes compiling one key at once (", backend, locks ? "" : ", no flock: rename race only",
                     "): ", ok, " succeeded"));
  check(count_entries(root, "djtest_tma_wgmma") == 1, "... leaving exactly one cache entry");
  std::string log = g_paths.tmp + "/child-" + backend + "-check.log";
  bool fresh_ok = wait_ok(spawn_child({g_paths.self, "--child-build", root, backend, g_paths.include_root, tag}, log));
  std::string out = dj::detail::read_file(log);
  check(fresh_ok && out.find("compiles=0") != std::string::npos, "... which a fresh process uses without compiling");
}

int child_build(int argc, char** argv) {
  if (argc < 6) return 2;
  try {
    configure(argv[2], argv[3]);
    std::string path = dj::Runtime::get().build(tma_kernel(argv[4], argv[5]));
    std::printf("compiles=%zu path=%s\n", dj::Runtime::get().info().compiles, path.c_str());
    return dj::detail::has_elf_magic(dj::detail::read_file(path)) ? 0 : 1;
  } catch (const dj::Error& e) {
    std::printf("Error: %s\n", e.what());
    return 1;
  }
}

// A read-only root must fail with its path named. Root ignores permission
// bits, so as root the check runs in a child that drops to "nobody".
void test_read_only_root(const std::string& backend) {
  std::string root = g_paths.tmp + "/read only root";
  dj::detail::make_dirs(root, "test directory");
  ::chmod(root.c_str(), 0555);
  ::chmod(g_paths.tmp.c_str(), 0755);
  std::string log = g_paths.tmp + "/readonly.log";
  std::vector<std::string> args = {g_paths.self, "--child-readonly", root, backend, g_paths.include_root};
  bool ok = wait_ok(spawn_child(args, log));
  std::string out = dj::detail::read_file(log);
  check(ok, "a read-only cache root gives an Error naming it: " + out.substr(0, out.find('\n')));
}

int child_readonly(int argc, char** argv) {
  if (argc < 5) return 2;
  if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) {
    std::printf("cannot drop privileges\n");
    return 1;
  }
  try {
    configure(argv[2], argv[3]);
    dj::Runtime::get().build(tma_kernel(argv[4], "ro"));
    std::printf("no error raised\n");
    return 1;
  } catch (const dj::Error& e) {
    std::printf("%s\n", e.what());
    return std::strstr(e.what(), argv[2]) && std::strstr(e.what(), "not writable") ? 0 : 1;
  }
}

void test_diagnostics(const std::string& backend) {
  std::printf("diagnostics (%s):\n", backend.c_str());
  std::string root = g_paths.tmp + "/cache diag " + backend;
  configure(root, backend);
  auto& rt = dj::Runtime::get();
  ::setenv("DG_JIT_PTXAS_CHECK", "1", 1);
  ::setenv("DG_JIT_DUMP_PTX", "1", 1);
  try {
    std::string path = rt.build(tma_kernel(g_paths.include_root));
    check(true, "DG_JIT_PTXAS_CHECK passes a kernel without spills or stack");
    std::string ptx = dj::detail::parent_dir(path) + "/kernel.ptx";
    check(backend != "nvcc" || dj::detail::is_file(ptx), "DG_JIT_DUMP_PTX writes kernel.ptx next to the cubin");
    if (backend == "nvrtc") std::printf("      (nvrtc PTX dump present: %s)\n", dj::detail::is_file(ptx) ? "yes" : "no");
  } catch (const dj::Error& e) {
    check(false, std::string("DG_JIT_PTXAS_CHECK on a clean kernel: ") + e.what());
  }
  ::unsetenv("DG_JIT_DUMP_PTX");
  dj::KernelSource lmem;
  lmem.name = "djtest_lmem";
  lmem.entry = "djtest_lmem";
  lmem.code = R"(
extern "C" __global__ void djtest_lmem(float* p, int n) {
  volatile float a[256];
  for (int i = 0; i < 256; ++i) a[i] = p[i * n];
  p[threadIdx.x] = a[(n * threadIdx.x) & 255];
}
)";
  expect_error("DG_JIT_PTXAS_CHECK rejects a kernel with a stack frame", [&] { rt.build(lmem); },
               {"DG_JIT_PTXAS_CHECK", "djtest_lmem", "stack frame"});
  ::unsetenv("DG_JIT_PTXAS_CHECK");
}

// ------------------------------------------------------------ GPU

uint16_t to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);  // exact for the small values used
}

void test_gpu(const std::string& backend) {
  std::printf("GPU (%s):\n", backend.c_str());
  configure(g_paths.tmp + "/cache " + backend, backend);
  auto& rt = dj::Runtime::get();
  const dj::Kernel& k = rt.load(tma_kernel(g_paths.include_root), 0);
  const dj::Kernel& k2 = rt.load(tma_kernel(g_paths.include_root), 0);
  check(&k == &k2, "load() is memoised");
  const auto& api = dj::detail::driver();

  std::vector<uint16_t> a(64 * 16), b(8 * 16);
  std::vector<float> af(a.size()), bf(b.size());
  unsigned seed = 12345;
  auto next = [&] {
    seed = seed * 1103515245u + 12345u;
    return static_cast<float>(static_cast<int>((seed >> 16) % 17) - 8) / 4.0f;
  };
  for (size_t i = 0; i < a.size(); ++i) a[i] = to_bf16(af[i] = next());
  for (size_t i = 0; i < b.size(); ++i) b[i] = to_bf16(bf[i] = next());
  CUdeviceptr da = 0, db = 0, dout = 0;
  api.mem_alloc(&da, a.size() * 2);
  api.mem_alloc(&db, b.size() * 2);
  api.mem_alloc(&dout, 64 * 8 * 4);
  api.memcpy_htod(da, a.data(), a.size() * 2);
  api.memcpy_htod(db, b.data(), b.size() * 2);

  CUtensorMap ta = dj::make_tensor_map_2d(reinterpret_cast<void*>(da), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 16, 64, 32,
                                          16, 64, CU_TENSOR_MAP_SWIZZLE_32B);
  CUtensorMap tb = dj::make_tensor_map_2d(reinterpret_cast<void*>(db), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 16, 8, 32,
                                          16, 8, CU_TENSOR_MAP_SWIZZLE_32B);
  dj::LaunchConfig cfg;
  cfg.block[0] = 128;
  float* out_ptr = reinterpret_cast<float*>(dout);
  dj::launch(k, cfg, ta, tb, out_ptr);
  dj::detail::check(api.ctx_synchronize(), "cuCtxSynchronize", "running the TMA + wgmma kernel");
  std::vector<float> out(64 * 8);
  api.memcpy_dtoh(out.data(), dout, out.size() * 4);
  double max_err = 0;
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < 8; ++n) {
      float ref = 0;
      for (int kk = 0; kk < 16; ++kk) ref += af[m * 16 + kk] * bf[n * 16 + kk];
      max_err = std::max(max_err, static_cast<double>(std::abs(ref - out[m * 8 + n])));
    }
  check(max_err == 0.0, cat("TMA + mbarrier + wgmma kernel result matches the reference (max error ",
                            static_cast<double>(max_err), ")"));

  // Launch attributes: > 48 KiB dynamic shared memory, a cluster of 2, PDL.
  const dj::Kernel& ka = rt.load(attrs_kernel(), 0);
  CUdeviceptr dflags = 0;
  api.mem_alloc(&dflags, 4 * 4);
  dj::LaunchConfig c2;
  c2.grid[0] = 4;
  c2.block[0] = 128;
  c2.shared_bytes = 100 * 1024;
  c2.cluster_dim = 2;
  c2.pdl = true;
  int* flags_ptr = reinterpret_cast<int*>(dflags);
  dj::launch(ka, c2, flags_ptr);
  dj::detail::check(api.ctx_synchronize(), "cuCtxSynchronize", "running the attribute kernel");
  int flags[4] = {};
  api.memcpy_dtoh(flags, dflags, sizeof(flags));
  check(flags[0] == 5 && flags[1] == 1005 && flags[2] == 5 && flags[3] == 1005,
        cat("100 KiB smem + cluster 2 + PDL launch: ", flags[0], " ", flags[1], " ", flags[2], " ", flags[3]));
  dj::LaunchConfig c3 = c2;
  c3.grid[0] = 3;
  expect_error("a grid not divisible by the cluster", [&] { dj::launch(ka, c3, flags_ptr); }, {"cluster"});
  api.mem_free(da);
  api.mem_free(db);
  api.mem_free(dout);
  api.mem_free(dflags);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--child-build") return child_build(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "--child-readonly") return child_readonly(argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <cpp/deep_jit/tests>\n", argv[0]);
    return 2;
  }
  g_paths.self = fs::read_symlink("/proc/self/exe").string();
  g_paths.tests_dir = dj::detail::absolute_path(argv[1]);
  g_paths.tmp = dj::detail::make_temp_dir("/tmp", "deep jit selftest");
  g_paths.include_root = g_paths.tmp + "/include root";
  fs::copy(g_paths.tests_dir + "/kernels", g_paths.include_root, fs::copy_options::recursive);
  std::printf("scratch: %s\n", g_paths.tmp.c_str());

  try {
    test_driver();
    test_tma_checks();
    test_tma_memo();
    test_env_and_hostile_entries();
    std::string nvcc = dj::detail::find_nvcc();
    std::vector<std::string> backends;
    if (!nvcc.empty()) backends.push_back("nvcc");
    if (has_nvrtc()) backends.push_back("nvrtc");
    check(!backends.empty(), "at least one backend is available");
    for (const auto& b : backends) test_backend(b);
    std::printf("processes:\n");
    if (!nvcc.empty()) test_killed_compiler(nvcc);
    for (const auto& b : backends) test_many_processes(b, /*locks=*/true);
    if (!nvcc.empty()) test_many_processes("nvcc", /*locks=*/false);
    if (!nvcc.empty()) test_killed_caller(nvcc);
    if (!backends.empty()) test_read_only_root(backends.front());
    for (const auto& b : backends) test_diagnostics(b);
    if (dj::driver_available() && dj::device_count() > 0 && dj::device_info(0).cc_major == 9)
      for (const auto& b : backends) test_gpu(b);
    else
      std::printf("GPU: skipped (no Hopper GPU visible)\n");
  } catch (const dj::Error& e) {
    check(false, std::string("unexpected Error: ") + e.what());
  }

  dj::JitInfo info = dj::Runtime::get().info();
  std::printf("JitInfo: compiles=%zu failures=%zu disk_hits=%zu repaired=%zu kernels_loaded=%zu\n", info.compiles,
              info.compile_failures, info.disk_hits, info.repaired, info.kernels_loaded);
  std::printf("%d checks, %d failed\n", g_checks, g_failures);
  if (g_failures == 0) dj::detail::remove_tree(g_paths.tmp);
  else std::printf("scratch kept at %s\n", g_paths.tmp.c_str());
  return g_failures == 0 ? 0 : 1;
}
