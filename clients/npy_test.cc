#include "clients/npy.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace kiln {
namespace {

std::string Floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.begin(), s.size());
  return s;
}

TEST(ClientNpyTest, RoundTripsThroughAFile) {
  ClientTensor t{"x", "FP32", {2, 2}, Floats({1.5f, -2.f, 0.f, 7.25f})};
  std::string path = ::testing::TempDir() + "/client_npy_test.npy";
  ASSERT_TRUE(WriteNpyTensor(path, t).ok());
  auto back = ReadNpyTensor(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->datatype, "FP32");
  EXPECT_EQ(back->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(back->data, t.data);
  std::remove(path.c_str());
  EXPECT_EQ(ReadNpyTensor(path).status().code(), absl::StatusCode::kNotFound);
}

TEST(ClientNpyTest, DatatypeNames) {
  for (const char* dt : {"BOOL", "INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32", "INT64",
                         "UINT64", "FP16", "FP64"}) {
    SCOPED_TRACE(dt);
    ClientTensor t{"x", dt, {0}, ""};
    auto bytes = SerializeNpyTensor(t);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    auto back = ParseNpyTensor(*bytes);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->datatype, dt);
  }
  // No NumPy type, or not a KServe datatype name.
  for (const char* dt : {"BF16", "BYTES", "float32", "FLOAT"})
    EXPECT_FALSE(SerializeNpyTensor(ClientTensor{"x", dt, {0}, ""}).ok()) << dt;
  // Data that does not match the shape.
  EXPECT_FALSE(SerializeNpyTensor(ClientTensor{"x", "FP32", {3}, Floats({1.f})}).ok());
}

TEST(ClientNpyTest, BigEndianFilesAreSwapped) {
  std::string dict = "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }";
  while ((10 + dict.size() + 1) % 64 != 0) dict.push_back(' ');
  dict.push_back('\n');
  std::string file = std::string("\x93NUMPY\x01\x00", 8);
  file.push_back(static_cast<char>(dict.size()));
  file.push_back(0);
  file += dict;
  file += std::string("\x00\x00\x01\x02\xff\xff\xff\xfe", 8);
  auto t = ParseNpyTensor(file);
  ASSERT_TRUE(t.ok()) << t.status();
  int32_t v[2];
  std::memcpy(v, t->data.data(), 8);
  EXPECT_EQ(v[0], 0x0102);
  EXPECT_EQ(v[1], -2);
  EXPECT_FALSE(ParseNpyTensor(file.substr(0, file.size() - 1)).ok());  // truncated
}

}  // namespace
}  // namespace kiln
