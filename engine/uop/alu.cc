// Scalar semantics of kiln's ALU ops, used for constant folding.
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/base/status.h"
#include "engine/uop/symbolic.h"

namespace kiln {
namespace {

int64_t Wrap(DType t, int64_t v) {
  switch (t.scalar) {
    case ScalarType::kBool: return v != 0;
    case ScalarType::kInt8: return static_cast<int8_t>(v);
    case ScalarType::kInt16: return static_cast<int16_t>(v);
    case ScalarType::kInt32: return static_cast<int32_t>(v);
    case ScalarType::kUInt8: return static_cast<uint8_t>(v);
    case ScalarType::kUInt16: return static_cast<uint16_t>(v);
    case ScalarType::kUInt32: return static_cast<uint32_t>(v);
    default: return v;  // int64, uint64 (bit pattern)
  }
}

double AsDouble(const ConstValue& v, DType t) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  int64_t i = std::get<int64_t>(v);
  if (t.scalar == ScalarType::kUInt64) return static_cast<double>(static_cast<uint64_t>(i));
  return static_cast<double>(i);
}

int64_t AsInt(const ConstValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  return static_cast<int64_t>(std::get<double>(v));
}

int64_t SaturatingFloatToInt(DType t, double d) {
  if (std::isnan(d)) return 0;
  d = std::trunc(d);
  double lo = DTypeMin(t), hi = DTypeMax(t);
  if (d <= lo) return static_cast<int64_t>(t.IsUnsigned() ? 0 : lo);
  if (d >= hi) {
    if (t.scalar == ScalarType::kUInt64) return static_cast<int64_t>(~uint64_t{0});
    if (t.scalar == ScalarType::kInt64) return std::numeric_limits<int64_t>::max();
    return static_cast<int64_t>(hi);
  }
  if (t.scalar == ScalarType::kUInt64) return static_cast<int64_t>(static_cast<uint64_t>(d));
  return static_cast<int64_t>(d);
}

}  // namespace

ConstValue Truncate(DType t, ConstValue v) {
  if (t.IsFloat()) {
    double d = AsDouble(v, dtypes::kFloat64);
    switch (t.scalar) {
      case ScalarType::kFloat32: return static_cast<double>(static_cast<float>(d));
      case ScalarType::kFloat16: return static_cast<double>(HalfToFloat(FloatToHalf(static_cast<float>(d))));
      case ScalarType::kBFloat16:
        return static_cast<double>(BFloat16ToFloat(FloatToBFloat16(static_cast<float>(d))));
      default: return d;
    }
  }
  if (const auto* d = std::get_if<double>(&v)) {
    if (t.IsBool()) return static_cast<int64_t>(*d != 0);
    return Wrap(t, SaturatingFloatToInt(t, *d));
  }
  return Wrap(t, std::get<int64_t>(v));
}

bool EvalAluDefined(Op op, DType dtype, DType src_dtype) {
  DType sd = src_dtype.IsVoid() ? dtype : src_dtype;
  if (op == Op::kCast || op == Op::kWhere) return true;
  DType t = IsComparison(op) ? sd : dtype;
  switch (op) {
    case Op::kNeg: case Op::kAdd: case Op::kSub: case Op::kMul: case Op::kMax:
    case Op::kCmpLt: case Op::kCmpNe: case Op::kCmpEq: case Op::kMulAcc:
      return true;
    case Op::kExp2: case Op::kLog2: case Op::kSin: case Op::kSqrt: case Op::kRecip:
    case Op::kTrunc: case Op::kFDiv: case Op::kPow:
      return t.IsFloat();
    case Op::kIDiv: case Op::kMod: case Op::kAnd: case Op::kOr: case Op::kXor:
    case Op::kShl: case Op::kShr:
      return !t.IsFloat();
    default:
      return false;
  }
}

ConstValue EvalAlu(Op op, DType dtype, const std::vector<ConstValue>& s, DType src_dtype) {
  DType sd = src_dtype.IsVoid() ? dtype : src_dtype;
  if (op == Op::kCast) {
    if (dtype.IsBool()) return static_cast<int64_t>(AsDouble(s[0], sd) != 0);
    if (dtype.IsFloat()) return Truncate(dtype, AsDouble(s[0], sd));
    if (sd.IsFloat()) return Wrap(dtype, SaturatingFloatToInt(dtype, AsDouble(s[0], sd)));
    return Wrap(dtype, AsInt(s[0]));
  }
  // Comparisons and logic evaluate in the source type.
  DType t = IsComparison(op) ? sd : dtype;
  if (op == Op::kWhere) return Truncate(dtype, AsInt(s[0]) ? s[1] : s[2]);
  if (t.IsFloat()) {
    double a = AsDouble(s[0], t), b = s.size() > 1 ? AsDouble(s[1], t) : 0;
    double r;
    switch (op) {
      case Op::kNeg: r = -a; break;
      case Op::kExp2: r = std::exp2(a); break;
      case Op::kLog2: r = std::log2(a); break;
      case Op::kSin: r = std::sin(a); break;
      case Op::kSqrt: r = std::sqrt(a); break;
      case Op::kRecip: r = 1.0 / a; break;
      case Op::kTrunc: r = std::trunc(a); break;
      case Op::kAdd: r = a + b; break;
      case Op::kSub: r = a - b; break;
      case Op::kMul: r = a * b; break;
      case Op::kFDiv: r = a / b; break;
      case Op::kMax: r = a > b ? a : b; break;
      case Op::kPow: r = std::pow(a, b); break;
      case Op::kCmpLt: return static_cast<int64_t>(a < b);
      case Op::kCmpNe: return static_cast<int64_t>(a != b);
      case Op::kCmpEq: return static_cast<int64_t>(a == b);
      case Op::kMulAcc: r = std::fma(a, b, AsDouble(s[2], t)); break;  // one rounding
      default: KILN_CHECK(false, "EvalAlu: ", OpName(op), " on ", t.Name());
    }
    return Truncate(dtype, r);
  }
  bool u = t.IsUnsigned();
  int64_t a = AsInt(s[0]), b = s.size() > 1 ? AsInt(s[1]) : 0;
  uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  int64_t r;
  switch (op) {
    case Op::kNeg: r = static_cast<int64_t>(0 - ua); break;
    case Op::kAdd: r = static_cast<int64_t>(ua + ub); break;
    case Op::kSub: r = static_cast<int64_t>(ua - ub); break;
    case Op::kMul: r = static_cast<int64_t>(ua * ub); break;
    case Op::kIDiv:
      if (b == 0) r = 0;
      else if (u) r = static_cast<int64_t>(ua / ub);
      else if (a == std::numeric_limits<int64_t>::min() && b == -1) r = a;
      else r = a / b;
      break;
    case Op::kMod:
      if (b == 0) r = 0;
      else if (u) r = static_cast<int64_t>(ua % ub);
      else if (b == -1) r = 0;
      else r = a % b;
      break;
    case Op::kMax: r = u ? static_cast<int64_t>(std::max(ua, ub)) : std::max(a, b); break;
    case Op::kCmpLt: return static_cast<int64_t>(u ? ua < ub : a < b);
    case Op::kCmpNe: return static_cast<int64_t>(a != b);
    case Op::kCmpEq: return static_cast<int64_t>(a == b);
    case Op::kAnd: r = a & b; break;
    case Op::kOr: r = a | b; break;
    case Op::kXor: r = a ^ b; break;
    case Op::kShl: r = static_cast<int64_t>(ua << (ub & 63)); break;
    case Op::kShr: r = u ? static_cast<int64_t>(ua >> (ub & 63)) : (a >> (ub & 63)); break;
    case Op::kMulAcc: r = static_cast<int64_t>(ua * ub + static_cast<uint64_t>(AsInt(s[2]))); break;
    default: KILN_CHECK(false, "EvalAlu: ", OpName(op), " on ", t.Name());
  }
  return Wrap(dtype, r);
}

}  // namespace kiln
