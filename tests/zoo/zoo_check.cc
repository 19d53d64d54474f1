#include "tests/zoo/zoo_check.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {

absl::Status CompareOutput(const std::string& name, const ZooValues& got, const ZooValues& want,
                           double atol, double rtol, bool argmax, CompareResult* result) {
  if (got.shape != want.shape)
    return absl::InternalError(absl::StrCat(name, ": shape (", absl::StrJoin(got.shape, ","),
                                            ") != reference (", absl::StrJoin(want.shape, ","),
                                            ")"));
  if (got.data.size() != want.data.size())
    return absl::InternalError(absl::StrCat(name, ": ", got.data.size(), " values, reference has ",
                                            want.data.size()));
  const std::vector<double>& g = got.data;
  const std::vector<double>& w = want.data;
  if (w.size() > 1 && std::all_of(w.begin(), w.end(), [&](double v) { return v == w[0]; }))
    return absl::FailedPreconditionError(
        absl::StrCat(name, ": every reference value is ", w[0], ": a degenerate model proves nothing"));
  int64_t bad = 0, first_bad = -1;
  double max_err = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok;
    if (std::isnan(w[i])) {
      ok = std::isnan(g[i]);
    } else if (std::isinf(w[i])) {
      ok = g[i] == w[i];
    } else {
      double err = std::abs(g[i] - w[i]);
      ok = err <= atol + rtol * std::abs(w[i]);  // false for a NaN result
      if (!std::isnan(err)) max_err = std::max(max_err, err);
    }
    if (!ok && bad++ == 0) first_bad = static_cast<int64_t>(i);
  }
  result->max_abs_err = max_err;
  result->elements = static_cast<int64_t>(g.size());
  if (bad > 0)
    return absl::InternalError(absl::StrCat(
        name, ": ", bad, " of ", g.size(), " values out of tolerance (atol ", atol, ", rtol ",
        rtol, "); first at ", first_bad, ": got ", g[first_bad], ", want ", w[first_bad],
        "; max abs error ", max_err));
  if (argmax && !w.empty() && !want.shape.empty() && want.shape.back() > 0) {
    int64_t classes = want.shape.back();
    int64_t rows = static_cast<int64_t>(w.size()) / classes, mismatches = 0;
    for (int64_t r = 0; r < rows; ++r) {
      auto am = [&](const std::vector<double>& v) {
        return std::max_element(v.begin() + r * classes, v.begin() + (r + 1) * classes) -
               (v.begin() + r * classes);
      };
      mismatches += am(g) != am(w);
    }
    if (mismatches > 0)
      return absl::InternalError(
          absl::StrCat(name, ": argmax differs in ", mismatches, " of ", rows, " rows"));
  }
  return absl::OkStatus();
}

}  // namespace kiln
