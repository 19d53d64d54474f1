#include "clients/npy.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kiln {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

struct Descr {
  const char* datatype;
  const char* descr;  // written form
};
constexpr Descr kDescrs[] = {
    {"BOOL", "|b1"}, {"INT8", "|i1"},   {"UINT8", "|u1"},  {"INT16", "<i2"},
    {"UINT16", "<u2"}, {"INT32", "<i4"}, {"UINT32", "<u4"}, {"INT64", "<i8"},
    {"UINT64", "<u8"}, {"FP16", "<f2"},  {"FP32", "<f4"},   {"FP64", "<f8"},
};

absl::Status Bad(const std::string& m) { return absl::InvalidArgumentError("npy: " + m); }

// Value of `key` in the header dict text ("'descr': '<f4', ...").
absl::StatusOr<std::string> DictValue(std::string_view header, const std::string& key) {
  std::string k = "'" + key + "'";
  size_t p = header.find(k);
  if (p == std::string_view::npos) return Bad("header has no " + k);
  p = header.find(':', p + k.size());
  if (p == std::string_view::npos) return Bad("malformed header");
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  if (p >= header.size()) return Bad("malformed header");
  size_t end;
  if (header[p] == '\'') {
    end = header.find('\'', p + 1);
    if (end == std::string_view::npos) return Bad("malformed header");
    return std::string(header.substr(p + 1, end - p - 1));
  }
  if (header[p] == '(') {
    end = header.find(')', p);
    if (end == std::string_view::npos) return Bad("malformed header");
    return std::string(header.substr(p, end - p + 1));
  }
  end = header.find_first_of(",}", p);
  if (end == std::string_view::npos) return Bad("malformed header");
  return std::string(absl::StripAsciiWhitespace(absl::string_view(header.data() + p, end - p)));
}

}  // namespace

absl::StatusOr<ClientTensor> ParseNpyTensor(std::string_view b) {
  if (b.size() < 10 || b.substr(0, 6) != std::string_view(kMagic, 6)) return Bad("not an .npy file");
  int major = static_cast<unsigned char>(b[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) return Bad("truncated header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(b[8 + i])) << (8 * i);
    offset = 12;
  } else {
    return Bad(absl::StrCat("unsupported format version ", major));
  }
  if (header_len > b.size() - offset) return Bad("truncated header");
  std::string_view header = b.substr(offset, header_len);
  auto descr = DictValue(header, "descr");
  if (!descr.ok()) return descr.status();
  auto fortran = DictValue(header, "fortran_order");
  if (!fortran.ok()) return fortran.status();
  if (*fortran != "False") return Bad("Fortran-order arrays are not supported");
  auto shape_text = DictValue(header, "shape");
  if (!shape_text.ok()) return shape_text.status();
  ClientTensor t;
  std::string d = *descr;
  if (d.size() == 3 && d[0] == '=') d[0] = '<';
  if (d.size() == 3 && (d[1] == 'b' || d.substr(1) == "i1" || d.substr(1) == "u1")) d[0] = '|';
  for (const Descr& x : kDescrs)
    if (d == x.descr) t.datatype = x.datatype;
  if (t.datatype.empty()) return Bad("unsupported dtype '" + *descr + "'");
  std::string inner(absl::StripSuffix(absl::StripPrefix(*shape_text, "("), ")"));
  int64_t numel = 1;
  for (absl::string_view part : absl::StrSplit(inner, ',', absl::SkipWhitespace())) {
    int64_t dim;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &dim) || dim < 0)
      return Bad("bad shape " + *shape_text);
    if (dim != 0 && numel > (int64_t{1} << 40) / dim) return Bad("shape too large");
    numel *= dim;
    t.shape.push_back(dim);
  }
  size_t nbytes = static_cast<size_t>(numel) * DatatypeSize(t.datatype);
  std::string_view data = b.substr(offset + header_len);
  if (data.size() < nbytes) return Bad("truncated data");
  t.data.assign(data.data(), nbytes);
  return t;
}

absl::StatusOr<ClientTensor> ReadNpyTensor(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError("cannot read " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  auto t = ParseNpyTensor(ss.str());
  if (!t.ok()) return absl::Status(t.status().code(), path + ": " + std::string(t.status().message()));
  return t;
}

absl::StatusOr<std::string> SerializeNpyTensor(const ClientTensor& t) {
  const char* descr = nullptr;
  for (const Descr& x : kDescrs)
    if (t.datatype == x.datatype) descr = x.descr;
  if (descr == nullptr) return Bad("datatype " + t.datatype + " has no NumPy type");
  std::string shape;
  if (t.shape.size() == 1) {
    shape = absl::StrCat("(", t.shape[0], ",)");
  } else {
    shape = "(";
    for (size_t i = 0; i < t.shape.size(); ++i)
      absl::StrAppend(&shape, i ? ", " : "", t.shape[i]);
    shape += ")";
  }
  std::string dict = absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ",
                                  shape, ", }");
  size_t total = 10 + dict.size() + 1;
  bool v2 = false;
  size_t pad = (64 - total % 64) % 64;
  if (dict.size() + pad + 1 > 65535) {
    v2 = true;
    total = 12 + dict.size() + 1;
    pad = (64 - total % 64) % 64;
  }
  std::string header = dict + std::string(pad, ' ') + "\n";
  std::string out(kMagic, 6);
  out.push_back(v2 ? 2 : 1);
  out.push_back(0);
  size_t len = header.size();
  for (int i = 0; i < (v2 ? 4 : 2); ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  out += header;
  out += t.data;
  return out;
}

absl::Status WriteNpyTensor(const std::string& path, const ClientTensor& t) {
  auto bytes = SerializeNpyTensor(t);
  if (!bytes.ok()) return bytes.status();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  if (!f) return absl::InternalError("cannot write " + path + ": " + std::strerror(errno));
  return absl::OkStatus();
}

}  // namespace kiln
