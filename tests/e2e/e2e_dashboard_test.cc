// End to end: the Grafana dashboard deploy/grafana/dashboards/kiln.json.
// Every panel query is valid PromQL for a real Prometheus (Debian package)
// scraping kilnd, returns data once kilnd has served traffic, and names
// only metrics that kilnd's /metrics exposes.
#include <signal.h>

#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/testing/http_get.h"
#include "tests/e2e/e2e_util.h"

namespace kiln::e2e {
namespace {

constexpr char kDashboard[] = "deploy/grafana/dashboards/kiln.json";

// Grafana template variables -> what they expand to with "All" selected.
const std::map<std::string, std::string>& Variables() {
  static const auto* v = new std::map<std::string, std::string>{{"$model", ".*"}};
  return *v;
}

using Members = std::vector<std::pair<std::string, std::string>>;

// Reads the JSON string that starts at json[*i] == '"' and leaves *i after
// its closing quote (past the end if there is none). Decodes the one-letter
// escapes (\" \\ \/ \b \f \n \r \t); keeps \uXXXX as written.
std::string ReadString(const std::string& json, size_t* i) {
  static const std::string kLetters = "bfnrt", kChars = "\b\f\n\r\t";
  std::string s;
  for (++*i; *i < json.size() && json[*i] != '"'; ++*i) {
    if (json[*i] != '\\' || *i + 1 == json.size()) {
      s += json[*i];
      continue;
    }
    char e = json[++*i];
    size_t k = kLetters.find(e);
    if (e == 'u') s += '\\';
    s += k == std::string::npos ? e : kChars[k];
  }
  ++*i;
  return s;
}

// Every object member whose value is a string, as (key, value), in document
// order. Checks only that strings end and brackets balance.
absl::StatusOr<Members> StringMembers(const std::string& json) {
  Members out;
  std::string key;
  bool after_key = false;  // between `"key":` and its value
  std::string open;        // the closing brackets expected, innermost last
  for (size_t i = 0; i < json.size();) {
    char c = json[i];
    if (c == '"') {
      std::string s = ReadString(json, &i);
      if (i > json.size()) return absl::InvalidArgumentError("unterminated string");
      size_t next = json.find_first_not_of(" \t\r\n", i);
      if (next != std::string::npos && json[next] == ':') {
        key = s;
        after_key = true;
        i = next + 1;
      } else {
        if (after_key) out.emplace_back(key, s);
        after_key = false;
      }
      continue;
    }
    if (c == '{' || c == '[') open += c == '{' ? '}' : ']';
    if (c == '}' || c == ']') {
      if (open.empty() || open.back() != c)
        return absl::InvalidArgumentError(
            absl::StrCat("unbalanced '", std::string(1, c), "' at offset ", i));
      open.pop_back();
    }
    if (!std::isspace(static_cast<unsigned char>(c))) after_key = false;
    ++i;
  }
  if (!open.empty()) return absl::InvalidArgumentError("unclosed object or array");
  return out;
}

// The distinct words kiln_[a-z_]+ in `text`.
std::set<std::string> KilnNames(const std::string& text) {
  auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::set<std::string> names;
  for (size_t i = text.find("kiln_"); i != std::string::npos; i = text.find("kiln_", i)) {
    size_t end = i + 5;
    while (end < text.size() &&
           (std::islower(static_cast<unsigned char>(text[end])) || text[end] == '_'))
      ++end;
    if (i == 0 || !word_char(text[i - 1])) names.insert(text.substr(i, end - i));
    i = end;
  }
  return names;
}

// Metric family name -> type, from the "# TYPE name type" lines.
std::map<std::string, std::string> ExposedTypes(const std::string& exposition) {
  std::map<std::string, std::string> types;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() == 4 && f[0] == "#" && f[1] == "TYPE") types[f[2]] = f[3];
  }
  return types;
}

// `name` is a family in `types`, or a histogram's _bucket / _sum / _count.
bool Exposed(const std::map<std::string, std::string>& types, const std::string& name) {
  if (types.count(name)) return true;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    absl::string_view base = name;
    if (!absl::ConsumeSuffix(&base, suffix)) continue;
    auto it = types.find(std::string(base));
    if (it != types.end() && it->second == "histogram") return true;
  }
  return false;
}

// A successful query answer with at least one sample.
bool HasData(const std::string& body) {
  return absl::StrContains(body, "\"status\":\"success\"") &&
         absl::StrContains(body, "\"result\":[") && !absl::StrContains(body, "\"result\":[]");
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return absl::NotFoundError("cannot read " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(E2eDashboardTest, EveryQueryRunsOnPrometheusOverKilndMetrics) {
  auto json = ReadFile(kDashboard);
  ASSERT_TRUE(json.ok()) << json.status();
  auto members = StringMembers(*json);
  ASSERT_TRUE(members.ok()) << kDashboard << ": " << members.status();
  std::vector<std::string> exprs;
  std::string variable_query;
  int panels = 0, units = 0;
  for (const auto& [key, value] : *members) {
    if (key == "expr") exprs.push_back(value);
    if (key == "type" && (value == "timeseries" || value == "stat")) ++panels;
    if (key == "unit") ++units;
    if (key == "query" && absl::StartsWith(value, "label_values(")) variable_query = value;
  }
  EXPECT_GE(panels, 10);
  EXPECT_GE(units, panels) << "a panel without a unit";
  ASSERT_GE(exprs.size(), static_cast<size_t>(panels));

  auto repo = MakeRepo("dashboard_repo", {});
  ASSERT_TRUE(repo.ok());
  auto p = KilnProcess::Start("server/kilnd", {"--model-repository=" + *repo});
  ASSERT_TRUE(p.ok()) << p.status();
  auto prom = PrometheusProcess::Start("dashboard_prometheus", (*p)->metrics_port());
  ASSERT_TRUE(prom.ok()) << prom.status();
  // Traffic: successes, and one failure (wrong shape) so that the failure
  // counter has a series.
  auto client = (*p)->Client();
  std::vector<float> a(32, 1.5f), b(32, 2.0f);
  std::vector<ClientTensor> good = {FloatTensor("INPUT0", a, {2, 16}),
                                    FloatTensor("INPUT1", b, {2, 16})};
  std::vector<ClientTensor> bad = {FloatTensor("INPUT0", a, {4, 8}),
                                   FloatTensor("INPUT1", b, {4, 8})};
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(client->Infer("simple", good).ok());
  EXPECT_FALSE(client->Infer("simple", bad).ok());

  // Every kiln_ name in the dashboard (queries and the variable) is exposed.
  auto text = testing::HttpGet((*p)->metrics_port(), "/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  auto types = ExposedTypes(*text);
  std::set<std::string> names = KilnNames(*json);
  EXPECT_GE(names.size(), 20u);
  for (const std::string& name : names)
    EXPECT_TRUE(Exposed(types, name))
        << kDashboard << " uses " << name << ", which kilnd's /metrics does not expose";

  // Valid PromQL: Prometheus evaluates every query at once (HTTP 400 if not).
  std::map<std::string, std::string> waiting;  // query -> last answer
  for (const std::string& expr : exprs) {
    std::string query = absl::StrReplaceAll(expr, Variables());
    EXPECT_FALSE(absl::StrContains(query, "$")) << "unknown template variable in: " << expr;
    auto body = (*prom)->Query(query);
    bool valid = body.ok() && absl::StrContains(*body, "\"status\":\"success\"");
    EXPECT_TRUE(valid) << "invalid PromQL: " << expr << "\n  "
                       << (body.ok() ? *body : body.status().ToString());
    if (valid) waiting[query] = "";
  }
  // Data: rate() needs two scrapes (1 s apart) of a series; the failure and
  // RPC series appear with the traffic.
  absl::Time deadline = absl::Now() + absl::Seconds(90);
  while (!waiting.empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(500));
    for (auto it = waiting.begin(); it != waiting.end();) {
      auto body = (*prom)->Query(it->first);
      if (body.ok() && HasData(*body)) {
        it = waiting.erase(it);
      } else {
        it->second = body.ok() ? *body : body.status().ToString();
        ++it;
      }
    }
  }
  for (const auto& [query, answer] : waiting)
    ADD_FAILURE() << "no data after 15 s for: " << query << "\n  last answer: " << answer;

  // The template variable lists the served model.
  std::vector<std::string> args = absl::StrSplit(
      absl::StripSuffix(absl::StripPrefix(variable_query, "label_values("), ")"), ',');
  ASSERT_EQ(args.size(), 2u) << "variable query: " << variable_query;
  std::string metric(absl::StripAsciiWhitespace(args[0]));
  std::string label(absl::StripAsciiWhitespace(args[1]));
  auto values = testing::HttpGet(
      (*prom)->port(), "/api/v1/label/" + label + "/values?match%5B%5D=" + UrlEncode(metric));
  ASSERT_TRUE(values.ok()) << variable_query << ": " << values.status();
  EXPECT_TRUE(absl::StrContains(*values, "\"simple\"")) << variable_query << ": " << *values;

  prom->reset();
  (*p)->Signal(SIGTERM);
  EXPECT_EQ(*(*p)->Wait(absl::Seconds(30)), 0);
}

}  // namespace
}  // namespace kiln::e2e
