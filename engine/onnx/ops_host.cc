// Operators whose work is decided by data values, computed on the host from
// their inputs' values (read back when they are not host values already):
// Unique, NonMaxSuppression, TfIdfVectorizer, and the sampling taps of
// RoiAlign (the pooling itself is a gather or a matmul on the device).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>

#include "engine/onnx/graph_builder.h"
#include "engine/onnx/ops_common.h"

namespace kiln {
namespace {

absl::Status UniqueOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(HostTensor x, ctx.Static(0));
  bool sorted = ctx.Int("sorted", 1) != 0;
  // Rows along the axis (or single elements of the flattened input).
  Shape shape = x.shape;
  int64_t axis = 0;
  if (ctx.HasAttr("axis")) {
    ASSIGN_OR_RETURN(axis, NormAxis(ctx.Int("axis", 0), x.ndim()));
  } else {
    shape = {x.numel()};
  }
  int64_t outer = 1, n = shape[axis], inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<std::vector<double>> rows(n);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t a = 0; a < outer; ++a)
      for (int64_t b = 0; b < inner; ++b) rows[r].push_back(x.GetDouble((a * n + r) * inner + b));
  std::map<std::vector<double>, int64_t> seen;  // row -> unique id (first-seen order)
  std::vector<int64_t> first, id_of(n);
  for (int64_t r = 0; r < n; ++r) {
    auto [it, inserted] = seen.insert({rows[r], static_cast<int64_t>(first.size())});
    if (inserted) first.push_back(r);
    id_of[r] = it->second;
  }
  int64_t u = static_cast<int64_t>(first.size());
  std::vector<int64_t> order(u);  // output position -> unique id
  std::iota(order.begin(), order.end(), 0);
  if (sorted)
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return rows[first[a]] < rows[first[b]]; });
  std::vector<int64_t> pos(u);
  for (int64_t k = 0; k < u; ++k) pos[order[k]] = k;
  Shape yshape = shape;
  yshape[axis] = u;
  HostTensor y(x.dtype, yshape);
  int item = x.dtype.ItemSize();
  std::vector<int64_t> indices(u), inverse(n), counts(u, 0);
  for (int64_t k = 0; k < u; ++k) {
    indices[k] = first[order[k]];
    for (int64_t a = 0; a < outer; ++a)
      std::memcpy(y.data.data() + ((a * u + k) * inner) * item,
                  x.data.data() + ((a * n + indices[k]) * inner) * item, inner * item);
  }
  for (int64_t r = 0; r < n; ++r) {
    inverse[r] = pos[id_of[r]];
    counts[inverse[r]]++;
  }
  ctx.SetValue(0, ConstantValue(std::move(y), ctx.engine(), ctx.device()));
  ctx.SetValue(1, ConstantValue(HostTensor::Vector(indices), ctx.engine(), ctx.device()));
  ctx.SetValue(2, ConstantValue(HostTensor::Vector(inverse), ctx.engine(), ctx.device()));
  ctx.SetValue(3, ConstantValue(HostTensor::Vector(counts), ctx.engine(), ctx.device()));
  return absl::OkStatus();
}

absl::Status NmsOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 5));
  ASSIGN_OR_RETURN(HostTensor boxes, ctx.Static(0));
  ASSIGN_OR_RETURN(HostTensor scores, ctx.Static(1));
  if (boxes.ndim() != 3 || boxes.shape[2] != 4 || scores.ndim() != 3 ||
      scores.shape[0] != boxes.shape[0] || scores.shape[2] != boxes.shape[1])
    return Invalid("boxes must be (batch, n, 4) and scores (batch, classes, n)");
  int64_t max_out = 0;
  double iou_th = 0, score_th = -INFINITY;
  if (ctx.Has(2)) {
    ASSIGN_OR_RETURN(HostTensor m, ctx.Static(2));
    if (m.numel() > 0) max_out = m.GetInt(0);
  }
  if (ctx.Has(3)) {
    ASSIGN_OR_RETURN(HostTensor t, ctx.Static(3));
    if (t.numel() > 0) iou_th = t.GetDouble(0);
  }
  if (ctx.Has(4)) {
    ASSIGN_OR_RETURN(HostTensor t, ctx.Static(4));
    if (t.numel() > 0) score_th = t.GetDouble(0);
  }
  bool center = ctx.Int("center_point_box", 0) != 0;
  int64_t batches = boxes.shape[0], n = boxes.shape[1], classes = scores.shape[1];
  // Corners (y1, x1, y2, x2), normalized so that 1 <= 2.
  auto corners = [&](int64_t b, int64_t i) {
    double v[4];
    for (int k = 0; k < 4; ++k) v[k] = boxes.GetDouble((b * n + i) * 4 + k);
    std::array<double, 4> c;
    if (center) {
      c = {v[1] - v[3] / 2, v[0] - v[2] / 2, v[1] + v[3] / 2, v[0] + v[2] / 2};
    } else {
      c = {std::min(v[0], v[2]), std::min(v[1], v[3]), std::max(v[0], v[2]), std::max(v[1], v[3])};
    }
    return c;
  };
  auto iou = [](const std::array<double, 4>& a, const std::array<double, 4>& b) {
    double ih = std::min(a[2], b[2]) - std::max(a[0], b[0]);
    double iw = std::min(a[3], b[3]) - std::max(a[1], b[1]);
    if (ih <= 0 || iw <= 0) return 0.0;
    double inter = ih * iw;
    double uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    return uni > 0 ? inter / uni : 0.0;
  };
  std::vector<int64_t> out;
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t c = 0; c < classes; ++c) {
      std::vector<int64_t> cand;
      for (int64_t i = 0; i < n; ++i)
        if (scores.GetDouble((b * classes + c) * n + i) > score_th) cand.push_back(i);
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t i, int64_t j) {
        return scores.GetDouble((b * classes + c) * n + i) > scores.GetDouble((b * classes + c) * n + j);
      });
      std::vector<int64_t> kept;
      for (int64_t i : cand) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        bool suppressed = false;
        for (int64_t k : kept) suppressed |= iou(corners(b, i), corners(b, k)) > iou_th;
        if (suppressed) continue;
        kept.push_back(i);
        out.insert(out.end(), {b, c, i});
      }
    }
  int64_t rows = static_cast<int64_t>(out.size() / 3);
  ctx.SetValue(0, ConstantValue(HostTensor::FromInt64s(out, {rows, 3}), ctx.engine(), ctx.device()));
  return absl::OkStatus();
}

absl::Status TfIdfOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(HostTensor x, ctx.Static(0));
  if (x.dtype.IsFloat() || x.ndim() < 1 || x.ndim() > 2)
    return Invalid("input must be a 1-D or 2-D integer tensor");
  int64_t min_n = ctx.Int("min_gram_length", 1), max_n = ctx.Int("max_gram_length", 1);
  int64_t max_skip = ctx.Int("max_skip_count", 0);
  std::string mode = ctx.Str("mode", "TF");
  std::vector<int64_t> counts = ctx.Ints("ngram_counts"), indexes = ctx.Ints("ngram_indexes");
  std::vector<int64_t> pool = ctx.Ints("pool_int64s");
  std::vector<float> weights = ctx.Floats("weights");
  if (ctx.HasAttr("pool_strings")) return Unsupported("string pools are not supported");
  if (min_n < 1 || max_n < min_n || counts.empty() || indexes.empty())
    return Invalid("bad n-gram attributes");
  for (size_t g = 0; g < counts.size(); ++g)
    if (counts[g] < 0 || counts[g] > static_cast<int64_t>(pool.size()) ||
        (g > 0 && counts[g] < counts[g - 1]))
      return Invalid("ngram_counts must be non-decreasing offsets into the pool");
  for (int64_t i : indexes)
    if (i < 0 || i > (1 << 24)) return Invalid("ngram_indexes out of range");
  // Pool n-grams -> output column.
  std::map<std::vector<int64_t>, int64_t> column;
  int64_t gram = 0;
  for (size_t g = 0; g < counts.size(); ++g) {
    int64_t n = static_cast<int64_t>(g) + 1;
    int64_t end = g + 1 < counts.size() ? counts[g + 1] : static_cast<int64_t>(pool.size());
    for (int64_t p = counts[g]; p + n <= end; p += n, ++gram) {
      if (gram >= static_cast<int64_t>(indexes.size())) return Invalid("too few ngram_indexes");
      column[std::vector<int64_t>(pool.begin() + p, pool.begin() + p + n)] = indexes[gram];
    }
  }
  int64_t width = *std::max_element(indexes.begin(), indexes.end()) + 1;
  int64_t rows = x.ndim() == 2 ? x.shape[0] : 1, len = x.shape.back();
  RETURN_IF_ERROR(CheckedNumel({rows, width}, kMaxHostElements, "the TfIdf output").status());
  std::vector<double> out(rows * width, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t n = min_n; n <= max_n; ++n)
      for (int64_t start = 0; start < len; ++start)
        for (int64_t skip = 0; skip <= (n == 1 ? 0 : max_skip); ++skip) {
          if (start + (n - 1) * (skip + 1) >= len) break;
          std::vector<int64_t> g;
          for (int64_t k = 0; k < n; ++k) g.push_back(x.GetInt(r * len + start + k * (skip + 1)));
          auto it = column.find(g);
          if (it != column.end()) out[r * width + it->second] += 1;
        }
  for (int64_t i = 0; i < rows * width; ++i) {
    int64_t col = i % width;
    // weights are indexed like the pool's n-grams; map column -> gram index.
    double w = 1;
    if (!weights.empty())
      for (size_t gi = 0; gi < indexes.size() && gi < weights.size(); ++gi)
        if (indexes[gi] == col) w = weights[gi];
    if (mode == "IDF") out[i] = out[i] > 0 ? w : 0;
    else if (mode == "TFIDF") out[i] *= w;
    else if (mode != "TF") return Invalid(absl::StrCat("unknown mode '", mode, "'"));
  }
  Shape s = x.ndim() == 2 ? Shape{rows, width} : Shape{width};
  ctx.SetValue(0, ConstantValue(HostTensor::FromDoubles(out, s, dtypes::kFloat32), ctx.engine(),
                                ctx.device()));
  return absl::OkStatus();
}

// RoiAlign's bilinear taps: for each output bin (roi r, bin p), the input
// positions (y * w + x) its samples read and their summed weights. A bin of
// a gh x gw sampling grid reads at most 4 * gh * gw positions (fewer after
// merging), usually far fewer than the h * w of the map.
struct RoiTaps {
  std::vector<int64_t> start;  // bin b's taps are [start[b], start[b + 1])
  std::vector<int64_t> pos;
  std::vector<double> weight;
  int64_t max_taps = 0;  // the most taps of any bin
};

// Taps held on the host at most (16 bytes each, 1 GiB).
constexpr size_t kMaxRoiTaps = size_t{1} << 26;

absl::StatusOr<RoiTaps> RoiAlignTaps(const OpContext& ctx, const HostTensor& rois, int64_t ph,
                                     int64_t pw, int64_t h, int64_t w, bool half_pixel) {
  const int64_t ratio = ctx.Int("sampling_ratio", 0), r_count = rois.shape[0];
  const double scale = ctx.Float("spatial_scale", 1.0f);
  const double offset = half_pixel ? 0.5 : 0.0;
  RoiTaps taps;
  taps.start.reserve(r_count * ph * pw + 1);
  std::vector<double> scratch(h * w, 0.0);  // one bin's weights by position
  std::vector<char> seen(h * w, 0);
  std::vector<int64_t> touched;
  for (int64_t r = 0; r < r_count; ++r) {
    double x0 = rois.GetDouble(r * 4) * scale - offset, y0 = rois.GetDouble(r * 4 + 1) * scale - offset;
    double x1 = rois.GetDouble(r * 4 + 2) * scale - offset, y1 = rois.GetDouble(r * 4 + 3) * scale - offset;
    double rw = x1 - x0, rh = y1 - y0;
    if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    double bh = rh / static_cast<double>(ph), bw = rw / static_cast<double>(pw);
    double gh_d = ratio > 0 ? static_cast<double>(ratio) : std::ceil(rh / static_cast<double>(ph));
    double gw_d = ratio > 0 ? static_cast<double>(ratio) : std::ceil(rw / static_cast<double>(pw));
    if (!(gh_d <= 4096) || !(gw_d <= 4096)) return Invalid("roi sampling grid too large");
    gh_d = std::max(gh_d, 0.0);  // an inverted roi samples nothing (and never
    gw_d = std::max(gw_d, 0.0);  // converts a huge negative to int64)
    int64_t gh = static_cast<int64_t>(gh_d), gw = static_cast<int64_t>(gw_d);
    double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
    for (int64_t py = 0; py < ph; ++py)
      for (int64_t px = 0; px < pw; ++px) {
        taps.start.push_back(static_cast<int64_t>(taps.pos.size()));
        auto add = [&](int64_t at, double v) {
          if (!seen[at]) touched.push_back(at), seen[at] = 1;
          scratch[at] += v;
        };
        for (int64_t iy = 0; iy < gh; ++iy)
          for (int64_t ix = 0; ix < gw; ++ix) {
            double y = y0 + static_cast<double>(py) * bh + (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh);
            double xx = x0 + static_cast<double>(px) * bw + (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw);
            if (y < -1.0 || y > static_cast<double>(h) || xx < -1.0 || xx > static_cast<double>(w)) continue;
            y = std::max(y, 0.0);
            xx = std::max(xx, 0.0);
            int64_t yl = static_cast<int64_t>(y), xl = static_cast<int64_t>(xx), yh2, xh2;
            if (yl >= h - 1) yl = yh2 = h - 1, y = static_cast<double>(yl);
            else yh2 = yl + 1;
            if (xl >= w - 1) xl = xh2 = w - 1, xx = static_cast<double>(xl);
            else xh2 = xl + 1;
            double ly = y - static_cast<double>(yl), lx = xx - static_cast<double>(xl);
            double hy = 1 - ly, hx = 1 - lx;
            add(yl * w + xl, hy * hx / count);
            add(yl * w + xh2, hy * lx / count);
            add(yh2 * w + xl, ly * hx / count);
            add(yh2 * w + xh2, ly * lx / count);
          }
        for (int64_t at : touched) {
          taps.pos.push_back(at);
          taps.weight.push_back(scratch[at]);
          scratch[at] = 0.0;
          seen[at] = 0;
        }
        taps.max_taps = std::max<int64_t>(taps.max_taps, static_cast<int64_t>(touched.size()));
        touched.clear();
        if (taps.pos.size() > kMaxRoiTaps)
          return absl::ResourceExhaustedError(absl::StrCat(
              "the RoiAlign sampling taps of ", r_count, " rois of ", ph, "x", pw,
              " bins are too many (more than ", kMaxRoiTaps, ")"));
      }
  }
  taps.start.push_back(static_cast<int64_t>(taps.pos.size()));
  return taps;
}

// RoiAlign (mode avg) as a weighted sum of bilinear taps. Few taps per bin
// (the usual case: a 2x2 sampling grid reads at most 16 positions of a
// map of hundreds): each bin gathers its taps from the map in channels-last
// order, O(rois x bins x taps x C). Otherwise a matmul of the map with the
// dense (bins x h * w) weights, O(rois x bins x h * w x C).
absl::Status RoiAlignOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(3, 3));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(HostTensor rois, ctx.Static(1));
  ASSIGN_OR_RETURN(Tensor batch_idx, ctx.In(2));
  if (x.ndim() != 4 || rois.ndim() != 2 || rois.shape[1] != 4)
    return Invalid("X must be (N, C, H, W) and rois (R, 4)");
  if (ctx.Str("mode", "avg") != "avg") return Unsupported("only mode 'avg' is supported");
  if (batch_idx.ndim() != 1 || batch_idx.dim(0) != rois.shape[0])
    return Invalid("batch_indices must be (R) for rois (R, 4)");
  bool half_pixel = ctx.opset() >= 16 &&
                    ctx.Str("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  int64_t ph = ctx.Int("output_height", 1), pw = ctx.Int("output_width", 1);
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), r_count = rois.shape[0];
  if (ph <= 0 || pw <= 0) return Invalid("output_height / output_width must be positive");
  if (!CheckedNumel({r_count, ph, pw, h, w}, int64_t{1} << 28, "the RoiAlign sampling weights")
           .ok())
    return absl::ResourceExhaustedError(absl::StrCat(
        "the sampling weights of ", r_count, " rois of ", ph, "x", pw, " over ", h, "x", w,
        " are too large (more than 2^28)"));
  ASSIGN_OR_RETURN(RoiTaps taps, RoiAlignTaps(ctx, rois, ph, pw, h, w, half_pixel));
  const int64_t bins = r_count * ph * pw, hw = h * w;
  if (taps.max_taps * 2 <= hw) {
    // Sparse: bin b reads positions pos[b, t] (padded with weight 0).
    const int64_t s = std::max<int64_t>(taps.max_taps, 1);
    std::vector<int64_t> pos(bins * s, 0);
    std::vector<double> wt(bins * s, 0.0);
    for (int64_t b = 0; b < bins; ++b)
      for (int64_t t = taps.start[b]; t < taps.start[b + 1]; ++t) {
        pos[b * s + (t - taps.start[b])] = taps.pos[t];
        wt[b * s + (t - taps.start[b])] = taps.weight[t];
      }
    Tensor at = HostTensor::FromInt64s(pos, {r_count, ph * pw, s}).ToTensor(ctx.engine(), ctx.device());
    Tensor weights = HostTensor::FromDoubles(wt, {r_count, ph * pw, s, 1}, x.dtype())
                         .ToTensor(ctx.engine(), ctx.device());
    // Rows of the channels-last map (N * H * W, C); roi r reads image batch[r].
    Tensor rows = WrapIndices(batch_idx, n).Reshape({r_count, 1, 1}) * static_cast<double>(hw) + at;
    Tensor xt = x.Reshape({n, c, hw}).Permute({0, 2, 1}).Contiguous().Reshape({n * hw, c});
    Tensor y = (xt.IndexSelect(0, rows) * weights).Sum({2});  // (R, P, C)
    // Copied to (R, C, P): its consumers read rows of C x P (a flatten).
    ctx.Set(0, y.Permute({0, 2, 1}).Contiguous().Reshape({r_count, c, ph, pw}));
    return absl::OkStatus();
  }
  std::vector<double> wt(bins * hw, 0.0);
  for (int64_t bin = 0; bin < bins; ++bin)
    for (int64_t t = taps.start[bin]; t < taps.start[bin + 1]; ++t)
      wt[bin * hw + taps.pos[t]] = taps.weight[t];
  HostTensor wh = HostTensor::FromDoubles(wt, {r_count, ph * pw, hw}, x.dtype());
  Tensor weights = Tensor::FromData(ctx.engine(), wh.data.data(), wh.data.size(), wh.shape,
                                    x.dtype(), ctx.device());
  Tensor xb = x.Reshape({n, c, hw}).IndexSelect(0, batch_idx);  // (R, C, HW)
  Tensor y = xb.Matmul(weights.Transpose(-1, -2));             // (R, C, P)
  ctx.Set(0, y.Reshape({r_count, c, ph, pw}));
  return absl::OkStatus();
}

// MaxRoiPool (Caffe semantics): rois are (batch, x1, y1, x2, y2); each output
// bin is the max over its window (0 for an empty window).
absl::Status MaxRoiPoolOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 2));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(HostTensor rois, ctx.Static(1));
  if (x.ndim() != 4 || rois.ndim() != 2 || rois.shape[1] != 5)
    return Invalid("X must be (N, C, H, W) and rois (R, 5)");
  std::vector<int64_t> pooled = ctx.Ints("pooled_shape");
  if (pooled.size() != 2 || pooled[0] <= 0 || pooled[1] <= 0)
    return Invalid("pooled_shape must be two positive values");
  double scale = ctx.Float("spatial_scale", 1.0f);
  int64_t h = x.dim(2), w = x.dim(3), r_count = rois.shape[0], ph = pooled[0], pw = pooled[1];
  if (!CheckedNumel({r_count, ph, pw, h, w}, int64_t{1} << 28).ok())
    return absl::ResourceExhaustedError(absl::StrCat(
        "the windows of ", r_count, " rois of ", ph, "x", pw, " over ", h, "x", w,
        " are too large (more than 2^28)"));
  std::vector<int64_t> mask(r_count * ph * pw * h * w, 0), batch(r_count);
  for (int64_t r = 0; r < r_count; ++r) {
    batch[r] = rois.GetInt(r * 5);
    int64_t x1 = std::llround(rois.GetDouble(r * 5 + 1) * scale);
    int64_t y1 = std::llround(rois.GetDouble(r * 5 + 2) * scale);
    int64_t x2 = std::llround(rois.GetDouble(r * 5 + 3) * scale);
    int64_t y2 = std::llround(rois.GetDouble(r * 5 + 4) * scale);
    double bh = static_cast<double>(std::max<int64_t>(y2 - y1 + 1, 1)) / static_cast<double>(ph);
    double bw = static_cast<double>(std::max<int64_t>(x2 - x1 + 1, 1)) / static_cast<double>(pw);
    for (int64_t py = 0; py < ph; ++py)
      for (int64_t px = 0; px < pw; ++px) {
        int64_t hs = std::clamp<int64_t>(static_cast<int64_t>(std::floor(py * bh)) + y1, 0, h);
        int64_t he = std::clamp<int64_t>(static_cast<int64_t>(std::ceil((py + 1) * bh)) + y1, 0, h);
        int64_t ws = std::clamp<int64_t>(static_cast<int64_t>(std::floor(px * bw)) + x1, 0, w);
        int64_t we = std::clamp<int64_t>(static_cast<int64_t>(std::ceil((px + 1) * bw)) + x1, 0, w);
        int64_t* m = &mask[((r * ph + py) * pw + px) * h * w];
        for (int64_t yy = hs; yy < he; ++yy)
          for (int64_t xx = ws; xx < we; ++xx) m[yy * w + xx] = 1;
      }
  }
  Tensor m = HostTensor::FromInt64s(mask, {r_count, 1, ph * pw, h * w}, dtypes::kBool)
                 .ToTensor(ctx.engine(), ctx.device());
  Tensor b = HostTensor::Vector(batch).ToTensor(ctx.engine(), ctx.device()).Reshape({r_count});
  Tensor xb = x.Reshape({x.dim(0), x.dim(1), 1, h * w}).IndexSelect(0, b);  // (R, C, 1, HW)
  double lowest = x.dtype().IsFloat() ? -INFINITY : DTypeMin(x.dtype());
  Tensor best = Tensor::Where(m, xb, xb.Scalar(lowest)).Max({3});  // (R, C, P)
  Tensor any = m.Cast(dtypes::kInt32).Max({3});                     // (R, 1, P)
  Tensor y = Tensor::Where(any.Cast(dtypes::kBool), best, best.ZerosLike());
  ctx.Set(0, y.Reshape({r_count, x.dim(1), ph, pw}));
  return absl::OkStatus();
}

}  // namespace

void RegisterHostOps(OpRegistry* r) {
  r->Register("MaxRoiPool", MaxRoiPoolOp);
  r->Register("Unique", UniqueOp);
  r->Register("NonMaxSuppression", NmsOp);
  r->Register("TfIdfVectorizer", TfIdfOp);
  r->Register("RoiAlign", RoiAlignOp);
}

}  // namespace kiln
