// The models that take a hostile shape from a request (hostile_models.h).
#include "absl/strings/str_cat.h"
#include "tests/robustness/hostile_builder.h"
#include "tests/robustness/hostile_models.h"

namespace kiln::hostile {

std::vector<RequestModel> RequestModels() {
  std::vector<RequestModel> out;
  auto s2 = [](int64_t a, int64_t b) { return std::vector<Feed>{{"S", Vec({a, b})}}; };
  {
    Model m;
    m.In("S", kI64, {2}).Out("Y", kF, {-1, -1});
    m.Node("ConstantOfShape", {"S"}, {"Y"});
    RequestModel r{"req_cos", m.Bytes(), s2(2, 3), {}};
    r.bad = {{"[1e6,1e6]", s2(1000000, 1000000), "memory"},
             {"[2^62,4]", s2(kBig, 4), "too large"},
             {"[2^32,2^32]", s2(int64_t{1} << 32, int64_t{1} << 32), "too large"},
             {"[-1,4]", s2(-1, 4), "negative"}};
    out.push_back(r);
  }
  {
    Model m;
    m.In("X", kF, {4}).In("S", kI64, {2}).Out("Y", kF, {-1, -1});
    m.Node("Reshape", {"X", "S"}, {"Y"});
    std::vector<Feed> good = s2(2, 2);
    good.insert(good.begin(), Feed{"X", Floats({1, 2, 3, 4}, {4})});
    RequestModel r{"req_reshape", m.Bytes(), good, {}};
    auto bad = [&](int64_t a, int64_t b) {
      std::vector<Feed> f = s2(a, b);
      f.insert(f.begin(), Feed{"X", Floats({1, 2, 3, 4}, {4})});
      return f;
    };
    r.bad = {{"[2^62,4]", bad(kBig, 4), "reshape"},
             {"[2^32,2^32]", bad(int64_t{1} << 32, int64_t{1} << 32), "reshape"},
             {"[-3,4]", bad(-3, 4), "negative"}};
    out.push_back(r);
  }
  auto with_x = [](Feed x, std::vector<Feed> f) {
    f.insert(f.begin(), std::move(x));
    return f;
  };
  {
    Model m;
    m.In("X", kF, {1}).In("S", kI64, {2}).Out("Y", kF, {-1, -1});
    m.Node("Expand", {"X", "S"}, {"Y"});
    Feed x{"X", Floats({7}, {1})};
    RequestModel r{"req_expand", m.Bytes(), with_x(x, s2(2, 3)), {}};
    r.bad = {{"[1e6,1e6]", with_x(x, s2(1000000, 1000000)), "memory"},
             {"[2^62,4]", with_x(x, s2(kBig, 4)), "too large"},
             {"[-5,4]", with_x(x, s2(-5, 4)), "negative"}};
    out.push_back(r);
  }
  {
    Model m;
    m.In("X", kF, {2, 2}).In("S", kI64, {2}).Out("Y", kF, {-1, -1});
    m.Node("Tile", {"X", "S"}, {"Y"});
    Feed x{"X", Floats({1, 2, 3, 4}, {2, 2})};
    RequestModel r{"req_tile", m.Bytes(), with_x(x, s2(2, 1)), {}};
    r.bad = {{"[1e6,1e6]", with_x(x, s2(1000000, 1000000)), "memory"},
             {"[2^62,4]", with_x(x, s2(kBig, 4)), "too large"},
             {"[-1,1]", with_x(x, s2(-1, 1)), "negative"}};
    out.push_back(r);
  }
  {
    Model m;
    m.In("A", kI64, {}).In("B", kI64, {}).In("D", kI64, {}).Out("Y", kI64, {-1});
    m.Node("Range", {"A", "B", "D"}, {"Y"});
    auto abd = [](int64_t a, int64_t b, int64_t d) {
      return std::vector<Feed>{{"A", Scalar(a)}, {"B", Scalar(b)}, {"D", Scalar(d)}};
    };
    RequestModel r{"req_range", m.Bytes(), abd(0, 5, 1), {}};
    r.bad = {{"(0,2^62,1)", abd(0, kBig, 1), "too large"},
             {"(min,max,1)", abd(kMin, kMax, 1), "too large"},
             {"(max,min,-1)", abd(kMax, kMin, -1), "too large"},
             {"(0,5,0)", abd(0, 5, 0), "delta"}};
    out.push_back(r);
  }
  {
    Model m;
    m.In("X", kF, {2, 2}).In("P", kI64, {4}).Out("Y", kF, {-1, -1});
    m.Node("Pad", {"X", "P"}, {"Y"});
    Feed x{"X", Floats({1, 2, 3, 4}, {2, 2})};
    auto p = [&](int64_t a, int64_t b, int64_t c, int64_t d) {
      return with_x(x, {{"P", Vec({a, b, c, d})}});
    };
    RequestModel r{"req_pad", m.Bytes(), p(1, 1, 1, 1), {}};
    r.bad = {{"[1e6,...]", p(1000000, 1000000, 1000000, 1000000), "memory"},
             {"[2^62,0,0,0]", p(kBig, 0, 0, 0), "too large"},
             {"[2^62,2^62,2^62,2^62]", p(kBig, kBig, kBig, kBig), "too large"},
             {"[min,0,0,0]", p(kMin, 0, 0, 0), "pad"}};
    out.push_back(r);
  }
  {
    Model m;
    m.In("X", kF, {1, 1, 2, 2}).In("Z", kI64, {4}).Out("Y", kF, {-1, -1, -1, -1});
    m.Node("Resize", {"X", "", "", "Z"}, {"Y"});
    Feed x{"X", Floats({1, 2, 3, 4}, {1, 1, 2, 2})};
    auto z = [&](int64_t a, int64_t b) { return with_x(x, {{"Z", Vec({1, 1, a, b})}}); };
    RequestModel r{"req_resize", m.Bytes(), z(4, 4), {}};
    r.bad = {{"[1,1,2^31,2^31]", z(int64_t{1} << 31, int64_t{1} << 31), "too large"},
             {"[1,1,2^62,2^62]", z(kBig, kBig), "too large"},
             {"[1,1,1e6,1e6]", z(1000000, 1000000), "memory"},
             {"[1,1,-4,4]", z(-4, 4), "output size"}};
    out.push_back(r);
  }
  return out;
}

std::string DynamicReluModel() {
  Model m;
  m.In("X", kF, {-1}).Out("Y", kF, {-1});
  m.Node("Relu", {"X"}, {"Y"});
  return m.Bytes();
}

}  // namespace kiln::hostile
