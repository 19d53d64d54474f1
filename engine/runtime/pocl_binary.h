// A sanity check of the program binaries PoCL returns from
// clGetProgramInfo(CL_PROGRAM_BINARIES) and accepts in
// clCreateProgramWithBinary.
//
// A PoCL binary ("poclbin\0" + header) embeds the program's LLVM bitcode as
// the file "/program.bc" (u32 path length, path, u32 content length,
// content). PoCL fills it from its own on-disk cache, which kiln shares
// between processes (POCL_CACHE_DIR). When another process is rewriting that
// file at the moment of serialization, the binary carries an empty
// program.bc, and loading it later trips an assertion inside PoCL
// (pocl_binary.c: `len > 0`) that aborts the process. kiln therefore checks
// a binary before caching it and before loading it.
//
// Binaries of other OpenCL implementations (no "poclbin" magic) pass
// unchecked. Thread-safe: a pure function.
#ifndef KILN_ENGINE_RUNTIME_POCL_BINARY_H_
#define KILN_ENGINE_RUNTIME_POCL_BINARY_H_

#include <string_view>

#include "absl/status/status.h"

namespace kiln {

// OK for a non-PoCL binary or a PoCL binary whose embedded /program.bc is
// present, non-empty, inside the buffer and starts with the LLVM bitcode
// magic; DataLossError naming what is wrong otherwise.
absl::Status CheckPoclBinary(std::string_view binary);

}  // namespace kiln

#endif  // KILN_ENGINE_RUNTIME_POCL_BINARY_H_
