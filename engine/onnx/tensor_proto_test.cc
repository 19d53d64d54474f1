#include "engine/onnx/tensor_proto.h"

#include <cstdio>
#include <fstream>

#include "engine/onnx/onnx/onnx.pb.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using onnx::TensorProto;

TensorProto Make(int type, Shape dims) {
  TensorProto p;
  p.set_name("t");
  p.set_data_type(type);
  for (int64_t d : dims) p.add_dims(d);
  return p;
}

TEST(TensorProtoTest, TypedFields) {
  TensorProto f = Make(TensorProto::FLOAT, {2});
  f.add_float_data(1.5f);
  f.add_float_data(-2);
  EXPECT_EQ(HostTensorFromProto(f)->Doubles(), (std::vector<double>{1.5, -2}));

  TensorProto d = Make(TensorProto::DOUBLE, {1});
  d.add_double_data(0.25);
  EXPECT_EQ(HostTensorFromProto(d)->dtype, dtypes::kFloat64);

  TensorProto i64 = Make(TensorProto::INT64, {2});
  i64.add_int64_data(-5);
  i64.add_int64_data(int64_t{1} << 40);
  EXPECT_EQ(HostTensorFromProto(i64)->Int64s(), (std::vector<int64_t>{-5, int64_t{1} << 40}));

  TensorProto u64 = Make(TensorProto::UINT64, {1});
  u64.add_uint64_data(~uint64_t{0});
  auto u = HostTensorFromProto(u64);
  EXPECT_EQ(u->dtype, dtypes::kUInt64);
  EXPECT_EQ(static_cast<uint64_t>(u->GetInt(0)), ~uint64_t{0});

  TensorProto u32 = Make(TensorProto::UINT32, {1});
  u32.add_uint64_data(4000000000u);
  EXPECT_EQ(HostTensorFromProto(u32)->GetDouble(0), 4000000000.0);

  // int32_data carries int8 / int16 / uint8 / uint16 / bool values.
  for (int type : {TensorProto::INT8, TensorProto::INT16, TensorProto::INT32, TensorProto::UINT8,
                   TensorProto::UINT16}) {
    TensorProto p = Make(type, {2});
    p.add_int32_data(7);
    p.add_int32_data(100);
    auto h = HostTensorFromProto(p);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ(h->Int64s(), (std::vector<int64_t>{7, 100})) << OnnxTypeName(type);
  }
  TensorProto b = Make(TensorProto::BOOL, {3});
  for (int v : {1, 0, 1}) b.add_int32_data(v);
  EXPECT_EQ(HostTensorFromProto(b)->Int64s(), (std::vector<int64_t>{1, 0, 1}));

  // float16 / bfloat16 bit patterns in int32_data.
  TensorProto h16 = Make(TensorProto::FLOAT16, {1});
  h16.add_int32_data(FloatToHalf(1.5f));
  EXPECT_EQ(HostTensorFromProto(h16)->GetDouble(0), 1.5);
  TensorProto bf = Make(TensorProto::BFLOAT16, {1});
  bf.add_int32_data(FloatToBFloat16(-3.0f));
  EXPECT_EQ(HostTensorFromProto(bf)->GetDouble(0), -3.0);
}

TEST(TensorProtoTest, RawDataAndRoundTrip) {
  HostTensor h = HostTensor::FromInt64s({1, -2, 3, -4, 5, -6}, {2, 3}, dtypes::kInt16);
  TensorProto p;
  HostTensorToProto(h, "x", &p);
  EXPECT_TRUE(p.has_raw_data());
  auto back = HostTensorFromProto(p);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->shape, h.shape);
  EXPECT_EQ(back->data, h.data);
  // A scalar and an empty tensor.
  TensorProto s = Make(TensorProto::FLOAT, {});
  s.add_float_data(3);
  EXPECT_EQ(HostTensorFromProto(s)->numel(), 1);
  EXPECT_EQ(HostTensorFromProto(Make(TensorProto::FLOAT, {0, 3}))->numel(), 0);
}

TEST(TensorProtoTest, ExternalData) {
  std::string dir = ::testing::TempDir();
  {
    std::ofstream f(dir + "/weights.bin", std::ios::binary);
    float v[4] = {9, 1, 2, 3};
    f.write(reinterpret_cast<const char*>(v), sizeof(v));
  }
  TensorProto p = Make(TensorProto::FLOAT, {3});
  p.set_data_location(TensorProto::EXTERNAL);
  auto add = [&](const std::string& k, const std::string& v) {
    auto* e = p.add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", "weights.bin");
  add("offset", "4");
  add("length", "12");
  auto h = HostTensorFromProto(p, dir);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->Doubles(), (std::vector<double>{1, 2, 3}));
  // Without a length: the rest of the file must fit exactly.
  p.mutable_external_data()->RemoveLast();
  EXPECT_TRUE(HostTensorFromProto(p, dir).ok());
  p.mutable_external_data(1)->set_value("8");
  EXPECT_NE(HostTensorFromProto(p, dir).status().message().find("external data has 8 bytes"),
            std::string::npos);
  p.mutable_external_data(0)->set_value("../etc/passwd");
  EXPECT_NE(HostTensorFromProto(p, dir).status().message().find("leaves the model directory"),
            std::string::npos);
  p.mutable_external_data(0)->set_value("missing.bin");
  EXPECT_EQ(HostTensorFromProto(p, dir).status().code(), absl::StatusCode::kNotFound);
  std::remove((dir + "/weights.bin").c_str());
}

TEST(TensorProtoTest, Errors) {
  TensorProto short_raw = Make(TensorProto::FLOAT, {4});
  short_raw.set_raw_data(std::string(12, '\0'));
  EXPECT_NE(HostTensorFromProto(short_raw).status().message().find("raw_data has 12 bytes"),
            std::string::npos);
  TensorProto few = Make(TensorProto::INT64, {3});
  few.add_int64_data(1);
  EXPECT_NE(HostTensorFromProto(few).status().message().find("int64_data has 1 values"),
            std::string::npos);
  EXPECT_EQ(HostTensorFromProto(Make(TensorProto::STRING, {1})).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(HostTensorFromProto(Make(TensorProto::COMPLEX64, {1})).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_FALSE(HostTensorFromProto(Make(TensorProto::FLOAT, {-1})).ok());
  EXPECT_EQ(ReadTensorProtoFile("/nonexistent/x.pb").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(TensorProtoTest, TypeMapping) {
  int n;
  const DType* all = AllDTypes(&n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(DTypeFromOnnx(OnnxTypeOf(all[i])), all[i]);
  EXPECT_FALSE(DTypeFromOnnx(TensorProto::STRING).has_value());
  EXPECT_EQ(OnnxTypeName(TensorProto::BFLOAT16), "BFLOAT16");
  EXPECT_EQ(OnnxTypeName(99), "type 99");
}

}  // namespace
}  // namespace kiln
