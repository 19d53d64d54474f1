#include "server/echo.h"

#include "absl/strings/str_cat.h"

namespace kiln {

std::string Echo(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  // Do not split a UTF-8 sequence: back up over continuation bytes.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(text.substr(0, cut), "...(", text.size(), " bytes)");
}

}  // namespace kiln
