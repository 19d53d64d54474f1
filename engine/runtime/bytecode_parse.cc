// Parser and validator of the interpreter's textual bytecode.
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "engine/base/status.h"
#include "engine/runtime/bytecode.h"

namespace kiln::bytecode {
namespace {

struct OpName {
  const char* name;
  BcOp op;
};

constexpr OpName kOps[] = {
    {"DEFINE_GLOBAL", BcOp::kDefineGlobal}, {"DEFINE_VAR", BcOp::kDefineVar},
    {"CONST", BcOp::kConst},                {"RANGE", BcOp::kRange},
    {"ENDRANGE", BcOp::kEndRange},          {"DEFINE_ACC", BcOp::kDefineAcc},
    {"ASSIGN", BcOp::kAssign},              {"LOAD", BcOp::kLoad},
    {"STORE", BcOp::kStore},                {"VECTORIZE", BcOp::kVectorize},
    {"GEP", BcOp::kGep},                    {"CAST", BcOp::kCast},
    {"BITCAST", BcOp::kBitcast},            {"IF", BcOp::kIf},
    {"ENDIF", BcOp::kEndIf},                {"BARRIER", BcOp::kBarrier},
    {"NEG", BcOp::kNeg},                    {"EXP2", BcOp::kExp2},
    {"LOG2", BcOp::kLog2},                  {"SIN", BcOp::kSin},
    {"SQRT", BcOp::kSqrt},                  {"RECIP", BcOp::kRecip},
    {"TRUNC", BcOp::kTrunc},                {"ADD", BcOp::kAdd},
    {"SUB", BcOp::kSub},                    {"MUL", BcOp::kMul},
    {"FDIV", BcOp::kFDiv},                  {"IDIV", BcOp::kIDiv},
    {"MOD", BcOp::kMod},                    {"MAX", BcOp::kMax},
    {"CMPLT", BcOp::kCmpLt},                {"CMPNE", BcOp::kCmpNe},
    {"CMPEQ", BcOp::kCmpEq},                {"AND", BcOp::kAnd},
    {"OR", BcOp::kOr},                      {"XOR", BcOp::kXor},
    {"SHL", BcOp::kShl},                    {"SHR", BcOp::kShr},
    {"POW", BcOp::kPow},                    {"WHERE", BcOp::kWhere},
    {"MULACC", BcOp::kMulAcc},
};

// Largest BITCAST value, in bytes (values live in a stack buffer).
constexpr int kMaxBitcastBytes = 1024;

bool ParseOp(absl::string_view word, BcOp* op) {
  for (const OpName& o : kOps) {
    if (word == o.name) {
      *op = o.op;
      return true;
    }
  }
  return false;
}

// "float32", "float32x4", "float32*", "void".
bool ParseDType(absl::string_view word, DType* out) {
  bool ptr = false;
  if (!word.empty() && word.back() == '*') {
    ptr = true;
    word.remove_suffix(1);
  }
  int count = 1;
  size_t x = word.rfind('x');
  if (x != absl::string_view::npos && x + 1 < word.size()) {
    absl::string_view digits = word.substr(x + 1);
    bool all_digits = true;
    for (char c : digits) all_digits = all_digits && std::isdigit(static_cast<unsigned char>(c));
    if (all_digits) {
      if (!absl::SimpleAtoi(digits, &count) || count < 1 || count > 4096) return false;
      word = word.substr(0, x);
    }
  }
  if (ptr && count != 1) return false;
  DType base;
  if (word == "void") {
    base = dtypes::kVoid;
    if (count != 1) return false;
  } else {
    std::optional<DType> d = DTypeFromName(std::string(word));
    if (!d) return false;
    base = *d;
  }
  *out = DType(base.scalar, static_cast<uint16_t>(count), ptr);
  return true;
}

bool IsIdentifier(absl::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

class Parser {
 public:
  absl::StatusOr<Kernel> Run(const std::string& text);

 private:
  absl::Status Error(const std::string& msg) const {
    return absl::InvalidArgumentError(
        absl::StrCat("bytecode line ", line_no_, ": ", msg, "  [", line_, "]"));
  }
  absl::Status ParseLine(absl::string_view line);
  absl::Status Validate(Inst& in, absl::string_view arg);
  absl::Status ParseConst(Inst& in, absl::string_view arg);

  // Source checks.
  const Inst& Src(const Inst& in, size_t i) const { return kernel_.insts[in.src[i]]; }
  absl::Status NumSrcs(const Inst& in, size_t lo, size_t hi) const;
  absl::Status SrcIs(const Inst& in, size_t i, DType want, const char* what) const;
  absl::Status SrcScalarInt(const Inst& in, size_t i, const char* what) const;
  absl::Status SrcScalarBool(const Inst& in, size_t i, const char* what) const;
  // A LOAD / STORE gate: one bool, or one per lane.
  absl::Status GateOk(const Inst& in, size_t i, int lanes) const;
  std::string SrcName(const Inst& in, size_t i) const {
    return absl::StrCat("%", Src(in, i).id, " (", Src(in, i).dtype.Name(), ")");
  }

  Kernel kernel_;
  int line_no_ = 0;
  std::string line_;
  std::map<int64_t, int> ids_;       // %id -> instruction index
  std::vector<int> blocks_;          // open RANGE / IF instructions
  struct ForwardRef {
    int64_t id;
    int line_no;
    std::string line;
  };
  std::vector<ForwardRef> forward_ranges_;  // DEFINE_ACC ranges defined later
};

absl::Status Parser::NumSrcs(const Inst& in, size_t lo, size_t hi) const {
  if (in.src.size() < lo || in.src.size() > hi) {
    std::string want = lo == hi ? absl::StrCat(lo) : absl::StrCat(lo, " to ", hi);
    return Error(absl::StrCat("expected ", want, " sources, got ", in.src.size()));
  }
  return absl::OkStatus();
}

absl::Status Parser::SrcIs(const Inst& in, size_t i, DType want, const char* what) const {
  const DType got = Src(in, i).dtype;
  if (got == want) return absl::OkStatus();
  if (got.scalar == want.scalar && got.ptr == want.ptr) {
    return Error(absl::StrCat("lane count mismatch: ", what, " ", SrcName(in, i), " has ",
                              got.count, " lanes, expected ", want.count, " (", want.Name(),
                              "); vectorize operands explicitly"));
  }
  return Error(absl::StrCat(what, " ", SrcName(in, i), " should be ", want.Name()));
}

absl::Status Parser::SrcScalarInt(const Inst& in, size_t i, const char* what) const {
  const DType t = Src(in, i).dtype;
  if (t.IsInt() && t.count == 1 && !t.ptr) return absl::OkStatus();
  return Error(absl::StrCat(what, " ", SrcName(in, i), " should be a scalar integer"));
}

absl::Status Parser::SrcScalarBool(const Inst& in, size_t i, const char* what) const {
  const DType t = Src(in, i).dtype;
  if (t.IsBool() && t.count == 1 && !t.ptr) return absl::OkStatus();
  return Error(absl::StrCat(what, " ", SrcName(in, i), " should be a scalar bool"));
}

absl::Status Parser::GateOk(const Inst& in, size_t i, int lanes) const {
  const DType t = Src(in, i).dtype;
  if (t.IsBool() && !t.ptr && (t.count == 1 || t.count == lanes)) return absl::OkStatus();
  return Error(absl::StrCat("gate ", SrcName(in, i), " should be a bool or a bool[x", lanes,
                            "] (one gate per lane)"));
}

absl::StatusOr<Kernel> Parser::Run(const std::string& text) {
  bool have_kernel = false, ended = false;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_no_;
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    line_ = std::string(line);
    if (line.empty() || line[0] == '#') continue;
    if (ended) return Error("text after 'end'");
    if (!have_kernel) {
      std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
      if (words.size() != 2 || words[0] != "kernel" || !IsIdentifier(words[1])) {
        return Error("expected 'kernel <name>'");
      }
      kernel_.name = std::string(words[1]);
      have_kernel = true;
      continue;
    }
    if (line == "end") {
      ended = true;
      continue;
    }
    RETURN_IF_ERROR(ParseLine(line));
  }
  if (!have_kernel) return absl::InvalidArgumentError("bytecode: no 'kernel <name>' line");
  if (!ended) return absl::InvalidArgumentError("bytecode: missing 'end' line");
  for (const ForwardRef& ref : forward_ranges_) {
    auto it = ids_.find(ref.id);
    if (it == ids_.end() || kernel_.insts[it->second].op != BcOp::kRange) {
      line_no_ = ref.line_no;
      line_ = ref.line;
      return Error(absl::StrCat("accumulator range %", ref.id, " is not a RANGE"));
    }
  }
  if (!blocks_.empty()) {
    const Inst& open = kernel_.insts[blocks_.back()];
    return absl::InvalidArgumentError(absl::StrCat("bytecode line ", open.line, ": %", open.id,
                                                   " is never closed"));
  }
  return std::move(kernel_);
}

absl::Status Parser::ParseLine(absl::string_view line) {
  // %<id> = <OP> <dtype> (<srcs>) [arg]
  if (line[0] != '%') return Error("expected '%<id> = <OP> <dtype> (<srcs>) [arg]'");
  size_t eq = line.find('=');
  size_t open = line.find('(');
  size_t close = line.find(')');
  if (eq == absl::string_view::npos || open == absl::string_view::npos ||
      close == absl::string_view::npos || !(eq < open && open < close)) {
    return Error("expected '%<id> = <OP> <dtype> (<srcs>) [arg]'");
  }
  Inst in;
  in.line = line_no_;
  absl::string_view id_text = absl::StripAsciiWhitespace(line.substr(1, eq - 1));
  int64_t id = 0;
  if (!absl::SimpleAtoi(id_text, &id) || id < 0 || id > INT32_MAX ||
      !std::isdigit(static_cast<unsigned char>(id_text[0]))) {
    return Error(absl::StrCat("bad instruction id '%", id_text, "'"));
  }
  if (ids_.count(id) != 0) return Error(absl::StrCat("duplicate id %", id));
  in.id = static_cast<int>(id);
  std::vector<absl::string_view> words =
      absl::StrSplit(line.substr(eq + 1, open - eq - 1), ' ', absl::SkipWhitespace());
  if (words.size() != 2) return Error("expected '<OP> <dtype>' before '('");
  if (!ParseOp(words[0], &in.op)) return Error(absl::StrCat("unknown op '", words[0], "'"));
  if (!ParseDType(words[1], &in.dtype)) {
    return Error(absl::StrCat("unknown dtype '", words[1], "'"));
  }
  in.kind = KindOf(in.dtype);
  absl::string_view srcs = absl::StripAsciiWhitespace(line.substr(open + 1, close - open - 1));
  if (!srcs.empty()) {
    for (absl::string_view s : absl::StrSplit(srcs, ',')) {
      s = absl::StripAsciiWhitespace(s);
      int64_t sid = 0;
      if (s.size() < 2 || s[0] != '%' || !std::isdigit(static_cast<unsigned char>(s[1])) ||
          !absl::SimpleAtoi(s.substr(1), &sid)) {
        return Error(absl::StrCat("bad source '", s, "'"));
      }
      auto it = ids_.find(sid);
      if (it == ids_.end() && in.op == BcOp::kDefineAcc && !in.src.empty()) {
        // The ranges of an accumulator are informational and may follow it.
        forward_ranges_.push_back({sid, line_no_, line_});
        continue;
      }
      if (it == ids_.end()) return Error(absl::StrCat("undefined source %", sid));
      in.src.push_back(it->second);
      in.src_off.push_back(kernel_.insts[it->second].off);
    }
  }
  if (!in.src.empty()) {
    in.src_dtype = Src(in, 0).dtype;
    in.src_kind = Src(in, 0).kind;
  }
  absl::string_view arg = absl::StripAsciiWhitespace(line.substr(close + 1));
  RETURN_IF_ERROR(Validate(in, arg));
  in.lanes = (in.kind == Kind::kVoid) ? 0 : in.dtype.count;
  in.off = kernel_.num_registers;
  kernel_.num_registers += in.lanes;
  ids_[id] = static_cast<int>(kernel_.insts.size());
  kernel_.insts.push_back(std::move(in));
  return absl::OkStatus();
}

absl::Status Parser::ParseConst(Inst& in, absl::string_view arg) {
  const std::string text(arg);
  if (text.empty()) return Error("CONST needs a value");
  const ScalarType st = in.dtype.scalar;
  switch (in.kind) {
    case Kind::kBool:
      if (text == "1" || text == "true") {
        in.carg.i = 1;
      } else if (text == "0" || text == "false") {
        in.carg.i = 0;
      } else {
        return Error(absl::StrCat("bad bool constant '", text, "'"));
      }
      return absl::OkStatus();
    case Kind::kSigned:
    case Kind::kUnsigned: {
      // Accept the signed or the unsigned reading of the width, then wrap.
      const int bits = in.dtype.ScalarSize() * 8;
      char* end = nullptr;
      errno = 0;
      uint64_t bitsv;
      bool ok;
      if (text[0] == '-') {
        long long v = std::strtoll(text.c_str(), &end, 10);
        ok = errno == 0 && (bits == 64 || v >= -(1LL << (bits - 1)));
        bitsv = static_cast<uint64_t>(v);
      } else {
        unsigned long long v = std::strtoull(text.c_str(), &end, 10);
        ok = errno == 0 && (bits == 64 || v <= (~0ULL >> (64 - bits)));
        bitsv = v;
      }
      if (end == text.c_str() || *end != '\0' || !ok) {
        return Error(absl::StrCat("bad ", in.dtype.Name(), " constant '", text, "'"));
      }
      in.carg.i = WrapInt(bitsv, st);
      return absl::OkStatus();
    }
    case Kind::kFloat: {
      char* end = nullptr;
      double v = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0') {
        return Error(absl::StrCat("bad ", in.dtype.Name(), " constant '", text, "'"));
      }
      in.carg.f = RoundToFloat(v, st);
      return absl::OkStatus();
    }
    default:
      return Error("CONST needs a numeric or bool dtype");
  }
}

// Checks the sources and dtype of `in` and decodes its argument. Arguments
// are optional: an op that has no use for one ignores it.
absl::Status Parser::Validate(Inst& in, absl::string_view arg) {
  const DType t = in.dtype;
  const bool value_type = !t.ptr && !t.IsVoid();
  auto need = [&](bool cond, const std::string& msg) -> absl::Status {
    return cond ? absl::OkStatus() : Error(msg);
  };
  auto int_arg = [&](int64_t* v) -> absl::Status {
    if (!absl::SimpleAtoi(arg, v)) return Error(absl::StrCat("expected an integer argument"));
    return absl::OkStatus();
  };
  switch (in.op) {
    case BcOp::kDefineGlobal:
      RETURN_IF_ERROR(NumSrcs(in, 0, 0));
      RETURN_IF_ERROR(need(t.ptr, "DEFINE_GLOBAL needs a pointer dtype"));
      RETURN_IF_ERROR(int_arg(&in.iarg));
      RETURN_IF_ERROR(need(in.iarg >= 0 && in.iarg < (1 << 20), "bad buffer index"));
      kernel_.num_globals = std::max(kernel_.num_globals, in.iarg + 1);
      return absl::OkStatus();
    case BcOp::kDefineVar:
      RETURN_IF_ERROR(NumSrcs(in, 2, 2));
      RETURN_IF_ERROR(need(t.IsInt() && t.count == 1 && !t.ptr, "DEFINE_VAR needs an integer dtype"));
      RETURN_IF_ERROR(SrcIs(in, 0, t, "min"));
      RETURN_IF_ERROR(SrcIs(in, 1, t, "max"));
      in.name = std::string(arg);
      in.iarg = kernel_.num_vars++;
      return absl::OkStatus();
    case BcOp::kConst:
      RETURN_IF_ERROR(NumSrcs(in, 0, 0));
      return ParseConst(in, arg);
    case BcOp::kRange: {
      RETURN_IF_ERROR(NumSrcs(in, 2, 2));
      RETURN_IF_ERROR(need(t.IsInt() && t.count == 1 && !t.ptr, "RANGE needs an integer dtype"));
      RETURN_IF_ERROR(SrcIs(in, 0, t, "start"));
      RETURN_IF_ERROR(SrcIs(in, 1, t, "end"));
      for (absl::string_view w : absl::StrSplit(arg, ' ', absl::SkipWhitespace())) {
        int64_t unused;
        if (w == "parallel") {
          in.parallel = true;
        } else if (!absl::SimpleAtoi(w, &unused)) {
          return Error(absl::StrCat("bad RANGE argument '", w, "'"));
        }
      }
      blocks_.push_back(static_cast<int>(kernel_.insts.size()));
      return absl::OkStatus();
    }
    case BcOp::kEndRange:
    case BcOp::kEndIf: {
      const bool range = in.op == BcOp::kEndRange;
      RETURN_IF_ERROR(NumSrcs(in, 1, 1));
      RETURN_IF_ERROR(need(t.IsVoid(), "block ends have dtype void"));
      const BcOp opener = range ? BcOp::kRange : BcOp::kIf;
      RETURN_IF_ERROR(need(Src(in, 0).op == opener, range ? "ENDRANGE must close a RANGE"
                                                           : "ENDIF must close an IF"));
      RETURN_IF_ERROR(need(!blocks_.empty() && blocks_.back() == in.src[0],
                           absl::StrCat("%", Src(in, 0).id, " is not the innermost open block")));
      blocks_.pop_back();
      const int self = static_cast<int>(kernel_.insts.size());
      kernel_.insts[in.src[0]].jump = self;
      in.jump = in.src[0];
      return absl::OkStatus();
    }
    case BcOp::kIf:
      RETURN_IF_ERROR(NumSrcs(in, 1, 1));
      RETURN_IF_ERROR(need(t.IsVoid(), "IF has dtype void"));
      RETURN_IF_ERROR(SrcScalarBool(in, 0, "condition"));
      blocks_.push_back(static_cast<int>(kernel_.insts.size()));
      return absl::OkStatus();
    case BcOp::kBarrier:
      RETURN_IF_ERROR(NumSrcs(in, 0, 0));
      return absl::OkStatus();
    case BcOp::kDefineAcc:
      RETURN_IF_ERROR(need(value_type, "DEFINE_ACC needs a value dtype"));
      RETURN_IF_ERROR(NumSrcs(in, 1, 1000000));
      RETURN_IF_ERROR(SrcIs(in, 0, t, "initial value"));
      for (size_t i = 1; i < in.src.size(); ++i) {
        RETURN_IF_ERROR(need(Src(in, i).op == BcOp::kRange,
                             absl::StrCat("accumulator range ", SrcName(in, i), " is not a RANGE")));
      }
      return absl::OkStatus();
    case BcOp::kAssign:
      RETURN_IF_ERROR(NumSrcs(in, 2, 2));
      RETURN_IF_ERROR(need(Src(in, 0).op == BcOp::kDefineAcc, "ASSIGN target must be a DEFINE_ACC"));
      RETURN_IF_ERROR(SrcIs(in, 0, t, "accumulator"));
      RETURN_IF_ERROR(SrcIs(in, 1, t, "value"));
      return absl::OkStatus();
    case BcOp::kLoad:
    case BcOp::kStore: {
      const bool load = in.op == BcOp::kLoad;
      RETURN_IF_ERROR(load ? NumSrcs(in, 2, 4) : NumSrcs(in, 3, 4));
      RETURN_IF_ERROR(need(!load || in.src.size() != 3, "LOAD takes (buf, idx[, gate, alt])"));
      const DType buf = Src(in, 0).dtype;
      RETURN_IF_ERROR(need(buf.ptr, "the first source must be a buffer (pointer)"));
      RETURN_IF_ERROR(SrcScalarInt(in, 1, "index"));
      if (load) {
        RETURN_IF_ERROR(need(value_type && t.scalar == buf.scalar,
                             absl::StrCat("LOAD dtype must be ", buf.Scalar().Name(), "[xN]")));
        if (in.src.size() == 4) {
          RETURN_IF_ERROR(GateOk(in, 2, t.count));
          RETURN_IF_ERROR(SrcIs(in, 3, t, "alternative"));
        }
      } else {
        RETURN_IF_ERROR(need(t.IsVoid(), "STORE has dtype void"));
        const DType v = Src(in, 2).dtype;
        RETURN_IF_ERROR(need(!v.ptr && v.scalar == buf.scalar,
                             absl::StrCat("stored value ", SrcName(in, 2), " should be ",
                                          buf.Scalar().Name(), "[xN]")));
        if (in.src.size() == 4) RETURN_IF_ERROR(GateOk(in, 3, v.count));
      }
      return absl::OkStatus();
    }
    case BcOp::kVectorize:
      RETURN_IF_ERROR(need(value_type, "VECTORIZE needs a value dtype"));
      RETURN_IF_ERROR(NumSrcs(in, t.count, t.count));
      for (size_t i = 0; i < in.src.size(); ++i) RETURN_IF_ERROR(SrcIs(in, i, t.Scalar(), "lane"));
      return absl::OkStatus();
    case BcOp::kGep: {
      RETURN_IF_ERROR(NumSrcs(in, 1, 1));
      RETURN_IF_ERROR(need(value_type && t.count == 1, "GEP yields a scalar"));
      RETURN_IF_ERROR(need(Src(in, 0).dtype.scalar == t.scalar && !Src(in, 0).dtype.ptr,
                           absl::StrCat("GEP source ", SrcName(in, 0), " should be a ", t.Name(),
                                        " vector")));
      RETURN_IF_ERROR(int_arg(&in.iarg));
      return need(in.iarg >= 0 && in.iarg < Src(in, 0).dtype.count,
                  absl::StrCat("GEP lane ", in.iarg, " out of range"));
    }
    case BcOp::kCast:
    case BcOp::kBitcast: {
      RETURN_IF_ERROR(NumSrcs(in, 1, 1));
      const DType s = Src(in, 0).dtype;
      RETURN_IF_ERROR(need(value_type && !s.ptr && !s.IsVoid(), "casts need value dtypes"));
      if (in.op == BcOp::kCast) {
        return need(s.count == t.count, absl::StrCat("lane count mismatch: CAST of ",
                                                     SrcName(in, 0), " to ", t.Name()));
      }
      return need(s.ItemSize() == t.ItemSize() && t.ItemSize() <= kMaxBitcastBytes,
                  absl::StrCat("BITCAST of ", SrcName(in, 0), " to ", t.Name(),
                               " changes the size"));
    }
    case BcOp::kWhere:
      RETURN_IF_ERROR(NumSrcs(in, 3, 3));
      RETURN_IF_ERROR(need(value_type, "WHERE needs a value dtype"));
      RETURN_IF_ERROR(SrcIs(in, 0, DType(ScalarType::kBool, t.count), "condition"));
      RETURN_IF_ERROR(SrcIs(in, 1, t, "operand"));
      RETURN_IF_ERROR(SrcIs(in, 2, t, "operand"));
      return absl::OkStatus();
    default:
      break;
  }
  // ALU ops.
  const size_t n = IsUnary(in.op) ? 1 : IsBinary(in.op) ? 2 : 3;
  RETURN_IF_ERROR(NumSrcs(in, n, n));
  RETURN_IF_ERROR(need(value_type, "ALU ops need a value dtype"));
  DType operand = t;
  if (IsCompare(in.op)) {
    RETURN_IF_ERROR(need(t.IsBool(), "comparisons yield bool"));
    operand = Src(in, 0).dtype;
    RETURN_IF_ERROR(need(!operand.ptr && !operand.IsVoid(), "comparison of non-values"));
  }
  for (size_t i = 0; i < n; ++i) RETURN_IF_ERROR(SrcIs(in, i, operand, "operand"));
  const bool is_float = operand.IsFloat();
  switch (in.op) {
    case BcOp::kExp2:
    case BcOp::kLog2:
    case BcOp::kSin:
    case BcOp::kSqrt:
    case BcOp::kRecip:
    case BcOp::kFDiv:
    case BcOp::kPow:
      return need(is_float, "this op needs a float dtype");
    case BcOp::kAnd:
    case BcOp::kOr:
    case BcOp::kXor:
      return need(!is_float, "bitwise ops need integer or bool operands");
    case BcOp::kShl:
    case BcOp::kShr:
      return need(operand.IsInt(), "shifts need integer operands");
    default:
      return absl::OkStatus();
  }
}

}  // namespace

Kind KindOf(DType t) {
  if (t.ptr) return Kind::kPtr;
  if (t.IsVoid()) return Kind::kVoid;
  if (t.IsBool()) return Kind::kBool;
  if (t.IsFloat()) return Kind::kFloat;
  return t.IsUnsigned() ? Kind::kUnsigned : Kind::kSigned;
}

absl::StatusOr<Kernel> Parse(const std::string& text) { return Parser().Run(text); }

}  // namespace kiln::bytecode
