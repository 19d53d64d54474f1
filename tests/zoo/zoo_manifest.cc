#include "tests/zoo/zoo_manifest.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kiln {
namespace {

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> Pairs(const std::string& field,
                                                                       int line) {
  std::vector<std::pair<std::string, std::string>> out;
  for (absl::string_view item : absl::StrSplit(field, ',', absl::SkipEmpty())) {
    std::vector<std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.size() != 2 || kv[0].empty() || kv[1].empty())
      return absl::InvalidArgumentError(
          absl::StrCat("manifest line ", line, ": bad item '", item, "' (want name=path)"));
    out.emplace_back(kv[0], kv[1]);
  }
  return out;
}

}  // namespace

std::string ZooCase::Id() const { return absl::StrCat(name, "_op", opset, "_b", batch); }

std::string ZooDir(const std::string& set) {
  if (const char* d = std::getenv("KILN_DATA")) return std::string(d) + "/" + set;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.cache/kiln/data/" + set;
}

absl::StatusOr<std::vector<ZooCase>> ParseZooManifest(const std::string& text) {
  std::vector<ZooCase> cases;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    if (f.size() != 11)
      return absl::InvalidArgumentError(
          absl::StrCat("manifest line ", line_no, ": ", f.size(), " fields, want 11"));
    ZooCase c;
    c.name = f[0];
    c.family = f[1];
    c.model = f[4];
    if (!absl::SimpleAtoi(f[2], &c.opset) || !absl::SimpleAtoi(f[3], &c.batch) ||
        !absl::SimpleAtod(f[6], &c.atol) || !absl::SimpleAtod(f[7], &c.rtol) ||
        !absl::SimpleAtod(f[10], &c.ort_ms))
      return absl::InvalidArgumentError(absl::StrCat("manifest line ", line_no, ": bad number"));
    if (f[5] != "-") {
      for (absl::string_view item : absl::StrSplit(f[5], ',')) {
        std::vector<std::string> kv = absl::StrSplit(item, ':');
        int index = 0;
        if (kv.size() != 2 || !absl::SimpleAtoi(kv[1], &index) ||
            (kv[0] != "argmax" && kv[0] != "detection"))
          return absl::InvalidArgumentError(
              absl::StrCat("manifest line ", line_no, ": bad check '", item, "'"));
        c.checks.emplace_back(kv[0], index);
      }
    }
    auto in = Pairs(f[8], line_no);
    if (!in.ok()) return in.status();
    auto out = Pairs(f[9], line_no);
    if (!out.ok()) return out.status();
    c.inputs = *in;
    c.outputs = *out;
    cases.push_back(std::move(c));
  }
  return cases;
}

absl::StatusOr<std::vector<ZooCase>> ReadZooManifest(const std::string& zoo_dir) {
  std::ifstream f(zoo_dir + "/manifest.tsv");
  if (!f)
    return absl::NotFoundError(absl::StrCat(
        "no model zoo in ", zoo_dir, ": run tools/fetch_testdata (tools/test does)"));
  std::stringstream ss;
  ss << f.rdbuf();
  return ParseZooManifest(ss.str());
}

}  // namespace kiln
