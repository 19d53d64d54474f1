// Chains of layers computed in channel blocks (Tensor::ToChannelBlocks,
// engine/tensor/tensor_blocked.cc) on the CPU.
//
// A value computed in blocks carries them in OnnxValue::blocked; its
// OnnxValue::tensor is a lazy NCHW copy, computed only if an op outside the
// chain reads it. The chain:
//   - starts at a 1x1 convolution (BlockablePointwise) whose NCHW kernel
//     would waste lanes (a small map: WastesLanes) or whose readers keep the
//     blocks (ChainContinues), its input copied into blocks once, or at an
//     image stem whose readers keep the blocks, written into blocks from
//     the image (the rules are in ops_nn.cc, ChannelBlockedConv);
//   - continues through the convolutions that read a blocked input (1x1,
//     depthwise, and dense ones unless most of their taps read padding;
//     ops_nn.cc), the elementwise ops of BlockedElementwise whose other
//     operands broadcast per channel or are whole maps
//     (SubstituteChannelBlocks), inference BatchNormalization
//     (ops_norm.cc), 2-D max and average pools and global ones (ops_nn.cc),
//     and concatenations along the channels (ConcatInBlocks);
//   - ends at any other op, which reads the NCHW copy.
// Every value keeps its NCHW meaning: only where it is stored changes.
#ifndef KILN_ENGINE_ONNX_CHANNEL_BLOCKS_H_
#define KILN_ENGINE_ONNX_CHANNEL_BLOCKS_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/onnx/graph_builder.h"
#include "engine/onnx/op_context.h"
#include "engine/tensor/tensor.h"

namespace kiln {

// The value of `channels` channels of a blocked tensor (N, CB, H, W, 16):
// `blocked` it, `tensor` its NCHW copy (a plain reshape when H = W = 1).
// Channels short of whole blocks are padded: the padded lanes hold finite
// values that no later layer reads (zero weights; a per-channel operand is
// padded with 1, a map with 0).
OnnxValue BlockedValue(const Tensor& blocked, int64_t channels);

// A chain's first input `x` (N, C, H, W) copied into blocks (N, C / 16, H,
// W, 16).
Tensor CopyIntoBlocks(const Tensor& x);

// Whether a convolution of an NCHW input of shape `x` by a weight of shape
// `w` is a 1x1 one a chain can start at (channels in multiples of the
// block, stride 1, no padding), and whether its map is one whose NCHW
// kernel wastes at least 1/10 of its lanes (7 x 7, 14 x 14) on rows the
// register tile divides.
bool BlockablePointwise(const Shape& x, const Shape& w, const Tensor::ConvOptions& o);
bool WastesLanes(const Shape& x);

// Whether every reader of `name` in `scope` (followed through the ops of
// BlockedElementwise, batch norms, pools and concatenations along the
// channels) keeps channel blocks of `channels` channels: a convolution of
// those channels that runs in blocks whose own readers do so in turn (one
// convolution deeper), or a global average or max pool. False for a graph
// output or unknown readers.
bool ChainContinues(const std::string& name, const Scope& scope, int64_t channels);

// The concatenation along the channels of `parts` in blocks, when some
// part is blocked and every part but the last has whole blocks: the parts
// not in blocks are copied in, when `continues()` (the result's readers
// keep the blocks) or none is. Otherwise nothing (the parts' NCHW values are
// concatenated).
std::optional<OnnxValue> ConcatInBlocks(const std::vector<const OnnxValue*>& parts,
                                        const std::function<bool()>& continues);

// A per-channel vector `v` (C) as an operand of blocks (1, C' / 16, 1, 1,
// 16), padded with `pad`.
Tensor PerChannelInBlocks(const Tensor& v, double pad);

// Whether `op_type` is an elementwise op that treats every element alike
// (no axis attribute), so that it can run on blocked operands.
bool BlockedElementwise(const std::string& op_type);

// When some input of elementwise op `op_type` is blocked and every other
// tensor input can be seen in the same blocks (broadcast per channel, a
// scalar, or a whole (N, C, H, W) map viewed in blocks), fills `out` with
// the inputs in blocks (pointers into `storage`), `channels` with the
// output's channel count, and returns true. Host inputs are uploaded with
// `engine` / `device`.
bool SubstituteChannelBlocks(const std::string& op_type,
                             const std::vector<const OnnxValue*>& inputs, Engine* engine,
                             const std::string& device, std::vector<OnnxValue>* storage,
                             std::vector<const OnnxValue*>* out, int64_t* channels);

}  // namespace kiln

#endif  // KILN_ENGINE_ONNX_CHANNEL_BLOCKS_H_
