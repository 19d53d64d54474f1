#include "server/memory_limit.h"

#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(MemoryLimitTest, ParsesCgroupFiles) {
  EXPECT_EQ(ParseCgroupMemoryLimit("max\n"), 0u);  // v2, no limit
  EXPECT_EQ(ParseCgroupMemoryLimit("536870912\n"), 536870912u);
  EXPECT_EQ(ParseCgroupMemoryLimit("9223372036854771712\n"), 0u);  // v1, no limit
  EXPECT_EQ(ParseCgroupMemoryLimit(""), 0u);                       // no such file
  EXPECT_EQ(ParseCgroupMemoryLimit("12abc"), 0u);
}

TEST(MemoryLimitTest, DefaultIsEightyPercentOfTheMachine) {
  EXPECT_EQ(DefaultMemoryLimit({1000, "physical RAM"}), 800u);
  EXPECT_EQ(DefaultMemoryLimit({0, ""}), 0u);  // unknown: no limit
  MachineMemory here = MachineMemoryBytes();
  EXPECT_GT(here.bytes, 0u);
  EXPECT_FALSE(here.source.empty());
  EXPECT_GT(DefaultMemoryLimit(here), 0u);
  EXPECT_LT(DefaultMemoryLimit(here), here.bytes);
}

}  // namespace
}  // namespace kiln
