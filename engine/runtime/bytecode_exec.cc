// Executor of parsed bytecode: the reference semantics of every op.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/runtime/bytecode.h"

namespace kiln::bytecode {
namespace {

// Rounds `x` to float with round-to-odd: the result keeps enough information
// for one further correct round-to-nearest-even to a narrower format
// (float16 / bfloat16), avoiding double-rounding errors.
template <typename T>
float ToFloatRoundOdd(T x) {
  float f = static_cast<float>(x);
  if (std::isnan(f) || std::isinf(f) || static_cast<T>(f) == x) return f;
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if (bits & 1u) return f;
  return std::nextafter(f, x > static_cast<T>(f) ? std::numeric_limits<float>::infinity()
                                                 : -std::numeric_limits<float>::infinity());
}

template <typename T>
double RoundFrom(T x, ScalarType t) {
  switch (t) {
    case ScalarType::kFloat64: return static_cast<double>(x);
    case ScalarType::kFloat32: return static_cast<float>(x);
    case ScalarType::kFloat16: return HalfToFloat(FloatToHalf(ToFloatRoundOdd(x)));
    case ScalarType::kBFloat16: return BFloat16ToFloat(FloatToBFloat16(ToFloatRoundOdd(x)));
    default: return static_cast<double>(x);
  }
}

int Bits(ScalarType t) { return DType(t).ScalarSize() * 8; }

// Float -> integer: truncate toward zero, saturate, NaN -> 0.
int64_t FloatToInt(double v, ScalarType t) {
  if (t == ScalarType::kBool) return v != 0;
  if (std::isnan(v)) return 0;
  v = std::trunc(v);
  const double lo = DTypeMin(DType(t)), hi = DTypeMax(DType(t));
  if (t == ScalarType::kUInt64) {
    if (v <= 0) return 0;
    if (v >= 18446744073709551616.0) return static_cast<int64_t>(~uint64_t{0});
    return static_cast<int64_t>(static_cast<uint64_t>(v));
  }
  if (v <= lo) return static_cast<int64_t>(lo == -9223372036854775808.0 ? INT64_MIN : lo);
  if (v >= hi) {
    return t == ScalarType::kInt64 ? INT64_MAX : static_cast<int64_t>(hi);
  }
  return static_cast<int64_t>(v);
}

// Integer lane -> float type; uint64 lanes hold bit patterns.
double IntToFloat(int64_t v, ScalarType from, ScalarType to) {
  long double x = from == ScalarType::kUInt64 ? static_cast<long double>(static_cast<uint64_t>(v))
                                              : static_cast<long double>(v);
  return RoundFrom(x, to);
}

Lane ReadElem(ScalarType t, const unsigned char* p) {
  Lane r;
  switch (t) {
    case ScalarType::kBool: r.i = p[0] != 0; break;
    case ScalarType::kInt8: { int8_t v; std::memcpy(&v, p, 1); r.i = v; break; }
    case ScalarType::kInt16: { int16_t v; std::memcpy(&v, p, 2); r.i = v; break; }
    case ScalarType::kInt32: { int32_t v; std::memcpy(&v, p, 4); r.i = v; break; }
    case ScalarType::kInt64: { int64_t v; std::memcpy(&v, p, 8); r.i = v; break; }
    case ScalarType::kUInt8: r.i = p[0]; break;
    case ScalarType::kUInt16: { uint16_t v; std::memcpy(&v, p, 2); r.i = v; break; }
    case ScalarType::kUInt32: { uint32_t v; std::memcpy(&v, p, 4); r.i = v; break; }
    case ScalarType::kUInt64: { std::memcpy(&r.i, p, 8); break; }
    case ScalarType::kFloat16: { uint16_t v; std::memcpy(&v, p, 2); r.f = HalfToFloat(v); break; }
    case ScalarType::kBFloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      r.f = BFloat16ToFloat(v);
      break;
    }
    case ScalarType::kFloat32: { float v; std::memcpy(&v, p, 4); r.f = v; break; }
    case ScalarType::kFloat64: { std::memcpy(&r.f, p, 8); break; }
    default: r.i = 0; break;
  }
  return r;
}

void WriteElem(ScalarType t, unsigned char* p, Lane v) {
  switch (t) {
    case ScalarType::kBool: p[0] = v.i != 0; break;
    case ScalarType::kInt8:
    case ScalarType::kUInt8: p[0] = static_cast<unsigned char>(v.i); break;
    case ScalarType::kInt16:
    case ScalarType::kUInt16: { uint16_t x = static_cast<uint16_t>(v.i); std::memcpy(p, &x, 2); break; }
    case ScalarType::kInt32:
    case ScalarType::kUInt32: { uint32_t x = static_cast<uint32_t>(v.i); std::memcpy(p, &x, 4); break; }
    case ScalarType::kInt64:
    case ScalarType::kUInt64: std::memcpy(p, &v.i, 8); break;
    case ScalarType::kFloat16: {
      uint16_t x = FloatToHalf(static_cast<float>(v.f));
      std::memcpy(p, &x, 2);
      break;
    }
    case ScalarType::kBFloat16: {
      uint16_t x = FloatToBFloat16(static_cast<float>(v.f));
      std::memcpy(p, &x, 2);
      break;
    }
    case ScalarType::kFloat32: { float x = static_cast<float>(v.f); std::memcpy(p, &x, 4); break; }
    case ScalarType::kFloat64: std::memcpy(p, &v.f, 8); break;
    default: break;
  }
}

Lane Cast(Lane v, Kind from_kind, ScalarType from, Kind to_kind, ScalarType to) {
  Lane r;
  if (from_kind == Kind::kFloat) {
    if (to_kind == Kind::kFloat) {
      r.f = RoundToFloat(v.f, to);
    } else {
      r.i = FloatToInt(v.f, to);
    }
  } else if (to_kind == Kind::kFloat) {
    r.f = IntToFloat(v.i, from, to);
  } else {
    r.i = WrapInt(static_cast<uint64_t>(v.i), to);
  }
  return r;
}

Lane Unary(BcOp op, Kind k, ScalarType t, Lane a) {
  Lane r;
  if (k == Kind::kFloat) {
    double x = a.f, y;
    switch (op) {
      case BcOp::kNeg: y = -x; break;
      case BcOp::kExp2: y = std::exp2(x); break;
      case BcOp::kLog2: y = std::log2(x); break;
      case BcOp::kSin: y = std::sin(x); break;
      case BcOp::kSqrt: y = std::sqrt(x); break;
      case BcOp::kRecip: y = 1.0 / x; break;
      case BcOp::kTrunc: y = std::trunc(x); break;
      default: y = x; break;
    }
    r.f = RoundToFloat(y, t);
    return r;
  }
  switch (op) {
    case BcOp::kNeg:
      r.i = k == Kind::kBool ? !a.i : WrapInt(0 - static_cast<uint64_t>(a.i), t);
      break;
    default: r.i = a.i; break;  // TRUNC of an integer (others are float-only)
  }
  return r;
}

bool Less(Kind k, Lane a, Lane b) {
  if (k == Kind::kFloat) return a.f < b.f;
  if (k == Kind::kUnsigned) return static_cast<uint64_t>(a.i) < static_cast<uint64_t>(b.i);
  return a.i < b.i;
}

// Binary op on operands of kind `k` / type `t`; comparisons return bool.
Lane Binary(BcOp op, Kind k, ScalarType t, Lane a, Lane b) {
  Lane r;
  switch (op) {
    case BcOp::kCmpLt: r.i = Less(k, a, b); return r;
    case BcOp::kCmpNe: r.i = k == Kind::kFloat ? a.f != b.f : a.i != b.i; return r;
    case BcOp::kCmpEq: r.i = k == Kind::kFloat ? a.f == b.f : a.i == b.i; return r;
    case BcOp::kMax: return Less(k, b, a) ? a : b;  // C: a > b ? a : b
    default: break;
  }
  if (k == Kind::kFloat) {
    double x = a.f, y = b.f, z;
    switch (op) {
      case BcOp::kAdd: z = x + y; break;
      case BcOp::kSub: z = x - y; break;
      case BcOp::kMul: z = x * y; break;
      case BcOp::kFDiv: z = x / y; break;
      case BcOp::kIDiv: z = std::trunc(x / y); break;
      case BcOp::kMod: z = std::fmod(x, y); break;
      case BcOp::kPow: z = std::pow(x, y); break;
      default: z = 0; break;
    }
    r.f = RoundToFloat(z, t);
    return r;
  }
  const uint64_t ua = static_cast<uint64_t>(a.i), ub = static_cast<uint64_t>(b.i);
  const bool is_unsigned = k == Kind::kUnsigned;
  uint64_t z;
  switch (op) {
    case BcOp::kAdd: z = ua + ub; break;
    case BcOp::kSub: z = ua - ub; break;
    case BcOp::kMul: z = ua * ub; break;
    case BcOp::kIDiv:
      if (ub == 0) {
        z = 0;
      } else if (is_unsigned) {
        z = ua / ub;
      } else if (a.i == INT64_MIN && b.i == -1) {
        z = ua;  // wraps
      } else {
        z = static_cast<uint64_t>(a.i / b.i);
      }
      break;
    case BcOp::kMod:
      if (ub == 0 || (!is_unsigned && b.i == -1)) {
        z = 0;
      } else if (is_unsigned) {
        z = ua % ub;
      } else {
        z = static_cast<uint64_t>(a.i % b.i);
      }
      break;
    case BcOp::kAnd: z = ua & ub; break;
    case BcOp::kOr: z = ua | ub; break;
    case BcOp::kXor: z = ua ^ ub; break;
    case BcOp::kShl: {
      const int bits = Bits(t);
      z = (b.i < 0 || b.i >= bits) ? 0 : ua << b.i;
      break;
    }
    case BcOp::kShr: {
      const int bits = Bits(t);
      if (b.i < 0 || b.i >= bits) {
        z = (!is_unsigned && a.i < 0) ? ~uint64_t{0} : 0;
      } else {
        z = is_unsigned ? ua >> b.i : static_cast<uint64_t>(a.i >> b.i);
      }
      break;
    }
    default: z = 0; break;
  }
  r.i = WrapInt(z, t);
  return r;
}

Lane MulAcc(Kind k, ScalarType t, Lane a, Lane b, Lane c) {
  Lane r;
  if (k == Kind::kFloat) {
    // One rounding, as the renderers' fma(): MULACC is a fused multiply-add
    // (the lowerer contracts a * b + c into it, engine/codegen/float_rules.h).
    r.f = RoundToFloat(std::fma(a.f, b.f, c.f), t);
  } else {
    r.i = WrapInt(static_cast<uint64_t>(a.i) * static_cast<uint64_t>(b.i) +
                      static_cast<uint64_t>(c.i),
                  t);
  }
  return r;
}

template <bool kChecked>
class Executor {
 public:
  Executor(const Kernel& k, const std::vector<void*>& bufs, const std::vector<size_t>* nbytes,
           const std::vector<int64_t>& vars)
      : k_(k), bufs_(bufs), nbytes_(nbytes), vars_(vars),
        regs_(static_cast<size_t>(k.num_registers)), range_end_(k.insts.size(), 0) {}

  absl::Status Run(int64_t lo, int64_t hi);

 private:
  // Byte address of element `idx` of the buffer, after bounds checks.
  absl::Status Address(const Inst& in, int64_t buf, int64_t idx, int lanes, ScalarType st,
                       unsigned char** out) const {
    const int64_t esize = DType(st).ScalarSize();
    if (kChecked) {
      const size_t nbytes = (*nbytes_)[static_cast<size_t>(buf)];
      const int64_t count = static_cast<int64_t>(nbytes) / esize;
      if (idx < 0 || idx > count - lanes) {
        return absl::OutOfRangeError(absl::StrCat(
            in.op == BcOp::kLoad ? "LOAD" : "STORE", " %", in.id, " (bytecode line ", in.line,
            ") of kernel ", k_.name, ": index ", idx, lanes > 1 ? absl::StrCat("..", idx + lanes - 1) : "",
            " out of bounds of buffer ", buf, " (", count, " ", DType(st).Name(),
            " elements, ", nbytes, " bytes)"));
      }
    }
    *out = static_cast<unsigned char*>(bufs_[static_cast<size_t>(buf)]) + idx * esize;
    return absl::OkStatus();
  }

  const Kernel& k_;
  const std::vector<void*>& bufs_;
  const std::vector<size_t>* nbytes_;
  const std::vector<int64_t>& vars_;
  std::vector<Lane> regs_;
  std::vector<int64_t> range_end_;
};

template <bool kChecked>
absl::Status Executor<kChecked>::Run(int64_t lo, int64_t hi) {
  const std::vector<Inst>& insts = k_.insts;
  Lane* regs = regs_.data();
  const size_t n = insts.size();
  size_t pc = 0;
  while (pc < n) {
    const Inst& in = insts[pc];
    Lane* out = regs + in.off;
    const int* so = in.src_off.data();
    switch (in.op) {
      case BcOp::kDefineGlobal: out->i = in.iarg; break;
      case BcOp::kConst:
        for (int l = 0; l < in.lanes; ++l) out[l] = in.carg;
        break;
      case BcOp::kDefineVar: {
        const int64_t v = vars_[static_cast<size_t>(in.iarg)];
        const Lane lo_v = regs[so[0]], hi_v = regs[so[1]], val{v};
        if (val.i != WrapInt(static_cast<uint64_t>(v), in.dtype.scalar) ||
            Less(in.kind, val, lo_v) || Less(in.kind, hi_v, val)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "kernel ", k_.name, ": variable '", in.name, "' (vars[", in.iarg, "]) = ", v,
              " is outside its range [", lo_v.i, ", ", hi_v.i, "]"));
        }
        out->i = v;
        break;
      }
      case BcOp::kRange: {
        int64_t start = regs[so[0]].i, end = regs[so[1]].i;
        if (in.parallel) {
          start = std::max(start, lo);
          end = std::min(end, hi);
        }
        if (start >= end) {
          pc = static_cast<size_t>(in.jump) + 1;
          continue;
        }
        out->i = start;
        range_end_[pc] = end;
        break;
      }
      case BcOp::kEndRange: {
        const Inst& range = insts[static_cast<size_t>(in.jump)];
        Lane& var = regs[range.off];
        var.i = WrapInt(static_cast<uint64_t>(var.i) + 1, range.dtype.scalar);
        if (var.i < range_end_[static_cast<size_t>(in.jump)]) {
          pc = static_cast<size_t>(in.jump) + 1;
          continue;
        }
        break;
      }
      case BcOp::kIf:
        if (regs[so[0]].i == 0) {
          pc = static_cast<size_t>(in.jump) + 1;
          continue;
        }
        break;
      case BcOp::kEndIf:
      case BcOp::kBarrier:
        break;
      case BcOp::kDefineAcc:
        std::copy(regs + so[0], regs + so[0] + in.lanes, out);
        break;
      case BcOp::kAssign:
        std::copy(regs + so[1], regs + so[1] + in.lanes, out);
        std::copy(regs + so[1], regs + so[1] + in.lanes, regs + so[0]);
        break;
      case BcOp::kLoad: {
        const ScalarType st = in.dtype.scalar;
        if (in.src.size() == 4 && insts[static_cast<size_t>(in.src[2])].lanes > 1) {
          // One gate per lane: only the lanes whose gate is set are read.
          for (int l = 0; l < in.lanes; ++l) {
            if (regs[so[2] + l].i == 0) {
              out[l] = regs[so[3] + l];
              continue;
            }
            unsigned char* p;
            absl::Status s = Address(in, regs[so[0]].i, regs[so[1]].i + l, 1, st, &p);
            if (kChecked && !s.ok()) return s;
            out[l] = ReadElem(st, p);
          }
          break;
        }
        if (in.src.size() == 4 && regs[so[2]].i == 0) {
          std::copy(regs + so[3], regs + so[3] + in.lanes, out);
          break;
        }
        unsigned char* p;
        absl::Status s = Address(in, regs[so[0]].i, regs[so[1]].i, in.lanes, st, &p);
        if (kChecked && !s.ok()) return s;
        const int esize = DType(st).ScalarSize();
        for (int l = 0; l < in.lanes; ++l) out[l] = ReadElem(st, p + l * esize);
        break;
      }
      case BcOp::kStore: {
        const Inst& value = insts[static_cast<size_t>(in.src[2])];
        const ScalarType st = value.dtype.scalar;
        if (in.src.size() == 4 && insts[static_cast<size_t>(in.src[3])].lanes > 1) {
          for (int l = 0; l < value.lanes; ++l) {  // one gate per lane
            if (regs[so[3] + l].i == 0) continue;
            unsigned char* p;
            absl::Status s = Address(in, regs[so[0]].i, regs[so[1]].i + l, 1, st, &p);
            if (kChecked && !s.ok()) return s;
            WriteElem(st, p, regs[so[2] + l]);
          }
          break;
        }
        if (in.src.size() == 4 && regs[so[3]].i == 0) break;
        unsigned char* p;
        absl::Status s = Address(in, regs[so[0]].i, regs[so[1]].i, value.lanes, st, &p);
        if (kChecked && !s.ok()) return s;
        const int esize = DType(st).ScalarSize();
        for (int l = 0; l < value.lanes; ++l) WriteElem(st, p + l * esize, regs[so[2] + l]);
        break;
      }
      case BcOp::kVectorize:
        for (int l = 0; l < in.lanes; ++l) out[l] = regs[so[l]];
        break;
      case BcOp::kGep: out[0] = regs[so[0] + in.iarg]; break;
      case BcOp::kCast:
        for (int l = 0; l < in.lanes; ++l) {
          out[l] = Cast(regs[so[0] + l], in.src_kind, in.src_dtype.scalar, in.kind,
                        in.dtype.scalar);
        }
        break;
      case BcOp::kBitcast: {
        unsigned char bytes[1024];
        const ScalarType from = in.src_dtype.scalar, to = in.dtype.scalar;
        const int fsize = DType(from).ScalarSize(), tsize = DType(to).ScalarSize();
        for (int l = 0; l < in.src_dtype.count; ++l) WriteElem(from, bytes + l * fsize, regs[so[0] + l]);
        for (int l = 0; l < in.lanes; ++l) out[l] = ReadElem(to, bytes + l * tsize);
        break;
      }
      case BcOp::kWhere:
        for (int l = 0; l < in.lanes; ++l) {
          out[l] = regs[so[0] + l].i != 0 ? regs[so[1] + l] : regs[so[2] + l];
        }
        break;
      case BcOp::kMulAcc:
        for (int l = 0; l < in.lanes; ++l) {
          out[l] = MulAcc(in.kind, in.dtype.scalar, regs[so[0] + l], regs[so[1] + l],
                          regs[so[2] + l]);
        }
        break;
      default:
        if (IsUnary(in.op)) {
          for (int l = 0; l < in.lanes; ++l) {
            out[l] = Unary(in.op, in.kind, in.dtype.scalar, regs[so[0] + l]);
          }
        } else {
          for (int l = 0; l < in.lanes; ++l) {
            out[l] = Binary(in.op, in.src_kind, in.src_dtype.scalar, regs[so[0] + l],
                            regs[so[1] + l]);
          }
        }
        break;
    }
    ++pc;
  }
  return absl::OkStatus();
}

}  // namespace

double RoundToFloat(double v, ScalarType t) { return RoundFrom(v, t); }

int64_t WrapInt(uint64_t v, ScalarType t) {
  switch (t) {
    case ScalarType::kBool: return v != 0;
    case ScalarType::kInt8: return static_cast<int8_t>(v);
    case ScalarType::kInt16: return static_cast<int16_t>(v);
    case ScalarType::kInt32: return static_cast<int32_t>(v);
    case ScalarType::kUInt8: return static_cast<uint8_t>(v);
    case ScalarType::kUInt16: return static_cast<uint16_t>(v);
    case ScalarType::kUInt32: return static_cast<uint32_t>(v);
    default: return static_cast<int64_t>(v);  // 64-bit
  }
}

absl::Status Execute(const Kernel& kernel, const std::vector<void*>& bufs,
                     const std::vector<size_t>* nbytes, const std::vector<int64_t>& vars,
                     int64_t begin, int64_t end) {
  if (static_cast<int64_t>(bufs.size()) < kernel.num_globals) {
    return absl::InvalidArgumentError(absl::StrCat("kernel ", kernel.name, " needs ",
                                                   kernel.num_globals, " buffers, got ",
                                                   bufs.size()));
  }
  if (static_cast<int>(vars.size()) < kernel.num_vars) {
    return absl::InvalidArgumentError(absl::StrCat("kernel ", kernel.name, " needs ",
                                                   kernel.num_vars, " variable values, got ",
                                                   vars.size()));
  }
  if (nbytes != nullptr) {
    if (nbytes->size() < bufs.size()) {
      return absl::InvalidArgumentError(absl::StrCat("kernel ", kernel.name, ": ", bufs.size(),
                                                     " buffers but ", nbytes->size(), " sizes"));
    }
    return Executor<true>(kernel, bufs, nbytes, vars).Run(begin, end);
  }
  return Executor<false>(kernel, bufs, nullptr, vars).Run(begin, end);
}

}  // namespace kiln::bytecode
