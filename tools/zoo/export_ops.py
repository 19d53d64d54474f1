#!/usr/bin/python3
"""Exports kiln's operation zoo: one small ONNX graph per operation the model zoo exposed.

  /usr/bin/python3 tools/zoo/export_ops.py OUT_DIR [--only NAME,...] [--prefix STR]

Same layout, manifest and reference as the model zoo (tools/zoo/export_zoo.py, whose export
machinery this reuses): tools/fetch_testdata runs it into $KILN_DATA/ops, then
tools/zoo/zoo_reference.js writes onnxruntime's outputs and OUT_DIR/manifest.tsv.
`tools/bench ops` times each graph in kiln and onnxruntime in the same run (kernel-level lines
`op_<name>_b<batch>_t<threads>_ratio`), and //tests/zoo:ops_test checks kiln's outputs.

Each graph is one operation (or one fused group: a matmul with its epilogue), opset 17, batch
axis dynamic, batches 1 and 8, seeded random weights and inputs. The shapes are ones the zoo's
models run:

  name                  what                                            like
  embedding             Gather of 128 rows of a 30522 x 256 table      BERT's token embedding
  attention             softmax(q k^T / 8) v, 4 heads, seq 128, d 64   BERT / GPT self-attention
  linear_gelu           Linear 256 -> 1024, then GELU (Erf)            a transformer's MLP
  linear_add_layernorm  Linear 1024 -> 256, + residual, LayerNorm     a transformer block's end
  concat_slice_transpose  cat of two 64 x 56 x 56 maps, channels 32..95, to NHWC   views
  maxpool_3x3_s2        MaxPool 3x3 stride 2 on 64 x 112 x 112          ResNet's stem pool
  avgpool_3x3_s1        AveragePool 3x3 stride 1 on 192 x 28 x 28       Inception's branches
  global_avgpool        mean over 7 x 7 of 1280 channels                classifier heads
  conv3x3_dilated2      3x3 dilation 2, 256 -> 256 on 28 x 28          DeepLab's ASPP
  dwconv3x3_dilated2    depthwise 3x3 dilation 2, 960 ch on 16 x 16    DeepLabV3-MobileNetV3
  conv1x1_7x7           1x1, 320 -> 1280 on 7 x 7                       MnasNet / EfficientNet head
  conv3x3_56            3x3, 64 -> 64 on 56 x 56                        ResNet-18 stage 1
  conv7x7_s2_stem       7x7 stride 2, 3 -> 64 on 224 x 224              ResNet / DenseNet stem
  dwconv3x3_56          depthwise 3x3, 144 ch on 56 x 56                MobileNetV2
  dwconv3x3_s2          depthwise 3x3 stride 2, 96 ch on 112 x 112      MobileNetV2
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_zoo import export_all  # noqa: E402  (the export machinery)
from zoo_common import Spec, seed_of  # noqa: E402

OPS = []
BATCHES = (1, 8)


class Attention(nn.Module):
    def forward(self, q, k, v):
        return torch.softmax(q @ k.transpose(-1, -2) * 0.125, dim=-1) @ v


class LinearGelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 1024)

    def forward(self, x):
        return F.gelu(self.fc(x))


class LinearAddLayerNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(1024, 256)
        self.norm = nn.LayerNorm(256)

    def forward(self, x, residual):
        return self.norm(self.fc(x) + residual)


class ConcatSliceTranspose(nn.Module):
    def forward(self, a, b):
        return torch.cat([a, b], dim=1)[:, 32:96].permute(0, 2, 3, 1)


class Lambda(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def op(name, build, shapes, dtype="float32", high=None):
    """One operation graph: build() -> module; shapes: the inputs' shapes without the batch axis
    (input names x, or in0, in1, ... for several); int64 inputs draw from [0, high)."""
    names = ["x"] if len(shapes) == 1 else [f"in{i}" for i in range(len(shapes))]

    def make_build():
        torch.manual_seed(seed_of(name))
        m = build()
        with torch.no_grad():  # biases and norms off their zero / one defaults
            for p in m.parameters():
                if p.dim() == 1:
                    p.uniform_(-0.5, 0.5)
        return m.eval()

    def inputs(model):
        rng = np.random.default_rng(seed_of(name, "inputs"))
        out = {}
        for b in BATCHES:
            arrays = []
            for s in shapes:
                if dtype == "int64":
                    arrays.append(rng.integers(0, high, size=(b,) + s).astype(np.int64))
                else:
                    arrays.append(rng.standard_normal((b,) + s).astype(np.float32))
            out[b] = arrays
        return out

    axes = {n: {0: "batch"} for n in names + ["y"]}
    OPS.append(Spec(name, "op", make_build, inputs, names, ["y"], axes, opsets=(17,),
                    atol=1e-4, rtol=1e-3))


op("embedding", lambda: nn.Embedding(30522, 256), [(128,)], dtype="int64", high=30522)
op("attention", Attention, [(4, 128, 64)] * 3)
op("linear_gelu", LinearGelu, [(128, 256)])
op("linear_add_layernorm", LinearAddLayerNorm, [(128, 1024), (128, 256)])
op("concat_slice_transpose", ConcatSliceTranspose, [(64, 56, 56)] * 2)
op("maxpool_3x3_s2", lambda: nn.MaxPool2d(3, 2, 1), [(64, 112, 112)])
op("avgpool_3x3_s1", lambda: nn.AvgPool2d(3, 1, 1, count_include_pad=False), [(192, 28, 28)])
op("global_avgpool", lambda: nn.AdaptiveAvgPool2d(1), [(1280, 7, 7)])
op("conv3x3_dilated2", lambda: nn.Conv2d(256, 256, 3, padding=2, dilation=2), [(256, 28, 28)])
op("dwconv3x3_dilated2", lambda: nn.Conv2d(960, 960, 3, padding=2, dilation=2, groups=960),
   [(960, 16, 16)])
op("conv1x1_7x7", lambda: nn.Conv2d(320, 1280, 1), [(320, 7, 7)])
op("conv3x3_56", lambda: nn.Conv2d(64, 64, 3, padding=1), [(64, 56, 56)])
op("conv7x7_s2_stem", lambda: nn.Conv2d(3, 64, 7, 2, 3), [(3, 224, 224)])
op("dwconv3x3_56", lambda: nn.Conv2d(144, 144, 3, padding=1, groups=144), [(144, 56, 56)])
op("dwconv3x3_s2", lambda: nn.Conv2d(96, 96, 3, 2, 1, groups=96), [(96, 112, 112)])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--only", help="comma-separated operation names")
    ap.add_argument("--prefix", default="ops: ", help="prefix of the progress lines")
    args = ap.parse_args()
    export_all(OPS, args.out_dir, args.only, True, args.prefix, "operations")


if __name__ == "__main__":
    main()
