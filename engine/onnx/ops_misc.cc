// Constant, Einsum, and data-dependent operators whose output shape depends
// on values (NonZero, Compress): those read their input on the host.
#include <algorithm>
#include <map>
#include <numeric>

#include "engine/onnx/graph_builder.h"
#include "engine/onnx/onnx/onnx.pb.h"
#include "engine/onnx/ops_common.h"

namespace kiln {
namespace {

absl::Status ConstantOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(0, 0));
  for (const onnx::AttributeProto& a : ctx.node().attribute()) (void)ctx.Attr(a.name());
  ASSIGN_OR_RETURN(HostTensor h, ConstantNodeValue(ctx.node(), ctx.opset(), ""));
  ctx.SetValue(0, ConstantValue(std::move(h), ctx.engine(), ctx.device()));
  return absl::OkStatus();
}

// ---- Einsum: operands are aligned on one axis per letter, multiplied
// (broadcasting) and summed over the letters missing from the output. ----

struct EinsumSpec {
  std::vector<std::string> inputs;  // letters per operand ('.' expanded)
  std::string output;
};

absl::StatusOr<EinsumSpec> ParseEinsum(std::string eq, const std::vector<Tensor>& ops) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != ops.size())
    return Invalid(absl::StrCat("equation has ", terms.size(), " operands, got ", ops.size()));
  // Ellipsis dims get upper-case letters (equations use lower-case ones).
  int64_t ell = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    size_t dots = terms[i].find("...");
    if (dots != std::string::npos)
      ell = std::max<int64_t>(ell, ops[i].ndim() - static_cast<int64_t>(terms[i].size() - 3));
  }
  std::string ell_letters;
  for (int64_t i = 0; i < ell; ++i) ell_letters.push_back(static_cast<char>('A' + i));
  EinsumSpec spec;
  for (size_t i = 0; i < terms.size(); ++i) {
    std::string t = terms[i];
    size_t dots = t.find("...");
    if (dots != std::string::npos) {
      int64_t n = ops[i].ndim() - static_cast<int64_t>(t.size() - 3);
      if (n < 0) return Invalid("ellipsis does not fit the operand rank");
      t = t.substr(0, dots) + ell_letters.substr(ell - n) + t.substr(dots + 3);
    }
    if (static_cast<int64_t>(t.size()) != ops[i].ndim())
      return Invalid(absl::StrCat("term '", terms[i], "' does not match rank ", ops[i].ndim()));
    spec.inputs.push_back(t);
  }
  if (arrow != std::string::npos) {
    std::string out = eq.substr(arrow + 2);
    size_t dots = out.find("...");
    if (dots != std::string::npos) out = out.substr(0, dots) + ell_letters + out.substr(dots + 3);
    spec.output = out;
  } else {
    // Implicit output: ellipsis dims, then letters used once, alphabetically.
    std::map<char, int> count;
    for (const std::string& t : spec.inputs)
      for (char c : t) count[c]++;
    spec.output = ell_letters;
    for (auto [c, n] : count)
      if (n == 1 && !(c >= 'A' && c < 'A' + ell)) spec.output.push_back(c);
  }
  return spec;
}

absl::Status EinsumOp(OpContext& ctx) {
  if (ctx.num_inputs() < 1) return Invalid("needs at least one input");
  std::vector<Tensor> ops;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    ASSIGN_OR_RETURN(Tensor t, ctx.In(i));
    ops.push_back(t);
  }
  ASSIGN_OR_RETURN(EinsumSpec spec, ParseEinsum(ctx.Str("equation", ""), ops));
  // All letters: output letters first, then the summed ones.
  std::string letters = spec.output;
  for (const std::string& t : spec.inputs)
    for (char c : t)
      if (letters.find(c) == std::string::npos) letters.push_back(c);
  std::map<char, int64_t> size;
  for (size_t i = 0; i < ops.size(); ++i)
    for (size_t j = 0; j < spec.inputs[i].size(); ++j) {
      char c = spec.inputs[i][j];
      int64_t d = ops[i].dim(static_cast<int>(j));
      if (size.count(c) && size[c] != d && size[c] != 1 && d != 1)
        return Invalid(absl::StrCat("letter '", std::string(1, c), "' has sizes ", size[c],
                                    " and ", d));
      if (!size.count(c) || size[c] == 1) size[c] = d;
    }
  Tensor prod;
  for (size_t i = 0; i < ops.size(); ++i) {
    Tensor t = ops[i];
    std::string term = spec.inputs[i];
    // Repeated letters within an operand take the diagonal.
    for (size_t a = 0; a < term.size(); ++a) {
      size_t b = term.find(term[a], a + 1);
      if (b == std::string::npos) continue;
      int64_t n = t.dim(static_cast<int>(a));
      Shape ms(t.ndim(), 1);
      ms[a] = n;
      ms[b] = n;
      Tensor eye = Tensor::Eye(ctx.engine(), n, dtypes::kBool, ctx.device()).Reshape(ms);
      t = Tensor::Where(eye, t, t.ZerosLike()).Sum({static_cast<int64_t>(b)});
      term.erase(b, 1);
      --a;
    }
    // Permute to the order of `letters`, then insert 1-dims for the others.
    std::vector<int64_t> perm;
    Shape target;
    for (char c : letters) {
      size_t p = term.find(c);
      if (p != std::string::npos) perm.push_back(static_cast<int64_t>(p));
    }
    t = t.Permute(perm);
    std::string ordered;
    for (int64_t p : perm) ordered.push_back(term[p]);
    for (char c : letters) {
      size_t p = ordered.find(c);
      target.push_back(p == std::string::npos ? 1 : t.dim(static_cast<int>(p)));
    }
    t = t.Reshape(target);
    prod = i == 0 ? t : prod * t;
  }
  std::vector<int64_t> sum_axes;
  for (size_t i = spec.output.size(); i < letters.size(); ++i)
    sum_axes.push_back(static_cast<int64_t>(i));
  Shape full;
  for (char c : letters) full.push_back(size[c]);
  prod = prod.Expand(full);
  Tensor y = sum_axes.empty() ? prod : prod.Sum(sum_axes);
  ctx.Set(0, y.Cast(ops[0].dtype()));
  return absl::OkStatus();
}

// ---- data-dependent shapes: computed on the host ----

absl::Status NonZeroOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(HostTensor x, ctx.Static(0));
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < x.numel(); ++i)
    if (x.GetDouble(i) != 0 || (x.dtype.IsInt() && x.GetInt(i) != 0)) hits.push_back(i);
  int64_t n = static_cast<int64_t>(hits.size());
  HostTensor out(dtypes::kInt64, {x.ndim() == 0 ? 1 : x.ndim(), n});
  for (int64_t k = 0; k < n; ++k) {
    int64_t flat = hits[k];
    for (int64_t d = x.ndim() - 1; d >= 0; --d) {
      out.SetInt(d * n + k, flat % x.shape[d]);
      flat /= x.shape[d];
    }
    if (x.ndim() == 0) out.SetInt(k, 0);
  }
  ctx.SetValue(0, ConstantValue(std::move(out), ctx.engine(), ctx.device()));
  return absl::OkStatus();
}

absl::Status CompressOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 2));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(HostTensor cond, ctx.Static(1));
  bool has_axis = ctx.HasAttr("axis");
  if (!has_axis) x = x.Reshape({x.numel()});
  ASSIGN_OR_RETURN(int64_t axis, NormAxis(has_axis ? ctx.Int("axis", 0) : 0, x.ndim()));
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cond.numel() && i < x.dim(static_cast<int>(axis)); ++i)
    if (cond.GetInt(i) != 0) keep.push_back(i);
  HostTensor idx = HostTensor::Vector(keep);
  ctx.Set(0, x.IndexSelect(axis, idx.ToTensor(ctx.engine(), ctx.device())
                                     .Reshape({static_cast<int64_t>(keep.size())})));
  return absl::OkStatus();
}

}  // namespace

void RegisterMiscOps(OpRegistry* r) {
  r->Register("Constant", ConstantOp);
  r->Register("Einsum", EinsumOp);
  r->Register("NonZero", NonZeroOp);
  r->Register("Compress", CompressOp);
}

}  // namespace kiln
