#include "tests/conformance/case_runner.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"
#include "engine/onnx/model.h"
#include "engine/onnx/tensor_proto.h"
#include "tests/conformance/value_proto.h"

namespace kiln {
namespace {

// Entries of `dir` named prefix + number + suffix, sorted by the number.
std::vector<std::string> Numbered(const std::string& dir, const std::string& prefix,
                                  const std::string& suffix) {
  std::vector<std::pair<int, std::string>> found;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (!absl::StartsWith(name, prefix) || !absl::EndsWith(name, suffix)) continue;
      int n;
      if (!absl::SimpleAtoi(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()),
                            &n))
        continue;
      found.push_back({n, absl::StrCat(dir, "/", name)});
    }
    closedir(d);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [n, path] : found) out.push_back(path);
  return out;
}

std::string ShapeString(const Shape& s) { return absl::StrCat("(", absl::StrJoin(s, ","), ")"); }

// Every tensor inside `v` (for one realize call).
void CollectTensors(OnnxValue* v, std::vector<Tensor*>* out) {
  if (v->is_tensor() && v->tensor) out->push_back(&*v->tensor);
  for (OnnxValue& item : v->items) CollectTensors(&item, out);
}

absl::StatusOr<HostTensor> HostOf(const OnnxValue& v) {
  if (v.host) return *v.host;
  return ReadBack(*v.tensor);
}

absl::Status CompareValues(const OnnxValue& got, const ExpectedValue& want, const std::string& what) {
  switch (want.kind) {
    case ExpectedValue::Kind::kTensor: {
      if (!got.is_tensor()) return absl::InternalError(absl::StrCat(what, ": not a tensor"));
      ASSIGN_OR_RETURN(HostTensor h, HostOf(got));
      absl::Status s = CompareTensors(h, want.tensor);
      if (!s.ok()) return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
      return absl::OkStatus();
    }
    case ExpectedValue::Kind::kSequence: {
      if (got.kind != OnnxValue::Kind::kSequence)
        return absl::InternalError(absl::StrCat(what, ": not a sequence"));
      if (got.items.size() != want.items.size())
        return absl::InternalError(absl::StrCat(what, ": sequence of ", got.items.size(),
                                                " elements, want ", want.items.size()));
      for (size_t i = 0; i < got.items.size(); ++i)
        RETURN_IF_ERROR(CompareValues(got.items[i], want.items[i], absl::StrCat(what, "[", i, "]")));
      return absl::OkStatus();
    }
    case ExpectedValue::Kind::kOptional: {
      bool got_has = got.kind != OnnxValue::Kind::kNone &&
                     (got.kind != OnnxValue::Kind::kOptional || !got.items.empty());
      if (got_has != !want.items.empty())
        return absl::InternalError(absl::StrCat(what, ": optional presence differs"));
      if (!got_has) return absl::OkStatus();
      const OnnxValue& inner = got.kind == OnnxValue::Kind::kOptional ? got.items[0] : got;
      return CompareValues(inner, want.items[0], what);
    }
  }
  return absl::OkStatus();
}

}  // namespace

Tolerance ToleranceFor(DType t) {
  if (t == dtypes::kFloat16) return {1e-3, 1e-3};
  if (t == dtypes::kBFloat16) return {1e-2, 1e-2};
  return {};
}

absl::Status CompareTensors(const HostTensor& got, const HostTensor& want) {
  if (got.dtype != want.dtype)
    return absl::InternalError(absl::StrCat("dtype ", got.dtype.Name(), ", want ", want.dtype.Name()));
  if (got.shape != want.shape)
    return absl::InternalError(absl::StrCat("shape ", ShapeString(got.shape), ", want ",
                                            ShapeString(want.shape)));
  Tolerance tol = ToleranceFor(want.dtype);
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < want.numel(); ++i) {
    bool ok;
    if (want.dtype.IsFloat()) {
      double g = got.GetDouble(i), w = want.GetDouble(i);
      if (std::isnan(w)) ok = std::isnan(g);
      else if (std::isinf(w)) ok = g == w;
      else ok = std::fabs(g - w) <= tol.atol + tol.rtol * std::fabs(w);
    } else {
      ok = got.GetInt(i) == want.GetInt(i);
    }
    if (!ok && bad++ == 0) first = i;
  }
  if (bad == 0) return absl::OkStatus();
  std::string g = want.dtype.IsFloat() ? absl::StrCat(got.GetDouble(first))
                                       : absl::StrCat(got.GetInt(first));
  std::string w = want.dtype.IsFloat() ? absl::StrCat(want.GetDouble(first))
                                       : absl::StrCat(want.GetInt(first));
  return absl::InternalError(absl::StrCat(bad, " of ", want.numel(), " values differ; first at ",
                                          first, ": got ", g, ", want ", w));
}

absl::Status RunConformanceCase(const std::string& dir, Engine* engine, const std::string& device) {
  ASSIGN_OR_RETURN(std::unique_ptr<OnnxModel> model,
                   OnnxModel::Load(absl::StrCat(dir, "/model.onnx"), engine, device));
  std::vector<std::string> sets = Numbered(dir, "test_data_set_", "");
  if (sets.empty()) return absl::NotFoundError(absl::StrCat(dir, ": no test_data_set_*"));
  for (const std::string& set : sets) {
    std::vector<std::string> in_files = Numbered(set, "input_", ".pb");
    std::vector<std::string> out_files = Numbered(set, "output_", ".pb");
    if (in_files.size() != model->inputs().size())
      return absl::InvalidArgumentError(absl::StrCat(set, ": ", in_files.size(),
                                                     " input files for ", model->inputs().size(),
                                                     " model inputs"));
    if (out_files.size() != model->outputs().size())
      return absl::InvalidArgumentError(absl::StrCat(set, ": ", out_files.size(),
                                                     " output files for ",
                                                     model->outputs().size(), " model outputs"));
    std::vector<OnnxValue> inputs;
    for (size_t i = 0; i < in_files.size(); ++i) {
      ASSIGN_OR_RETURN(ExpectedValue v, ReadValueFile(in_files[i], model->inputs()[i]));
      inputs.push_back(ToInputValue(v, engine, device));
    }
    ASSIGN_OR_RETURN(std::vector<OnnxValue> outs, model->RunValues(inputs));
    std::vector<Tensor*> all;
    for (OnnxValue& v : outs) CollectTensors(&v, &all);
    RETURN_IF_ERROR(Tensor::RealizeAll(all));
    for (size_t i = 0; i < outs.size(); ++i) {
      ASSIGN_OR_RETURN(ExpectedValue want, ReadValueFile(out_files[i], model->outputs()[i]));
      RETURN_IF_ERROR(CompareValues(outs[i], want, absl::StrCat("output '",
                                                                model->outputs()[i].name, "'")));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln
