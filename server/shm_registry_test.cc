#include "server/shm_registry.h"

#include <cstring>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/testing/shm_object.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using testing::ShmObject;

ShmRegistry Allowing(std::vector<std::string> prefixes, int max_regions = 64) {
  ShmRegistryOptions o;
  o.allowed_prefixes = std::move(prefixes);
  o.max_regions = max_regions;
  return ShmRegistry(o);
}

TEST(ShmRegistryTest, DisabledByDefault) {
  ShmObject obj("kiln_t_", 4096);
  ASSERT_TRUE(obj.ok()) << obj.error();
  ShmRegistry reg{ShmRegistryOptions{}};
  EXPECT_FALSE(reg.enabled());
  absl::Status s = reg.Register("r", obj.key(), 0, 64);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("--shm-allow"));
  EXPECT_EQ(reg.size(), 0u);
}

TEST(ShmRegistryTest, OnlyAllowedKeys) {
  ShmObject obj("kiln_t_", 4096);
  ASSERT_TRUE(obj.ok()) << obj.error();
  ShmRegistry reg = Allowing({"/other_", "/kiln_x"});
  absl::Status s = reg.Register("r", obj.key(), 0, 64);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("not allowed"));
  ShmRegistry any = Allowing({"/"});
  EXPECT_TRUE(any.Register("r", obj.key(), 0, 64).ok());
}

TEST(ShmRegistryTest, RefusesMalformedKeysAndNames) {
  ShmRegistry reg = Allowing({"/"});
  for (const std::string& key : {std::string("kiln"), std::string("/"), std::string("/a/b"),
                                std::string("/.."), std::string("/a\0b", 4),
                                "/" + std::string(300, 'k')})
    EXPECT_EQ(reg.Register("r", key, 0, 8).code(), absl::StatusCode::kInvalidArgument) << key;
  EXPECT_EQ(reg.Register("", "/kiln_x", 0, 8).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.Register(std::string(kMaxShmNameBytes + 1, 'n'), "/kiln_x", 0, 8).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckShmKey("/", /*prefix=*/true).ok());
  EXPECT_FALSE(CheckShmKey("kiln_", /*prefix=*/true).ok());
}

TEST(ShmRegistryTest, UnknownObjectIsNotFound) {
  ShmRegistry reg = Allowing({"/kiln_"});
  absl::Status s = reg.Register("r", "/kiln_no_such_object_for_this_test", 0, 8);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
}

TEST(ShmRegistryTest, BoundsAndOverflow) {
  ShmObject obj("kiln_t_", 8192);
  ASSERT_TRUE(obj.ok()) << obj.error();
  ShmRegistry reg = Allowing({"/kiln_"});
  EXPECT_EQ(reg.Register("r", obj.key(), 0, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.Register("r", obj.key(), 0, 8193).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.Register("r", obj.key(), 8000, 193).code(), absl::StatusCode::kInvalidArgument);
  absl::Status s = reg.Register("r", obj.key(), std::numeric_limits<uint64_t>::max() - 1, 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("overflows"));
  EXPECT_EQ(reg.Register("r", obj.key(), uint64_t{1} << 63, 4).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(reg.Register("r", obj.key(), 8000, 192).ok());

  ShmObject empty("kiln_t_", 0);
  EXPECT_EQ(reg.Register("e", empty.key(), 0, 1).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShmRegistryTest, DuplicateNamesAndCountLimit) {
  ShmObject obj("kiln_t_", 4096);
  ASSERT_TRUE(obj.ok()) << obj.error();
  ShmRegistry reg = Allowing({"/kiln_"}, 2);
  ASSERT_TRUE(reg.Register("a", obj.key(), 0, 16).ok());
  EXPECT_EQ(reg.Register("a", obj.key(), 16, 16).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(reg.Register("b", obj.key(), 16, 16).ok());
  absl::Status s = reg.Register("c", obj.key(), 32, 16);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("--shm-max-regions"));
  ASSERT_TRUE(reg.Unregister("a").ok());
  EXPECT_TRUE(reg.Register("c", obj.key(), 32, 16).ok());
}

TEST(ShmRegistryTest, StatusAndUnregister) {
  ShmObject obj("kiln_t_", 4096);
  ASSERT_TRUE(obj.ok()) << obj.error();
  ShmRegistry reg = Allowing({"/kiln_"});
  ASSERT_TRUE(reg.Register("b", obj.key(), 100, 200).ok());
  ASSERT_TRUE(reg.Register("a", obj.key(), 0, 100).ok());
  auto all = reg.Status("");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "a");
  EXPECT_EQ((*all)[1].key, obj.key());
  EXPECT_EQ((*all)[1].offset, 100u);
  EXPECT_EQ((*all)[1].byte_size, 200u);
  EXPECT_EQ(reg.Status("zz").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(reg.Unregister("zz").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(reg.Get("zz").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(reg.Unregister("").ok());
  EXPECT_EQ(reg.size(), 0u);
}

TEST(ShmRegistryTest, ReadsAndWritesAtAnUnalignedOffset) {
  ShmObject obj("kiln_t_", 3 * 4096);
  ASSERT_TRUE(obj.ok()) << obj.error();
  ShmRegistry reg = Allowing({"/kiln_"});
  ASSERT_TRUE(reg.Register("r", obj.key(), 5000, 100).ok());
  std::memcpy(obj.data() + 5000 + 10, "hello", 5);
  auto region = reg.Get("r");
  ASSERT_TRUE(region.ok()) << region.status();
  char buf[5];
  ASSERT_TRUE((*region)->Read(10, 5, buf).ok());
  EXPECT_EQ(std::string(buf, 5), "hello");
  ASSERT_TRUE((*region)->Write(95, "world").ok());
  EXPECT_EQ(std::string(obj.data() + 5095, 5), "world");
  EXPECT_EQ((*region)->Write(96, "world").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*region)->Read(std::numeric_limits<uint64_t>::max(), 2, buf).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE((*region)->Contains(50, std::numeric_limits<uint64_t>::max()));
}

TEST(ShmRegistryTest, UnregisterWhileInUseKeepsTheMapping) {
  auto obj = std::make_unique<ShmObject>("kiln_t_", 4096);
  ASSERT_TRUE(obj->ok()) << obj->error();
  ShmRegistry reg = Allowing({"/kiln_"});
  ASSERT_TRUE(reg.Register("r", obj->key(), 0, 4096).ok());
  std::memcpy(obj->data(), "still here", 10);
  auto held = reg.Get("r");  // a request in flight
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_TRUE(reg.Unregister("r").ok());
  EXPECT_EQ(reg.Get("r").status().code(), absl::StatusCode::kNotFound);
  obj.reset();  // the client unmaps and unlinks its object too
  char buf[10];
  ASSERT_TRUE((*held)->Read(0, 10, buf).ok());
  EXPECT_EQ(std::string(buf, 10), "still here");
  EXPECT_TRUE((*held)->Write(100, "out").ok());
  // The name is free again while the old mapping lives on.
  ShmObject again("kiln_t_", 4096);
  EXPECT_TRUE(reg.Register("r", again.key(), 0, 16).ok());
}

TEST(ShmRegistryTest, AShrunkObjectFailsTheCopyInsteadOfKillingTheProcess) {
  ShmObject obj("kiln_t_", 4 * 4096);
  ASSERT_TRUE(obj.ok()) << obj.error();
  ShmRegistry reg = Allowing({"/kiln_"});
  ASSERT_TRUE(reg.Register("r", obj.key(), 0, 4 * 4096).ok());
  auto region = reg.Get("r");
  ASSERT_TRUE(region.ok()) << region.status();
  ASSERT_TRUE(obj.Truncate(0));
  std::string buf(4 * 4096, '\0');
  absl::Status s = (*region)->Read(0, buf.size(), buf.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("shrank"));
  EXPECT_EQ((*region)->Write(8192, "x").code(), absl::StatusCode::kFailedPrecondition);
  // The guard is per copy: the next one (after the client restores the size) works.
  ASSERT_TRUE(obj.Truncate(4 * 4096));
  EXPECT_TRUE((*region)->Write(8192, "x").ok());
}

}  // namespace
}  // namespace kiln
