// The shared-memory part of infer_codec.h: the tensor parameters of
// Triton's system shared-memory extension, reading inputs from and writing
// outputs to registered regions.
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/base/status.h"
#include "server/echo.h"
#include "server/infer_codec.h"

namespace kiln {
namespace {

absl::Status Bad(const std::string& msg) { return absl::InvalidArgumentError(msg); }

// A non-negative integer parameter.
absl::StatusOr<uint64_t> Size(const inference::InferParameter& p, const std::string& what,
                              const char* name) {
  if (p.parameter_choice_case() == inference::InferParameter::kInt64Param) {
    if (p.int64_param() < 0) return Bad(absl::StrCat(what, ": parameter '", name, "' is negative"));
    return static_cast<uint64_t>(p.int64_param());
  }
  if (p.parameter_choice_case() == inference::InferParameter::kUint64Param)
    return p.uint64_param();
  return Bad(absl::StrCat(what, ": parameter '", name, "' must be an integer"));
}

absl::Status Disabled(const std::string& what, const std::string& region) {
  return absl::FailedPreconditionError(
      absl::StrCat(what, " names shared-memory region '", Echo(region),
                   "', but system shared memory is disabled (kilnd --shm-allow)"));
}

// The region of `ref`, NOT_FOUND naming the tensor when unknown.
absl::StatusOr<std::shared_ptr<const ShmRegion>> RegionOf(const ShmRegistry* shm,
                                                          const ShmRef& ref,
                                                          const std::string& what) {
  if (shm == nullptr || !shm->enabled()) return Disabled(what, ref.region);
  absl::StatusOr<std::shared_ptr<const ShmRegion>> r = shm->Get(ref.region);
  if (!r.ok())
    return absl::NotFoundError(absl::StrCat(what, ": no shared-memory region '",
                                            Echo(ref.region), "' is registered"));
  if (!(*r)->Contains(ref.offset, ref.byte_size))
    return Bad(absl::StrCat(what, ": shared_memory_offset ", ref.offset,
                            " + shared_memory_byte_size ", ref.byte_size,
                            " is outside region '", Echo(ref.region), "' (",
                            (*r)->info().byte_size, " bytes)"));
  return r;
}

}  // namespace

absl::StatusOr<std::optional<ShmRef>> ShmRefOf(
    const google::protobuf::Map<std::string, inference::InferParameter>& params,
    const std::string& what) {
  auto region = params.find(kShmRegionParam);
  auto size = params.find(kShmByteSizeParam);
  auto offset = params.find(kShmOffsetParam);
  if (region == params.end() && size == params.end() && offset == params.end())
    return std::optional<ShmRef>();
  if (region == params.end() || size == params.end())
    return Bad(absl::StrCat(what, ": shared memory needs both '", kShmRegionParam, "' and '",
                            kShmByteSizeParam, "'"));
  if (region->second.parameter_choice_case() != inference::InferParameter::kStringParam ||
      region->second.string_param().empty())
    return Bad(absl::StrCat(what, ": parameter '", kShmRegionParam,
                            "' must be a non-empty string"));
  ShmRef ref;
  ref.region = region->second.string_param();
  ASSIGN_OR_RETURN(ref.byte_size, Size(size->second, what, kShmByteSizeParam));
  if (offset != params.end()) {
    ASSIGN_OR_RETURN(ref.offset, Size(offset->second, what, kShmOffsetParam));
  }
  return std::optional<ShmRef>(std::move(ref));
}

absl::Status ReadShmInput(const ShmRegistry* shm, const ShmRef& ref, const std::string& input,
                          int64_t nbytes, std::string* out) {
  const std::string what = absl::StrCat("input '", Echo(input), "'");
  if (nbytes < 0 || ref.byte_size != static_cast<uint64_t>(nbytes))
    return Bad(absl::StrCat(what, ": shared_memory_byte_size ", ref.byte_size,
                            " does not match the tensor's ", nbytes,
                            " bytes (its shape and datatype)"));
  ASSIGN_OR_RETURN(std::shared_ptr<const ShmRegion> region, RegionOf(shm, ref, what));
  out->resize(static_cast<size_t>(nbytes));  // nbytes is bounded by the caller's limit
  absl::Status s = region->Read(ref.offset, ref.byte_size, out->data());
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  return absl::OkStatus();
}

absl::StatusOr<ShmOutputSlot> ResolveShmOutput(const ShmRegistry* shm, const ShmRef& ref,
                                               const std::string& output) {
  const std::string what = absl::StrCat("output '", Echo(output), "'");
  ASSIGN_OR_RETURN(std::shared_ptr<const ShmRegion> region, RegionOf(shm, ref, what));
  ShmOutputSlot slot;
  slot.output = output;
  slot.region = std::move(region);
  slot.offset = ref.offset;
  slot.byte_size = ref.byte_size;
  return slot;
}

absl::Status WriteShmOutputs(const std::vector<ShmOutputSlot>& slots, InferResult* result) {
  for (const ShmOutputSlot& slot : slots) {
    for (OutputTensor& o : result->outputs) {
      if (o.name != slot.output) continue;
      if (o.data.size() > slot.byte_size)
        return Bad(absl::StrCat("output '", Echo(o.name), "' has ", o.data.size(),
                                " bytes; its shared-memory slice of region '",
                                Echo(slot.region->info().name), "' holds ", slot.byte_size,
                                " (shared_memory_byte_size)"));
      absl::Status s = slot.region->Write(slot.offset, o.data);
      if (!s.ok())
        return absl::Status(s.code(), absl::StrCat("output '", Echo(o.name), "': ", s.message()));
      std::string().swap(o.data);
    }
  }
  return absl::OkStatus();
}

void SetShmOutputParameters(const inference::ModelInferRequest& req,
                            inference::ModelInferResponse* resp) {
  for (const auto& asked : req.outputs()) {
    if (!asked.parameters().count(kShmRegionParam)) continue;
    for (auto& out : *resp->mutable_outputs()) {
      if (out.name() != asked.name()) continue;
      auto* params = out.mutable_parameters();
      for (const char* key : {kShmRegionParam, kShmOffsetParam, kShmByteSizeParam}) {
        auto it = asked.parameters().find(key);
        if (it != asked.parameters().end()) (*params)[key] = it->second;
      }
    }
  }
}

}  // namespace kiln
