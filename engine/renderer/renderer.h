// Renderers: linear UOp programs (engine/codegen) to source text.
//
//   RenderC         C for the CPU device (clang). Kernel ABI:
//                   void NAME(void** bufs, const long long* vars,
//                             long long start, long long end);
//                   the loop marked parallel runs [start, end).
//   RenderBytecode  the textual bytecode the interpreter device executes
//                   (one line per UOp; see engine/runtime/interpreter.h).
// Pure functions of their input; thread-safe.
#ifndef KILN_ENGINE_RENDERER_RENDERER_H_
#define KILN_ENGINE_RENDERER_RENDERER_H_

#include <string>

#include "engine/uop/uop.h"

namespace kiln {

std::string RenderC(const std::string& name, const UOpList& uops);
std::string RenderBytecode(const std::string& name, const UOpList& uops);

// Formats a constant the way both renderers print it ("%.17g", inf, nan).
std::string FormatConst(const UOp& c);

}  // namespace kiln

#endif  // KILN_ENGINE_RENDERER_RENDERER_H_
