// The captures of one input signature, as a tree of segments (internal to
// engine/jit; see jit.h for the contract).
//
// A recording is the ExecItems a function ran, split at every host read
// (CaptureScope): segment 0 runs up to the first read, segment 1 up to the
// second, and so on; the last segment ends with the outputs. What the host
// did after a read depended only on the bytes it read (and on the inputs'
// shapes, which the signature fixes), so a replay may continue past a read
// only if it reads the same bytes there. Recordings that agree up to a read
// share those segments: the tree branches at a read on the bytes read (a
// NonZero count, a TopK k, an NMS result), and a replay walks down it,
// reading at each branch point, until it reaches a leaf (a full replay) or a
// read whose bytes no branch has (a miss).
//
// A recording joins the tree when its shared segments ran the same kernels
// on buffers that correspond one to one; its own segments are re-pointed at
// the tree's buffers where they read what the shared ones wrote.
//
// Thread safety: none (a Jit serializes its calls).
#ifndef KILN_ENGINE_JIT_CAPTURE_H_
#define KILN_ENGINE_JIT_CAPTURE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/jit/parallel.h"
#include "engine/realize/engine.h"
#include "engine/tensor/tensor.h"

namespace kiln::jit_internal {

struct Slot {
  size_t item;
  size_t pos;
};

// One output of a leaf.
struct Output {
  Shape shape;
  DType dtype;
  size_t nbytes = 0;
  int alias_input = -1;     // the caller's input itself
  int same_as = -1;         // an earlier output
  std::vector<Slot> slots;  // written by the leaf's own kernels: a fresh buffer per replay
  BufferRef copy_from;      // else: copied out of this buffer per replay
};

struct Node {
  std::vector<ExecItem> items;           // input slots hold null buffers
  std::vector<std::vector<void*>> ptrs;  // device pointers per item, patched per replay
  std::vector<std::vector<Slot>> inputs;  // per call input: its slots in `items`
  double flops = 0, bytes = 0;
  // A branch point: the read that ends this node and the nodes after it,
  // by the bytes read. A leaf has no read and has outputs.
  struct Read {
    int input = -1;    // reads the caller's input, or else
    BufferRef buffer;  // this buffer
    size_t nbytes = 0;
  };
  std::optional<Read> read;
  std::map<std::string, std::unique_ptr<Node>> next;
  std::vector<Output> outputs;
  // CUDA graphs etc. for a tree that is a single leaf.
  std::unique_ptr<GraphExecutor> graph;
  std::vector<std::vector<void*>> graph_ptrs;
  // Whether the items run side by side (parallel.h), for the device's
  // worker count it was made for; made at the first replay.
  std::unique_ptr<ParallelPlan> plan;
};

// What one call ran, as recorded (before it joins a tree).
struct Recording {
  std::vector<ExecItem> items;
  std::vector<HostRead> reads;
};

class CaptureTree {
 public:
  CaptureTree(Engine* engine, std::string device) : engine_(engine), device_(std::move(device)) {}

  bool empty() const { return root_ == nullptr; }
  size_t leaves() const { return leaves_; }
  size_t nodes() const { return nodes_; }
  // Device bytes the tree keeps alive for its replays: every buffer its
  // kernels write, its outputs are copied from, or its reads read (each
  // once). Inputs and the weights the kernels only read are not counted.
  size_t held_bytes() const;

  // Adds a recording of a call with these inputs (their buffers) and
  // (realized) outputs. Fails, leaving the tree as it was, when the
  // recording cannot be matched with the segments it should share. An
  // output whose buffer the tree keeps (replays rewrite it) is replaced by
  // a copy in *outputs.
  absl::Status Add(Recording rec, const std::vector<BufferRef>& in_bufs,
                   std::vector<Tensor>* outputs, bool use_graphs);

  struct Replayed {
    bool hit = false;  // false: a read found no branch (outputs empty)
    bool parallel = false;  // some segment's kernels ran side by side
    std::vector<Tensor> outputs;
    size_t kernels = 0;
    double flops = 0, bytes = 0;
  };
  absl::StatusOr<Replayed> Replay(const std::vector<Tensor>& inputs,
                                  const std::vector<BufferRef>& in_bufs);

 private:
  Engine* engine_;
  std::string device_;
  std::unique_ptr<Node> root_;
  size_t leaves_ = 0, nodes_ = 0;
};

}  // namespace kiln::jit_internal

#endif  // KILN_ENGINE_JIT_CAPTURE_H_
