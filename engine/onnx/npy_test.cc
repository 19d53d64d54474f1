#include "engine/onnx/npy.h"

#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace kiln {
namespace {

std::string Header(const std::string& dict, int major = 1) {
  std::string h = "\x93NUMPY";
  h.push_back(static_cast<char>(major));
  h.push_back(0);
  std::string d = dict;
  size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + d.size() + 1) % 64 != 0) d.push_back(' ');
  d.push_back('\n');
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) h.push_back(static_cast<char>(d.size() >> (8 * i)));
  return h + d;
}

TEST(NpyTest, RoundTripsEveryDtype) {
  int n;
  const DType* all = AllDTypes(&n);
  for (int i = 0; i < n; ++i) {
    DType t = all[i];
    if (t == dtypes::kBFloat16) continue;  // no NumPy type
    HostTensor h = HostTensor::FromDoubles({1, 0, 3, 4, 5, 6}, {2, 3}, t);
    auto bytes = SerializeNpy(h);
    ASSERT_TRUE(bytes.ok()) << t.Name() << ": " << bytes.status();
    EXPECT_EQ(bytes->size() % 64, h.data.size() % 64) << "data must start 64-byte aligned";
    auto back = ParseNpy(*bytes);
    ASSERT_TRUE(back.ok()) << t.Name() << ": " << back.status();
    EXPECT_EQ(back->dtype, t);
    EXPECT_EQ(back->shape, (Shape{2, 3}));
    EXPECT_EQ(back->data, h.data) << t.Name();
  }
}

TEST(NpyTest, ScalarsAndOneDimensionalShapes) {
  for (Shape s : {Shape{}, Shape{5}, Shape{0}, Shape{1, 0, 2}}) {
    HostTensor h(dtypes::kInt32, s);
    auto back = ParseNpy(*SerializeNpy(h));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->shape, s);
  }
  std::string text = *SerializeNpy(HostTensor(dtypes::kFloat32, {5}));
  EXPECT_NE(text.find("'shape': (5,)"), std::string::npos);
}

TEST(NpyTest, ParsesHandWrittenFiles) {
  // Version 2 header, keys in another order, Python 2 long suffix.
  std::string f = Header("{'shape': (2L,), 'fortran_order': False, 'descr': '<i2'}", 2);
  f += std::string("\x01\x00\xff\xff", 4);
  auto t = ParseNpy(f);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype, dtypes::kInt16);
  EXPECT_EQ(t->Int64s(), (std::vector<int64_t>{1, -1}));
  // Big-endian data is byte-swapped.
  std::string be = Header("{'descr': '>i4', 'fortran_order': False, 'shape': (1,), }");
  be += std::string("\x00\x00\x01\x02", 4);
  auto b = ParseNpy(be);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->GetInt(0), 0x0102);
  // Booleans.
  std::string bo = Header("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }");
  bo += std::string("\x01\x00\x01", 3);
  EXPECT_EQ(ParseNpy(bo)->Int64s(), (std::vector<int64_t>{1, 0, 1}));
}

TEST(NpyTest, RejectsMalformedFiles) {
  auto msg = [](const std::string& bytes) { return std::string(ParseNpy(bytes).status().message()); };
  EXPECT_NE(msg("not a numpy file at all").find("magic"), std::string::npos);
  EXPECT_NE(msg(std::string("\x93NUMPY\x01\x00\xff\x00{", 11)).find("truncated"), std::string::npos);
  std::string ok_header = Header("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }");
  EXPECT_NE(msg(ok_header + "abc").find("needs 16"), std::string::npos);
  EXPECT_NE(msg(Header("{'descr': '<f4', 'fortran_order': True, 'shape': (4,), }"))
                .find("Fortran"),
            std::string::npos);
  EXPECT_NE(msg(Header("{'descr': '<U8', 'fortran_order': False, 'shape': (1,), }"))
                .find("not supported"),
            std::string::npos);
  EXPECT_NE(msg(Header("{'descr': '<f4', 'shape': (1,), }")).find("lacks"), std::string::npos);
  EXPECT_NE(msg(Header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }"))
                .find("shape entry"),
            std::string::npos);
  EXPECT_NE(msg(Header("['descr', '<f4']")).find("not a dict"), std::string::npos);
  EXPECT_FALSE(ParseNpy(std::string("\x93NUMPY\x07\x00", 8) + "xxxx").ok());
}

TEST(NpyTest, WritesAndReadsFiles) {
  std::string path = ::testing::TempDir() + "/npy_test.npy";
  HostTensor h = HostTensor::FromDoubles({1.5, -2.25}, {2}, dtypes::kFloat64);
  ASSERT_TRUE(WriteNpy(path, h).ok());
  auto back = ReadNpy(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->Doubles(), (std::vector<double>{1.5, -2.25}));
  std::remove(path.c_str());
  EXPECT_EQ(ReadNpy(path).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(SerializeNpy(HostTensor(dtypes::kBFloat16, {1})).ok());
}

}  // namespace
}  // namespace kiln
