#include "engine/codegen/cpu_tiles.h"

#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(CpuTilesTest, PaddedTileWastesLittle) {
  EXPECT_EQ(PaddedTile(289), 8);   // 17 x 17 -> 296
  EXPECT_EQ(PaddedTile(17), 6);    // -> 18: 8 and 7 waste more than 1/16
  EXPECT_EQ(PaddedTile(73), 7);    // -> 77 (8 wastes 7)
  EXPECT_EQ(PaddedTile(7), 0);     // no longer than the tile
  EXPECT_EQ(PaddedTile(9), 5);     // -> 10: the least waste, within 1/8
  EXPECT_EQ(PaddedTile(10, 7, 8), 0);  // 14 or 16: over 1/8
  EXPECT_EQ(PaddedTile(73, 3, 3, true), 3);  // -> 75
  EXPECT_EQ(PaddedTile(14, 3, 5, true), 0);  // 15 wastes over 1/16
}

// 80 channels (5 blocks) on 73-pixel rows: 3 pixels (padded to 75) x 5
// blocks; 48 (3 blocks) on 35: 5 x 3; 63 blocks (1000 classes) on 169
// pixels: 5 x 3 (170). Even counts, and rows no tile of 3+ fits well (14,
// 7), have none: the 2-block tile (or 1) stays.
TEST(CpuTilesTest, OddBlocksTileWithFewerRows) {
  auto expect = [](int64_t nb, int64_t n, BlockTile want) {
    BlockTile t = OddBlockTile(nb, n, 16);
    EXPECT_EQ(t.blocks, want.blocks) << nb << " blocks, " << n << " px";
    EXPECT_EQ(t.rows, want.rows) << nb << " blocks, " << n << " px";
    EXPECT_EQ(t.padded, want.padded) << nb << " blocks, " << n << " px";
  };
  expect(5, 73, {5, 3, 75});
  expect(3, 35, {3, 5, 35});
  expect(63, 169, {3, 5, 170});
  expect(15, 56, {5, 3, 57});
  expect(3, 56, {3, 4, 56});
  expect(4, 35, {});
  expect(3, 14, {});
  expect(3, 7, {});
  expect(7, 49, {});
}

}  // namespace
}  // namespace kiln
