// The deep_gemm extension: a shared object loaded with torch.ops.load_library.
// It defines the `deep_gemm` op namespace; each ops/*.cpp adds its family as a
// fragment. Its only Python content is an empty module (limited API 3.10), so
// the file can carry the abi3 name and even be imported without harm
// (DESIGN.md 2); Python code reaches the ops through torch.ops only.
#include <Python.h>
#include <torch/csrc/stable/library.h>

namespace {
PyModuleDef empty_module = {PyModuleDef_HEAD_INIT, "_C_extension", nullptr, 0, nullptr, nullptr, nullptr, nullptr, nullptr};
}  // namespace

PyMODINIT_FUNC PyInit__C_extension(void) { return PyModule_Create(&empty_module); }

STABLE_TORCH_LIBRARY(deep_gemm, m) {
  // Schemas live with their implementations (ops/*.cpp, fragments).
  (void)m;
}
