#include "engine/runtime/interpreter.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/base/status.h"
#include "engine/runtime/bytecode.h"

namespace kiln {
namespace {

class InterpreterProgram : public Program {
 public:
  explicit InterpreterProgram(bytecode::Kernel kernel)
      : Program(kernel.name), kernel_(std::move(kernel)) {}

  absl::Status Launch(const std::vector<void*>& bufs, const std::vector<int64_t>& vars,
                      const LaunchDims& dims, bool /*wait*/, double* seconds) override {
    const auto start = std::chrono::steady_clock::now();
    absl::Status status = bytecode::Execute(kernel_, bufs, nullptr, vars, 0, dims.global[0]);
    if (seconds != nullptr) {
      *seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    return status;
  }

  absl::Status LaunchChecked(const std::vector<void*>& bufs, const std::vector<size_t>& nbytes,
                             const std::vector<int64_t>& vars, const LaunchDims& dims) override {
    return bytecode::Execute(kernel_, bufs, &nbytes, vars, 0, dims.global[0]);
  }

 private:
  const bytecode::Kernel kernel_;
};

}  // namespace

absl::StatusOr<std::string> BytecodeCompiler::Compile(const std::string& source) {
  RETURN_IF_ERROR(bytecode::Parse(source).status());
  return source;
}

absl::StatusOr<std::unique_ptr<Program>> InterpreterDevice::LoadProgram(
    const std::string& function, const std::string& binary) {
  ASSIGN_OR_RETURN(bytecode::Kernel kernel, bytecode::Parse(binary));
  if (kernel.name != function) {
    return absl::NotFoundError(absl::StrCat("bytecode defines kernel '", kernel.name,
                                            "', not '", function, "'"));
  }
  return std::unique_ptr<Program>(std::make_unique<InterpreterProgram>(std::move(kernel)));
}

}  // namespace kiln
