#include "engine/onnx/host_tensor.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"

namespace kiln {
namespace {

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
void Store(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// double -> integer without undefined behaviour (NaN -> 0, saturating).
int64_t DoubleToInt(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return static_cast<int64_t>(v);
}

}  // namespace

absl::StatusOr<int64_t> CheckedNumel(const Shape& shape, int64_t limit, const std::string& what) {
  int64_t nonzero = 1;
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0)
      return absl::InvalidArgumentError(absl::StrCat(what, " of shape (", absl::StrJoin(shape, ","),
                                                     ") has a negative dimension"));
    if (d == 0) {
      empty = true;
      continue;
    }
    if (nonzero > limit / d)
      return absl::ResourceExhaustedError(
          absl::StrCat(what, " of shape (", absl::StrJoin(shape, ","), ") is too large (more than ",
                       limit, " elements)"));
    nonzero *= d;
  }
  return empty ? 0 : nonzero;
}

HostTensor::HostTensor(DType t, Shape s) : dtype(t), shape(std::move(s)) {
  data.assign(static_cast<size_t>(std::max<int64_t>(numel(), 0)) * dtype.ItemSize(), 0);
}

HostTensor HostTensor::FromBytes(DType t, Shape s, const void* bytes) {
  HostTensor h;
  h.dtype = t;
  h.shape = std::move(s);
  const auto* p = static_cast<const uint8_t*>(bytes);
  h.data.assign(p, p + static_cast<size_t>(std::max<int64_t>(h.numel(), 0)) * t.ItemSize());
  return h;
}

absl::StatusOr<HostTensor> HostTensor::Zeros(DType t, Shape s, int64_t limit,
                                             const std::string& what) {
  RETURN_IF_ERROR(CheckedNumel(s, limit, what).status());
  return HostTensor(t, std::move(s));
}

double HostTensor::GetDouble(int64_t i) const {
  const uint8_t* p = data.data() + i * dtype.ItemSize();
  switch (dtype.scalar) {
    case ScalarType::kBool: return p[0] != 0;
    case ScalarType::kInt8: return Load<int8_t>(p);
    case ScalarType::kInt16: return Load<int16_t>(p);
    case ScalarType::kInt32: return Load<int32_t>(p);
    case ScalarType::kInt64: return static_cast<double>(Load<int64_t>(p));
    case ScalarType::kUInt8: return Load<uint8_t>(p);
    case ScalarType::kUInt16: return Load<uint16_t>(p);
    case ScalarType::kUInt32: return Load<uint32_t>(p);
    case ScalarType::kUInt64: return static_cast<double>(Load<uint64_t>(p));
    case ScalarType::kFloat16: return HalfToFloat(Load<uint16_t>(p));
    case ScalarType::kBFloat16: return BFloat16ToFloat(Load<uint16_t>(p));
    case ScalarType::kFloat32: return Load<float>(p);
    case ScalarType::kFloat64: return Load<double>(p);
    default: return 0;
  }
}

int64_t HostTensor::GetInt(int64_t i) const {
  const uint8_t* p = data.data() + i * dtype.ItemSize();
  switch (dtype.scalar) {
    case ScalarType::kBool: return p[0] != 0;
    case ScalarType::kInt8: return Load<int8_t>(p);
    case ScalarType::kInt16: return Load<int16_t>(p);
    case ScalarType::kInt32: return Load<int32_t>(p);
    case ScalarType::kInt64: return Load<int64_t>(p);
    case ScalarType::kUInt8: return Load<uint8_t>(p);
    case ScalarType::kUInt16: return Load<uint16_t>(p);
    case ScalarType::kUInt32: return Load<uint32_t>(p);
    case ScalarType::kUInt64: return static_cast<int64_t>(Load<uint64_t>(p));
    default: return DoubleToInt(GetDouble(i));
  }
}

void HostTensor::SetDouble(int64_t i, double v) {
  uint8_t* p = data.data() + i * dtype.ItemSize();
  switch (dtype.scalar) {
    case ScalarType::kBool: p[0] = v != 0; return;
    case ScalarType::kFloat16: Store<uint16_t>(p, FloatToHalf(static_cast<float>(v))); return;
    case ScalarType::kBFloat16: Store<uint16_t>(p, FloatToBFloat16(static_cast<float>(v))); return;
    case ScalarType::kFloat32: Store<float>(p, static_cast<float>(v)); return;
    case ScalarType::kFloat64: Store<double>(p, v); return;
    case ScalarType::kUInt64:
      if (v >= 9.2233720368547758e18 && v < 1.8446744073709552e19) {
        Store<uint64_t>(p, static_cast<uint64_t>(v));
        return;
      }
      SetInt(i, DoubleToInt(v));
      return;
    default: SetInt(i, DoubleToInt(v)); return;
  }
}

void HostTensor::SetInt(int64_t i, int64_t v) {
  uint8_t* p = data.data() + i * dtype.ItemSize();
  switch (dtype.scalar) {
    case ScalarType::kBool: p[0] = v != 0; return;
    case ScalarType::kInt8: Store<int8_t>(p, static_cast<int8_t>(v)); return;
    case ScalarType::kInt16: Store<int16_t>(p, static_cast<int16_t>(v)); return;
    case ScalarType::kInt32: Store<int32_t>(p, static_cast<int32_t>(v)); return;
    case ScalarType::kInt64: Store<int64_t>(p, v); return;
    case ScalarType::kUInt8: Store<uint8_t>(p, static_cast<uint8_t>(v)); return;
    case ScalarType::kUInt16: Store<uint16_t>(p, static_cast<uint16_t>(v)); return;
    case ScalarType::kUInt32: Store<uint32_t>(p, static_cast<uint32_t>(v)); return;
    case ScalarType::kUInt64: Store<uint64_t>(p, static_cast<uint64_t>(v)); return;
    default: SetDouble(i, static_cast<double>(v)); return;
  }
}

std::vector<int64_t> HostTensor::Int64s() const {
  std::vector<int64_t> v(numel());
  for (int64_t i = 0; i < numel(); ++i) v[i] = GetInt(i);
  return v;
}

std::vector<double> HostTensor::Doubles() const {
  std::vector<double> v(numel());
  for (int64_t i = 0; i < numel(); ++i) v[i] = GetDouble(i);
  return v;
}

HostTensor HostTensor::FromInt64s(const std::vector<int64_t>& v, Shape shape, DType dtype) {
  HostTensor h(dtype, std::move(shape));
  for (size_t i = 0; i < v.size() && static_cast<int64_t>(i) < h.numel(); ++i) h.SetInt(i, v[i]);
  return h;
}

HostTensor HostTensor::FromDoubles(const std::vector<double>& v, Shape shape, DType dtype) {
  HostTensor h(dtype, std::move(shape));
  for (size_t i = 0; i < v.size() && static_cast<int64_t>(i) < h.numel(); ++i)
    h.SetDouble(i, v[i]);
  return h;
}

HostTensor HostTensor::Cast(DType t) const {
  if (t == dtype) return *this;
  HostTensor r(t, shape);
  bool exact_int = !dtype.IsFloat() && !t.IsFloat();
  for (int64_t i = 0; i < numel(); ++i) {
    if (exact_int) r.SetInt(i, GetInt(i));
    else r.SetDouble(i, GetDouble(i));
  }
  return r;
}

Tensor HostTensor::ToTensor(Engine* e, const std::string& device) const {
  if (numel() == 1) {
    ConstValue v;
    if (dtype.IsFloat()) v = GetDouble(0);
    else v = GetInt(0);
    return Tensor::Full(e, shape, v, dtype, device);
  }
  return Tensor::FromData(e, data.data(), data.size(), shape, dtype, device);
}

std::string HostTensor::DebugString() const {
  std::vector<std::string> vals;
  for (int64_t i = 0; i < std::min<int64_t>(numel(), 16); ++i)
    vals.push_back(dtype.IsFloat() ? absl::StrCat(GetDouble(i)) : absl::StrCat(GetInt(i)));
  if (numel() > 16) vals.push_back("...");
  return absl::StrCat(dtype.Name(), "(", absl::StrJoin(shape, ","), ")[",
                      absl::StrJoin(vals, ","), "]");
}

absl::StatusOr<HostTensor> ReadBack(Tensor t) {
  RETURN_IF_ERROR(t.status());
  HostTensor h;
  h.dtype = t.dtype();
  h.shape = t.shape();
  ASSIGN_OR_RETURN(h.data, t.ToBytes());
  return h;
}

}  // namespace kiln
