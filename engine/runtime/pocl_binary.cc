#include "engine/runtime/pocl_binary.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

constexpr std::string_view kMagic("poclbin\0", 8);
constexpr std::string_view kProgramPath = "/program.bc";
constexpr std::string_view kBitcodeMagic("BC\xc0\xde", 4);

uint32_t LoadU32(std::string_view s, size_t at) {
  uint32_t v = 0;  // PoCL writes little-endian; so does every host kiln runs on
  std::memcpy(&v, s.data() + at, sizeof(v));
  return v;
}

}  // namespace

absl::Status CheckPoclBinary(std::string_view binary) {
  if (binary.substr(0, kMagic.size()) != kMagic) return absl::OkStatus();
  // The embedded file entry: u32 path length, path, u32 content length.
  std::string entry(4, '\0');
  const uint32_t path_len = kProgramPath.size();
  std::memcpy(entry.data(), &path_len, sizeof(path_len));
  entry += kProgramPath;
  const size_t at = binary.find(entry);
  if (at == std::string_view::npos)
    return absl::DataLossError("PoCL program binary without an embedded /program.bc");
  const size_t len_at = at + entry.size();
  if (binary.size() - len_at < sizeof(uint32_t))
    return absl::DataLossError("PoCL program binary cut short after /program.bc's name");
  const uint32_t len = LoadU32(binary, len_at);
  const size_t content_at = len_at + sizeof(uint32_t);
  if (len == 0)
    return absl::DataLossError(
        "PoCL program binary with an empty /program.bc (PoCL's cache was being rewritten)");
  if (binary.size() - content_at < len)
    return absl::DataLossError(absl::StrCat("PoCL program binary cut short: /program.bc claims ",
                                            len, " bytes, ", binary.size() - content_at,
                                            " follow"));
  if (binary.substr(content_at, kBitcodeMagic.size()) != kBitcodeMagic)
    return absl::DataLossError("PoCL program binary whose /program.bc is not LLVM bitcode");
  return absl::OkStatus();
}

}  // namespace kiln
