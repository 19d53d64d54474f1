// Renderers: linear UOp programs (engine/codegen) to source text.
//
//   RenderC         C for the CPU device (clang). Kernel ABI:
//                   void NAME(void** bufs, const long long* vars,
//                             long long start, long long end);
//                   the loop marked parallel runs [start, end).
//   RenderBytecode  the textual bytecode the interpreter device executes
//                   (one line per UOp; see engine/runtime/interpreter.h).
//   RenderCuda      CUDA C for NVRTC: extern "C" __global__ NAME(data0, ...,
//                   vars as long long); grid / block dims from the program's
//                   SPECIAL gidx / lidx ops (engine/renderer/cstyle.h).
//   RenderOpenCL    OpenCL C: __kernel NAME(__global data0, ..., vars as long).
// Pure functions of their input; thread-safe.
#ifndef KILN_ENGINE_RENDERER_RENDERER_H_
#define KILN_ENGINE_RENDERER_RENDERER_H_

#include <string>

#include "engine/uop/uop.h"

namespace kiln {

std::string RenderC(const std::string& name, const UOpList& uops);
std::string RenderBytecode(const std::string& name, const UOpList& uops);
std::string RenderCuda(const std::string& name, const UOpList& uops);
std::string RenderOpenCL(const std::string& name, const UOpList& uops);

// Formats a constant the way both renderers print it ("%.17g", inf, nan).
std::string FormatConst(const UOp& c);

}  // namespace kiln

#endif  // KILN_ENGINE_RENDERER_RENDERER_H_
