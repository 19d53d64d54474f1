#include "engine/base/npy.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"

namespace kiln {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

absl::Status Malformed(const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("malformed .npy: ", why));
}

// The header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
struct Header {
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
};

class HeaderParser {
 public:
  explicit HeaderParser(std::string_view s) : s_(s) {}

  absl::StatusOr<Header> Parse() {
    Header h;
    bool have_descr = false, have_order = false, have_shape = false;
    Skip();
    if (!Eat('{')) return Malformed("header is not a dict");
    while (true) {
      Skip();
      if (Eat('}')) break;
      ASSIGN_OR_RETURN(std::string key, Quoted());
      Skip();
      if (!Eat(':')) return Malformed("expected ':' in header");
      Skip();
      if (key == "descr") {
        ASSIGN_OR_RETURN(h.descr, Quoted());
        have_descr = true;
      } else if (key == "fortran_order") {
        if (Word("True")) h.fortran = true;
        else if (Word("False")) h.fortran = false;
        else return Malformed("fortran_order is not True / False");
        have_order = true;
      } else if (key == "shape") {
        ASSIGN_OR_RETURN(h.shape, Tuple());
        have_shape = true;
      } else {
        return Malformed(absl::StrCat("unknown header key '", key, "'"));
      }
      Skip();
      if (Eat(',')) continue;
      Skip();
      if (Eat('}')) break;
      return Malformed("expected ',' or '}' in header");
    }
    if (!have_descr || !have_order || !have_shape)
      return Malformed("header lacks descr, fortran_order or shape");
    return h;
  }

 private:
  void Skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool Eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  bool Word(std::string_view w) {
    if (s_.substr(i_, w.size()) == w) return i_ += w.size(), true;
    return false;
  }
  absl::StatusOr<std::string> Quoted() {
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) return Malformed("expected a string");
    char q = s_[i_++];
    size_t end = s_.find(q, i_);
    if (end == std::string_view::npos) return Malformed("unterminated string");
    std::string out(s_.substr(i_, end - i_));
    i_ = end + 1;
    return out;
  }
  absl::StatusOr<std::vector<int64_t>> Tuple() {
    std::vector<int64_t> shape;
    if (!Eat('(')) return Malformed("shape is not a tuple");
    while (true) {
      Skip();
      if (Eat(')')) break;
      size_t start = i_;
      int64_t v = 0;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
        if (v > (INT64_MAX - 9) / 10) return Malformed("dimension too large");
        v = v * 10 + (s_[i_++] - '0');
      }
      // Python 2 style long suffix.
      if (i_ < s_.size() && s_[i_] == 'L') ++i_;
      if (i_ == start) return Malformed("shape entry is not a non-negative integer");
      shape.push_back(v);
      Skip();
      if (Eat(',')) continue;
      Skip();
      if (Eat(')')) break;
      return Malformed("expected ',' or ')' in shape");
    }
    return shape;
  }

  std::string_view s_;
  size_t i_ = 0;
};

// descr (without byte order) <-> dtype.
std::optional<DType> DTypeOfDescr(std::string_view code) {
  static const std::pair<const char*, DType> kTable[] = {
      {"b1", dtypes::kBool},    {"i1", dtypes::kInt8},     {"i2", dtypes::kInt16},
      {"i4", dtypes::kInt32},   {"i8", dtypes::kInt64},    {"u1", dtypes::kUInt8},
      {"u2", dtypes::kUInt16},  {"u4", dtypes::kUInt32},   {"u8", dtypes::kUInt64},
      {"f2", dtypes::kFloat16}, {"f4", dtypes::kFloat32},  {"f8", dtypes::kFloat64},
  };
  for (const auto& [c, t] : kTable)
    if (code == c) return t;
  return std::nullopt;
}

std::optional<std::string> DescrOf(DType t) {
  switch (t.scalar) {
    case ScalarType::kBool: return "|b1";
    case ScalarType::kInt8: return "|i1";
    case ScalarType::kUInt8: return "|u1";
    case ScalarType::kInt16: return "<i2";
    case ScalarType::kInt32: return "<i4";
    case ScalarType::kInt64: return "<i8";
    case ScalarType::kUInt16: return "<u2";
    case ScalarType::kUInt32: return "<u4";
    case ScalarType::kUInt64: return "<u8";
    case ScalarType::kFloat16: return "<f2";
    case ScalarType::kFloat32: return "<f4";
    case ScalarType::kFloat64: return "<f8";
    default: return std::nullopt;
  }
}

uint32_t LittleEndian(const unsigned char* p, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

absl::StatusOr<NpyArray> ParseNpyArray(std::string_view bytes) {
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < kMagicLen + 4 || std::memcmp(bytes.data(), kMagic, kMagicLen) != 0)
    return Malformed("missing \\x93NUMPY magic");
  int major = u[6];
  size_t len_bytes = major == 1 ? 2 : (major == 2 || major == 3) ? 4 : 0;
  if (len_bytes == 0) return Malformed(absl::StrCat("unsupported format version ", major));
  if (bytes.size() < kMagicLen + 2 + len_bytes) return Malformed("truncated header");
  size_t header_len = LittleEndian(u + 8, static_cast<int>(len_bytes));
  size_t data_start = kMagicLen + 2 + len_bytes + header_len;
  if (data_start > bytes.size()) return Malformed("truncated header");
  ASSIGN_OR_RETURN(Header h,
                   HeaderParser(bytes.substr(kMagicLen + 2 + len_bytes, header_len)).Parse());
  if (h.fortran) return absl::UnimplementedError(".npy: Fortran-order arrays are not supported");
  if (h.descr.size() < 2) return Malformed(absl::StrCat("bad descr '", h.descr, "'"));
  char order = h.descr[0];
  std::optional<DType> dt;
  if (order == '<' || order == '>' || order == '|' || order == '=')
    dt = DTypeOfDescr(std::string_view(h.descr).substr(1));
  if (!dt)
    return absl::UnimplementedError(absl::StrCat(".npy: dtype '", h.descr, "' is not supported"));
  NpyArray t;
  t.dtype = *dt;
  t.shape = h.shape;
  int64_t n = 1;
  for (int64_t d : t.shape) {
    if (d != 0 && n > INT64_MAX / d / 8) return Malformed("shape too large");
    n *= d;
  }
  size_t nbytes = static_cast<size_t>(n) * dt->ItemSize();
  if (bytes.size() - data_start < nbytes)
    return Malformed(absl::StrCat("data has ", bytes.size() - data_start, " bytes, shape (",
                                  absl::StrJoin(t.shape, ","), ") of ", dt->Name(), " needs ",
                                  nbytes));
  t.data.assign(bytes.data() + data_start, nbytes);
  int item = dt->ItemSize();
  if (order == '>' && item > 1) {
    for (size_t i = 0; i < nbytes; i += item) std::reverse(&t.data[i], &t.data[i] + item);
  }
  if (dt->IsBool())
    for (char& b : t.data) b = b != 0;
  return t;
}

absl::StatusOr<NpyArray> ReadNpyArray(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
  std::ostringstream ss;
  ss << f.rdbuf();
  auto t = ParseNpyArray(ss.str());
  if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message()));
  return t;
}

absl::StatusOr<std::string> SerializeNpyArray(DType dtype, const std::vector<int64_t>& shape,
                                              std::string_view data) {
  std::optional<std::string> descr = DescrOf(dtype);
  if (!descr)
    return absl::InvalidArgumentError(
        absl::StrCat(".npy: dtype ", dtype.Name(), " has no NumPy equivalent"));
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (data.size() != static_cast<size_t>(n) * dtype.ItemSize())
    return absl::InvalidArgumentError(".npy: tensor data does not match its shape");
  std::string dims = absl::StrJoin(shape, ", ");
  if (shape.size() == 1) dims += ",";
  std::string dict = absl::StrCat("{'descr': '", *descr, "', 'fortran_order': False, 'shape': (",
                                  dims, "), }");
  // Pad with spaces so that the data starts at a multiple of 64, then '\n'.
  size_t prefix = kMagicLen + 2 + 2;
  int major = 1;
  if (prefix + dict.size() + 1 > 65535) major = 2, prefix = kMagicLen + 2 + 4;
  size_t total = prefix + dict.size() + 1;
  size_t pad = (64 - total % 64) % 64;
  dict.append(pad, ' ');
  dict.push_back('\n');
  std::string out(kMagic, kMagicLen);
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  uint32_t len = static_cast<uint32_t>(dict.size());
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) out.push_back(static_cast<char>(len >> (8 * i)));
  out += dict;
  out.append(data.data(), data.size());
  return out;
}

absl::Status WriteNpyArray(const std::string& path, DType dtype, const std::vector<int64_t>& shape,
                           std::string_view data) {
  ASSIGN_OR_RETURN(std::string bytes, SerializeNpyArray(dtype, shape, data));
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return absl::PermissionDeniedError(absl::StrCat("cannot write '", path, "'"));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return absl::DataLossError(absl::StrCat("error writing '", path, "'"));
  return absl::OkStatus();
}

}  // namespace kiln
