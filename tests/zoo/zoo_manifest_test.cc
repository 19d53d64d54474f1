#include "tests/zoo/zoo_manifest.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/zoo/zoo_check.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

TEST(ZooManifestTest, ParsesCases) {
  auto cases = ParseZooManifest(
      "# name\tfamily\n"
      "resnet18\tcnn\t17\t8\tresnet18/op17.onnx\targmax:0\t0.0001\t0.001\t"
      "input=resnet18/b8/input.npy\tlogits=resnet18/b8/op13_logits.npy\t157.12\n"
      "ssd\tdetection\t13\t1\tssd/op13.onnx\tdetection:0\t1e-4\t1e-3\ti=a.npy\t"
      "boxes=b.npy,scores=s.npy,labels=l.npy\t18\n");
  ASSERT_TRUE(cases.ok()) << cases.status();
  ASSERT_EQ(cases->size(), 2u);
  const ZooCase& r = (*cases)[0];
  EXPECT_EQ(r.Id(), "resnet18_op17_b8");
  EXPECT_EQ(r.family, "cnn");
  EXPECT_EQ(r.checks, (std::vector<std::pair<std::string, int>>{{"argmax", 0}}));
  EXPECT_DOUBLE_EQ(r.atol, 1e-4);
  EXPECT_EQ(r.inputs[0].second, "resnet18/b8/input.npy");
  EXPECT_EQ((*cases)[1].outputs.size(), 3u);
  EXPECT_EQ((*cases)[1].outputs[2].first, "labels");
}

TEST(ZooManifestTest, RejectsMalformedLines) {
  EXPECT_THAT(ParseZooManifest("a\tb\n").status().message(), HasSubstr("2 fields"));
  EXPECT_THAT(ParseZooManifest("a\tcnn\tx\t1\tm\t-\t1\t1\ti=p\to=q\t1\n").status().message(),
              HasSubstr("bad number"));
  EXPECT_THAT(ParseZooManifest("a\tcnn\t13\t1\tm\tsoftmax:0\t1\t1\ti=p\to=q\t1\n")
                  .status()
                  .message(),
              HasSubstr("bad check"));
  EXPECT_THAT(ParseZooManifest("a\tcnn\t13\t1\tm\t-\t1\t1\ti\to=q\t1\n").status().message(),
              HasSubstr("name=path"));
}

TEST(ZooCheckTest, ToleranceArgmaxAndDegenerateReferences) {
  CompareResult r;
  ZooValues want{{2, 3}, {0, 1, 2, 5, 4, 3}};
  ZooValues close{{2, 3}, {0, 1.00005, 2, 5, 4, 3}};
  EXPECT_TRUE(CompareOutput("x", close, want, 1e-4, 0, true, &r).ok());
  EXPECT_NEAR(r.max_abs_err, 5e-5, 1e-12);
  ZooValues far{{2, 3}, {0, 1.1, 2, 5, 4, 3}};
  EXPECT_THAT(CompareOutput("x", far, want, 1e-4, 0, false, &r).message(),
              HasSubstr("1 of 6 values out of tolerance"));
  ZooValues swapped{{2, 3}, {0, 1, 2, 4, 5, 3}};  // row 1's argmax moves
  EXPECT_THAT(CompareOutput("x", swapped, want, 2, 0, true, &r).message(),
              HasSubstr("argmax differs in 1 of 2 rows"));
  EXPECT_THAT(CompareOutput("x", ZooValues{{3}, {0, 0, 0}}, want, 1, 1, false, &r).message(),
              HasSubstr("shape"));
  EXPECT_THAT(CompareOutput("x", ZooValues{{3}, {7, 7, 7}}, ZooValues{{3}, {7, 7, 7}}, 1, 1, false, &r)
                  .message(),
              HasSubstr("degenerate"));
  double nan = std::nan("");
  EXPECT_FALSE(CompareOutput("x", ZooValues{{2}, {nan, 1}}, ZooValues{{2}, {0, 1}}, 1, 1, false, &r).ok());
  EXPECT_TRUE(CompareOutput("x", ZooValues{{2}, {nan, 1}}, ZooValues{{2}, {nan, 1}}, 0, 0, false, &r).ok());
}

}  // namespace
}  // namespace kiln
