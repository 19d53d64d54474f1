#include "engine/runtime/pocl_binary.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace kiln {
namespace {

std::string U32(uint32_t v) {
  std::string s(4, '\0');
  std::memcpy(s.data(), &v, 4);
  return s;
}

// The layout PoCL 3.1 writes (checked against binaries from the test
// cache): magic, device id, version, kernel count, build hash, the size of
// the file block, then per file u32 path length, path, u32 length, content.
std::string PoclBinary(const std::string& program_bc) {
  std::string b("poclbin\0", 8);
  b += std::string(8, '\x11') + U32(9) + U32(1) + U32(0) + U32(4) + U32(1);
  b += std::string("ND/FGAAJOJOHPCPPGCKIIMPCBACAAFKFKNIOJOGI") + '\0';
  b += U32(4 + 11 + 4 + program_bc.size()) + U32(0);
  b += U32(11) + "/program.bc" + U32(program_bc.size()) + program_bc;
  b += U32(1) + "k" + std::string(64, '\0');  // the kernel's metadata follows
  return b;
}

const std::string kBitcode = std::string("BC\xc0\xde", 4) + std::string(100, '\x35');

TEST(PoclBinaryTest, AcceptsAWholeBinary) { EXPECT_TRUE(CheckPoclBinary(PoclBinary(kBitcode)).ok()); }

TEST(PoclBinaryTest, RejectsAnEmptyProgramBc) {
  absl::Status s = CheckPoclBinary(PoclBinary(""));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("empty /program.bc"), std::string::npos) << s;
}

TEST(PoclBinaryTest, RejectsATruncatedBinary) {
  std::string b = PoclBinary(kBitcode);
  const size_t at = b.find("/program.bc");
  for (size_t cut : {at + 11, at + 13, at + 15 + 50}) {
    EXPECT_EQ(CheckPoclBinary(std::string_view(b).substr(0, cut)).code(),
              absl::StatusCode::kDataLoss)
        << cut;
  }
}

TEST(PoclBinaryTest, RejectsAMissingOrForeignProgramBc) {
  std::string no_file("poclbin\0", 8);
  no_file += std::string(200, '\0');
  EXPECT_EQ(CheckPoclBinary(no_file).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(CheckPoclBinary(PoclBinary("not bitcode")).code(), absl::StatusCode::kDataLoss);
}

TEST(PoclBinaryTest, OtherVendorsPassUnchecked) {
  EXPECT_TRUE(CheckPoclBinary("").ok());
  EXPECT_TRUE(CheckPoclBinary("\x7f" "ELF some nvidia ptx").ok());
}

}  // namespace
}  // namespace kiln
