#!/usr/bin/python3
"""Exports kiln's model zoo: torchvision / torch models with seeded random weights, as ONNX.

  /usr/bin/python3 tools/zoo/export_zoo.py OUT_DIR [--only NAME,...] [--inline] [--prefix STR]

tools/fetch_testdata runs it into $KILN_DATA/zoo, then tools/zoo/zoo_reference.js, which runs
onnxruntime on the same inputs, writes onnxruntime's outputs (the reference) and
OUT_DIR/manifest.tsv, and fails when onnxruntime and torch disagree beyond a case's tolerance.
Needs Debian's python3-torch 1.13.1, python3-torchvision 0.14.1 and python3-onnx 1.12, which only
/usr/bin/python3 sees (libopenblas0-pthread makes torch's Linear layers ~7x faster). Nothing is
downloaded: every model is built with weights=None / weights_backbone=None and initialised from a
per-model seed. About 5 minutes of CPU here, then ~2 for onnxruntime; 1.6 GB.

Layout of OUT_DIR (every path in the manifest is relative to OUT_DIR):
  NAME/op13.onnx, NAME/op17.onnx   one graph per model and opset (op15.onnx for the R-CNNs); the
                                   batch axis is dynamic, so the b1 and b8 cases share the file
                                   (plus the sequence / time / image axes the notes name)
  NAME/weights.bin                 the weights of all of NAME's graphs as ONNX external data
                                   (location "weights.bin", offset, length; 64-byte aligned;
                                   tensors under 1 KiB stay inline). The op13 and op17 graphs hold
                                   the same weights byte for byte, so sharing them halves the zoo
                                   (3 GB otherwise). --inline writes self-contained files instead.
  NAME/bB/INPUT.npy                the inputs of the batch-B cases, shared by the opsets
  NAME/bB/opN_OUTPUT.npy           onnxruntime's outputs (zoo_reference.js); when opset 17's
                                   output equals opset 13's byte for byte, the manifest names the
                                   op13 file for both
  gpt_decoder/past_opN.onnx, gpt_decoder/gpt_decoder_past_bB/
                                   gpt_decoder_past shares gpt_decoder's directory and weights
  cases.json, compare.tsv          what zoo_reference.js runs; torch vs onnxruntime per case
  .torch/                          torch's outputs, deleted once zoo_reference.js compared them

The zoo. Opsets 13 and 17, batches 1 and 8 unless stated. Checks on top of the elementwise
tolerance: argmax = argmax:0 (the logits are output 0), detect = detection:0 (boxes are output 0).
vs torch = the largest |onnxruntime - torch| over the model's outputs and cases; needs = the
smallest atol with which every element passes at rtol 1e-3; atol = the manifest's atol, about 10x
"needs" and never below 1e-4 (rtol is 1e-3 everywhere). Measured here, Debian 12, x86-64 AVX-512.

  name                                  family       opset inputs: b1/b8           check  vs torch needs   atol
  resnet18                              cnn          13,17 1x3x224x224/8x3x224x224 argmax 1.7e-05  5.4e-06 1e-4
  resnet50                              cnn          13,17 1x3x224x224/8x3x224x224 argmax 5.2e-05  2.9e-05 3e-4
  wide_resnet14_2                       cnn          13,17 1x3x224x224/8x3x224x224 argmax 1.1e-05  4.6e-06 1e-4
  mobilenet_v2                          cnn          13,17 1x3x224x224/8x3x224x224 argmax 1.3e-04  8.3e-05 1e-3
  mobilenet_v3_small                    cnn          13,17 1x3x224x224/8x3x224x224 argmax 1.7e-05  2.0e-06 1e-4
  mobilenet_v3_large                    cnn          13,17 1x3x224x224/8x3x224x224 argmax 3.1e-05  1.7e-05 2e-4
  efficientnet_b0                       cnn          13,17 1x3x224x224/8x3x224x224 argmax 6.4e-05  1.7e-05 2e-4
  densenet121                           cnn          13,17 1x3x224x224/8x3x224x224 argmax 7.3e-06  2.6e-06 1e-4
  regnet_y_400mf                        cnn          13,17 1x3x224x224/8x3x224x224 argmax 8.6e-05  2.6e-05 3e-4
  convnext_tiny                         cnn          13,17 1x3x224x224/8x3x224x224 argmax 3.1e-06  0       1e-4
  shufflenet_v2_x1_0                    cnn          13,17 1x3x224x224/8x3x224x224 argmax 1.0e-04  9.0e-05 1e-3
  squeezenet1_1                         cnn          13,17 1x3x224x224/8x3x224x224 argmax 2.4e-07  8.1e-10 1e-4
  mnasnet1_0                            cnn          13,17 1x3x224x224/8x3x224x224 argmax 1.2e-04  8.5e-05 1e-3
  googlenet                             cnn          13,17 1x3x224x224/8x3x224x224 argmax 2.7e-05  1.5e-05 2e-4
  inception_v3                          cnn          13,17 1x3x299x299/8x3x299x299 argmax 9.1e-05  4.8e-05 5e-4
  vit_b_32_small                        vit          13,17 1x3x224x224/8x3x224x224 argmax 5.0e-06  5.5e-07 1e-4
  swin_t                                vit          13,17 1x3x224x224/8x3x224x224 argmax 2.3e-06  5.3e-07 1e-4
  fcn_resnet50                          segmentation 13,17 1x3x224x224/8x3x112x112 -      1.1e-04  8.1e-05 1e-3
  deeplabv3_mobilenet_v3_large          segmentation 13,17 1x3x256x256/8x3x128x128 -      4.2e-05  2.6e-05 3e-4
  lraspp_mobilenet_v3_large             segmentation 13,17 1x3x256x256/8x3x128x128 -      2.1e-05  1.5e-05 2e-4
  ssdlite320_mobilenet_v3_large         detection    13,17 3x256x320               detect 1.2e-03  0       1e-4
  retinanet_resnet50_fpn                detection    13,17 3x256x320               detect 1.1e-04  0       1e-4
  fasterrcnn_mobilenet_v3_large_320_fpn detection    15    3x256x320               detect 2.1e-02  0       1e-4
  maskrcnn_mobilenet_v3_large_320_fpn   detection    15    3x256x320               detect 1.5e-02  2.6e-04 3e-3
  r3d_18                                video        13,17 1x3x8x64x64/8x3x8x64x64 argmax 1.8e-05  9.6e-06 1e-4
  bert_encoder                          text_encoder 13,17 1x128 (x3)/8x128 (x3)   -      1.7e-06  6.6e-07 1e-4
  gpt_decoder                           decoder      13,17 1x64/8x64               argmax 2.0e-06  7.3e-07 1e-4
  gpt_decoder_past                      decoder      13,17 1x1 +past/8x1 +past     argmax 1.2e-06  1.3e-07 1e-4
  lstm_gru_bidirectional                recurrent    13,17 1x100x40/8x100x40       argmax 3.8e-06  2.9e-08 1e-4
  rnn_tanh_bidirectional                recurrent    13,17 1x100x40/8x100x40       argmax 1.7e-06  2.7e-07 1e-4
  lstm_1000_steps                       recurrent    13,17 1x1000x64/8x1000x64     argmax 2.4e-06  3.4e-08 1e-4
  audio_cnn opset 13                    audio        13    1x16000/8x16000         argmax 1.2e-05  0       1e-4
  audio_cnn opset 17                    audio        17    1x16000/8x16000         argmax 8.2e-04  6.2e-04 7e-3

(The detectors' large "vs torch" values are box coordinates in pixels, within rtol.)

Models, and every deviation from the stock torchvision architecture, with the reason:
  - Classifiers (cnn, vit, video, recurrent, audio): the last Linear layer is re-centred and
    rescaled on the 12 candidate inputs: bias minus the mean logit, then logits of std 1 (see
    "Initialisation"). squeezenet1_1 has no Linear head (a 1x1 convolution, ReLU, average pooling)
    and keeps its own. googlenet and inception_v3: aux_logits=False, init_weights=True;
    inception_v3 at 299x299; both with transform_input=False (the weights=None default).
  - wide_resnet14_2: Wide ResNet-50-2's bottleneck blocks (width_per_group=128) with one block per
    stage instead of (3, 4, 6, 3), built with torchvision's ResNet class: wide_resnet50_2 is
    276 MB per file. The structure (wide 3x3 bottleneck, projection shortcuts) is the same.
  - vit_b_32_small: ViT-B/32's layout (224x224, 32x32 patches, class token, pre-norm encoder,
    1000 classes) built with torchvision's VisionTransformer at depth 6, width 384, 6 heads, MLP
    1536 instead of 12 / 768 / 12 / 3072: ViT-B/32 is 350 MB per file.
  - swin_t, convnext_tiny, resnet50, resnet18, densenet121, regnet_y_400mf, efficientnet_b0,
    mobilenet_v2 / v3, shufflenet_v2_x1_0, mnasnet1_0: stock.
  - Segmenters (fcn_resnet50, deeplabv3_mobilenet_v3_large with aux_loss=False; lraspp): stock,
    output "out" only; height and width axes are dynamic too, and the batch-8 cases use smaller
    images than the batch-1 cases (8x21x224x224 floats would be 34 MB per output file). No argmax
    check: the class axis is 1, not the last axis.
  - Detectors take one image [3, H, W] in [0, 1] (H and W dynamic; they resize and normalise
    inside) and output boxes [K, 4], scores [K] (float), labels [K] (int64), plus masks
    [K, 1, H, W] (float) for Mask R-CNN, K read from data. Batch 1 only: torchvision's detectors
    take a list of images and tracing unrolls the per-image loops, so no batch axis can be
    dynamic (a 2-image case would need a second graph per opset). Random-weight scores were
    degenerate, so these are scaled after BatchNorm calibration:
      ssdlite320_mobilenet_v3_large: classification convolutions x3 (at N(0, 0.03) every
        softmax score sat at 1/91);
      retinanet_resnet50_fpn: min_size = max_size = 320 (stock 800 / 1333) to keep it fast;
        cls_logits x30 (all sigmoid scores were near the 0.01 prior);
      fasterrcnn_mobilenet_v3_large_320_fpn: RPN objectness x50 and box deltas x10 (objectness
        at N(0, 0.01) tied, so float noise chose which proposals survive the top-n cut),
        cls_score x5;
      maskrcnn_mobilenet_v3_large_320_fpn: torchvision has no MobileNet Mask R-CNN builder;
        MaskRCNN with fasterrcnn_mobilenet_v3_large_320_fpn's backbone (MobileNetV3-Large FPN
        with BatchNorm), anchors and settings (min 320 / max 640, RPN top-n 150, RPN score
        threshold 0.05), tuned like Faster R-CNN. The ResNet-50 FPN Mask R-CNN is 178 MB and took
        20 s per eager run here (masks pasted for 100 detections).
    The R-CNNs are exported at opset 15 only: torchvision 0.14 exports RoiAlign wrongly at opset
    >= 16 (onnxruntime's detections have nothing in common with torch's). Score thresholds: each
    detector is run with a low threshold, then the threshold goes in the widest gap between
    consecutive scores that leaves 8 to 40 detections (15, 12, 15 and 13 here). The script
    asserts that moving any threshold by +-1e-4 (score and NMS IoU, and the RPN's for the R-CNNs)
    gives the same detections, that scores are distinct and not all equal, and that there are at
    least 2 labels.
  - r3d_18: stock, on clips of 8 frames at 64x64 (Kinetics uses 16x112x112): a batch of 8 clips
    at 8x112x112 took 4.7 s in onnxruntime with 1 thread.
  - bert_encoder (own module): token (30522) + position (512) + token type (2) embeddings,
    LayerNorm, nn.TransformerEncoder (4 post-norm layers, d 256, 4 heads, FF 1024, GELU, eps
    1e-12, batch_first, enable_nested_tensor=False), pooler tanh(Linear(h[:, 0])); outputs
    last_hidden_state [N, S, 256] and pooler_output [N, 256]. The int64 0/1 attention_mask
    becomes an additive mask (1 - m) * -10000 of shape [N * heads, S, S] passed as src_mask (a
    src_key_padding_mask would send eager torch down nn.TransformerEncoderLayer's fused fast
    path). Batch and sequence axes are dynamic; sequence 128; in the batch-8 case rows 1-7 are
    padded (lengths 32-127), and the script asserts that padded ids do not change unpadded
    positions. Embeddings N(0, 0.5).
  - gpt_decoder (own module): GPT-2 style, vocab 8000, 256 positions, d 256, 4 heads, 4 pre-norm
    layers, FF 1024, GELU, untied LM head; the causal mask comes from Range and comparisons (no
    Trilu, which opset 13 lacks); sequence 64, logits [N, S, 8000], argmax at every position.
    gpt_decoder_past: the same weights with past_key_i / past_value_i [N, 4, P, 64] inputs and
    present_key_i / present_value_i [N, 4, P + S, 64] outputs (P and S dynamic); the cases feed
    one new token after a 63-token past that the model computed itself, and the script asserts
    that the step's logits equal the full decoder's at position 64.
  - lstm_gru_bidirectional: features [N, 100, 40] -> 2-layer bidirectional LSTM (128) -> 2-layer
    bidirectional GRU (128) -> logits [N, 10] from the GRU's last forward / backward states
    (output 0), and the GRU's outputs [N, 100, 256] (output 1). rnn_tanh_bidirectional: the same
    with a 2-layer bidirectional tanh RNN (128). lstm_1000_steps: features [N, 1000, 64] ->
    2-layer LSTM (256) -> logits [N, 10] from the last state, outputs [N, 1000, 256]. Batch and
    time axes are dynamic; zero initial states. Stock torch initialisation.
  - audio_cnn (own module): 1 s of 16 kHz audio [N, 16000] -> |STFT| (n_fft 400, hop 160,
    periodic Hann, centred with reflect padding: 101 frames x 201 bins) -> fixed triangular
    mel-scale filterbank (64 bands) -> log -> 4 Conv1d + BatchNorm + ReLU (two strided, one
    dilated) -> mean and max over time -> Linear -> logits [N, 35]. Opset 17 uses ONNX's STFT:
    torch 1.13 cannot export torch.stft, so the script registers a symbolic for aten::stft
    (Unsqueeze -> STFT -> Transpose). Opset 13 has no STFT op: the same DFT runs as a strided
    Conv1d with windowed cos / sin kernels. onnxruntime's STFT is less accurate than torch's
    FFT (5e-4 absolute on magnitudes up to 41, where torch is within 5e-6 of float64), hence
    opset 17's atol.

Initialisation (all models): torch.manual_seed(crc32(name)); every all-zero weight tensor of rank
>= 2 is redrawn from N(0, 0.02) (ViT's head and class token start at 0: logits were exactly 0);
ConvNeXt's layer scales (1e-6) are drawn from U(0.1, 0.5); BatchNorm running statistics are
calibrated on 8 seeded inputs (BatchNorm layers in training mode with momentum=None, everything
else in eval mode): with the stock mean-0 / var-1 statistics, activations vanish or explode
through deep nets (EfficientNet / MobileNetV3 / MNASNet logits were 1e-14 to 1e-8). A
classifier's last Linear layer is then re-centred on the 12 candidate inputs (bias minus the mean
logit, so that the argmax depends on the input rather than on one class that wins everywhere)
and scaled to logits of std 1, so that atol means the same for every model. The script fails
loudly when a model is degenerate: non-finite outputs, logits without spread (std <= 1e-3 or
<= 1e-2 |mean| in a row), one argmax class for every row of a batch-8 case, a top-1 / top-2
margin under 1e-3 of the row's std in any argmax-checked row (the rows are picked from 12
candidates so that float noise cannot flip an argmax), and the detector checks above.

Inputs (numpy default_rng seeded from the model's name): images are smooth random patterns (a
few 2-D cosine waves per channel, random rectangles / ellipses, a little noise) in [0, 1],
normalised with ImageNet's mean / std for the classifiers and segmenters (the detectors get
[0, 1]); video clips move such an image a few pixels per frame (Kinetics mean / std); token ids
are uniform in the vocabulary; audio is 2-4 sine tones with Gaussian envelopes plus noise; the
recurrent models get smoothed random walks of unit scale.
"""

import argparse
import contextlib
import hashlib
import json
import math
import os
import sys
import time
import warnings
import zlib

import numpy as np
import onnx
import torch
import torch.nn.functional as F
import torchvision
from torch import nn
from torchvision.models import detection as tvd
from torchvision.models import segmentation as tvs
from torchvision.models import video as tvv

warnings.filterwarnings("ignore")

IMAGENET = (np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32))
KINETICS = (np.array([0.43216, 0.394666, 0.37645], np.float32),
            np.array([0.22803, 0.22145, 0.216989], np.float32))
INLINE_LIMIT = 1024  # initializers smaller than this stay inside the .onnx


def seed_of(name, tag=""):
    return zlib.crc32(f"{name}/{tag}".encode())


# --------------------------------------------------------------------------------------------
# Inputs


def smooth_images(rng, n, h, w):
    """n images [3, h, w] in [0, 1]: cosine waves, rectangles / ellipses, a little noise."""
    out = np.empty((n, 3, h, w), np.float32)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64) / max(h, w)
    for i in range(n):
        img = np.ones((3, h, w)) * rng.uniform(0.2, 0.8, size=(3, 1, 1))
        for _ in range(6):
            fx, fy = rng.uniform(-6, 6, size=2)
            phase = rng.uniform(0, 2 * np.pi)
            amp = rng.uniform(0.03, 0.15, size=(3, 1, 1))
            img += amp * np.cos(2 * np.pi * (fx * xx + fy * yy) + phase)
        for _ in range(int(rng.integers(2, 7))):
            cx, cy = rng.uniform(0, 1, size=2)
            rx, ry = rng.uniform(0.04, 0.3, size=2)
            color = rng.uniform(0, 1, size=(3, 1))
            if rng.random() < 0.5:
                mask = (np.abs(xx - cx) < rx) & (np.abs(yy - cy) < ry)
            else:
                mask = ((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 < 1
            img[:, mask] = 0.85 * color + 0.15 * img[:, mask]
        img += rng.normal(0, 0.02, size=img.shape)
        out[i] = np.clip(img, 0, 1)
    return out


def normalize(x, stats):
    mean, std = stats
    shape = (1, 3) + (1,) * (x.ndim - 2)
    return ((x - mean.reshape(shape)) / std.reshape(shape)).astype(np.float32)


def video_clips(rng, n, t, h, w):
    """n clips [3, t, h, w]: a smooth image moving a few pixels per frame, slowly brightening."""
    base = smooth_images(rng, n, h, w)
    out = np.empty((n, 3, t, h, w), np.float32)
    for i in range(n):
        dy, dx = rng.integers(-4, 5, size=2)
        for f in range(t):
            out[i, :, f] = np.clip(np.roll(base[i], (f * dy, f * dx), axis=(1, 2)) * (1 + 0.02 * f), 0, 1)
    return normalize(out, KINETICS)


def audio_clips(rng, n, samples, rate=16000):
    t = np.arange(samples) / rate
    out = np.empty((n, samples), np.float32)
    for i in range(n):
        x = np.zeros(samples)
        for _ in range(int(rng.integers(2, 5))):
            f0 = rng.uniform(80, 4000)
            env = np.exp(-((t - rng.uniform(0, t[-1])) ** 2) / (2 * rng.uniform(0.05, 0.4) ** 2))
            x += rng.uniform(0.1, 0.5) * env * np.sin(2 * np.pi * f0 * t + rng.uniform(0, 2 * np.pi))
        x += rng.normal(0, 0.02, size=samples)
        out[i] = x
    return out


def smooth_features(rng, n, steps, dim):
    """n sequences [steps, dim]: a random walk smoothed over time, roughly unit scale."""
    x = np.cumsum(rng.normal(0, 0.3, size=(n, steps, dim)), axis=1)
    kernel = np.ones(5) / 5
    x = np.apply_along_axis(lambda v: np.convolve(v, kernel, mode="same"), 1, x)
    x = (x - x.mean(axis=(1, 2), keepdims=True)) / (x.std(axis=(1, 2), keepdims=True) + 1e-6)
    return (x + rng.normal(0, 0.1, size=x.shape)).astype(np.float32)


# --------------------------------------------------------------------------------------------
# Initialisation helpers


def redraw_zero_weights(model):
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and not torch.any(p != 0):
                p.normal_(0, 0.02)


def set_layer_scales(model, lo=0.1, hi=0.5):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layer_scale"):
                p.uniform_(lo, hi)


def batchnorms(model):
    return [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]


def calibrate_bn(model, batches):
    """Running statistics from `batches` (argument tuples): BatchNorm in training mode with a
    cumulative average (momentum=None), every other module in eval mode."""
    bns = batchnorms(model)
    model.eval()
    if not bns:
        return
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None
        bn.train()
    with torch.no_grad():
        for args in batches:
            model(*args)
    model.eval()


def last_linear(model):
    lin = [m for m in model.modules() if isinstance(m, nn.Linear)]
    return lin[-1]


def classifier_batches(name, make, n=1, per=8):
    rng = np.random.default_rng(seed_of(name, "calibration"))
    return [(torch.from_numpy(make(rng, per)),) for _ in range(n)]


# --------------------------------------------------------------------------------------------
# Checks


class Degenerate(Exception):
    pass


def require(cond, msg):
    if not cond:
        raise Degenerate(msg)


def check_finite(name, outs):
    for i, o in enumerate(outs):
        if o.dtype.kind == "f":
            require(np.all(np.isfinite(o)), f"{name}: output {i} is not finite")


def check_logits(name, logits, batch):
    rows = logits.reshape(-1, logits.shape[-1]).astype(np.float64)
    std = rows.std(axis=1)
    mean = np.abs(rows.mean(axis=1))
    require(np.all(std > 1e-3), f"{name}: logits std {std.min():.3g} <= 1e-3")
    require(np.all(std > 1e-2 * mean), f"{name}: logits std {std.min():.3g} <= 1e-2 |mean|")
    if batch > 1:
        distinct = len(set(rows.argmax(axis=1).tolist()))
        require(distinct >= 2, f"{name}: one argmax class for every row of batch {batch}")


def margins(logits):
    """(top-1 - top-2) / std per row over the last axis."""
    rows = logits.reshape(-1, logits.shape[-1]).astype(np.float64)
    s = np.sort(rows, axis=1)
    return (s[:, -1] - s[:, -2]) / (rows.std(axis=1) + 1e-30)


MARGIN = 1e-3


def pick_rows(name, model, candidates, count, head=None):
    """The first `count` candidate rows whose argmax margin is at least MARGIN (so that float noise
    cannot flip the argmax check). With `head` (the last Linear layer), first subtracts the mean
    logit over the candidates from its bias, so that the argmax depends on the input rather than
    on one class that wins everywhere, and scales the head to logits of std 1."""
    with torch.no_grad():
        logits = to_numpy(model(torch.from_numpy(candidates)))[0]
        if head is not None:
            shift = logits.reshape(-1, logits.shape[-1]).mean(axis=0)
            scale = 1 / float((logits - shift).std())
            head.bias.copy_((head.bias - torch.from_numpy(shift)) * scale)
            head.weight.mul_(scale)
            logits = (logits - shift) * scale
    m = margins(logits).reshape(len(candidates), -1).min(axis=1)
    good = np.nonzero(m >= MARGIN)[0]
    require(len(good) >= count, f"{name}: only {len(good)} of {len(candidates)} candidates have a "
            f"margin >= {MARGIN}")
    return good[:count]


def to_numpy(outs):
    if isinstance(outs, torch.Tensor):
        outs = (outs,)
    return [o.detach().cpu().numpy() for o in outs]


# --------------------------------------------------------------------------------------------
# Model specs


class Spec:
    """One zoo model. build() -> torch module (eval mode, initialised); inputs(model) -> {batch:
    [np arrays in input_names order]}; verify(model, inputs, outputs) raises Degenerate."""

    def __init__(self, name, family, build, inputs, input_names, output_names, dynamic_axes,
                 opsets=(13, 17), check="-", atol=1e-4, rtol=1e-3, verify=None, variant=None,
                 directory=None):
        self.name, self.family, self.build, self.inputs = name, family, build, inputs
        self.input_names, self.output_names, self.dynamic_axes = input_names, output_names, dynamic_axes
        self.opsets, self.check, self.rtol = opsets, check, rtol
        self.atol = atol  # a number, or {opset: number}
        self.verify = verify
        self.variant = variant  # variant(model, opset): adjusts the module before export / eval
        self.directory = directory or name


SPECS = []


def spec(*args, **kwargs):
    SPECS.append(Spec(*args, **kwargs))


# ---- CNN classifiers and vision transformers -----------------------------------------------


def image_classifier(name, ctor, size=224, head=True, family="cnn", atol=1e-4, rtol=1e-3):
    def make(rng, n):
        return normalize(smooth_images(rng, n, size, size), IMAGENET)

    def build():
        model = ctor()
        redraw_zero_weights(model)
        set_layer_scales(model)
        calibrate_bn(model, classifier_batches(name, make))
        return model

    def inputs(model):
        rng = np.random.default_rng(seed_of(name, "inputs"))
        cand = make(rng, 12)
        rows = pick_rows(name, model, cand, 9, last_linear(model) if head else None)
        return {1: [cand[rows[:1]]], 8: [cand[rows[1:]]]}

    def verify(model, inputs, outs):
        check_logits(name, outs[0], len(inputs[0]))

    spec(name, family, build, inputs, ["input"], ["logits"],
         {"input": {0: "batch"}, "logits": {0: "batch"}}, check="argmax:0", atol=atol, rtol=rtol,
         verify=verify)


M = torchvision.models
image_classifier("resnet18", lambda: M.resnet18(weights=None))
image_classifier("resnet50", lambda: M.resnet50(weights=None), atol=3e-4)
# Wide ResNet: the Wide ResNet-50-2 blocks (bottleneck width 128 per group) with one block per
# stage instead of (3, 4, 6, 3): wide_resnet50_2 is 276 MB.
image_classifier("wide_resnet14_2", lambda: torchvision.models.resnet.ResNet(
    torchvision.models.resnet.Bottleneck, [1, 1, 1, 1], width_per_group=128))
image_classifier("mobilenet_v2", lambda: M.mobilenet_v2(weights=None), atol=1e-3)
image_classifier("mobilenet_v3_small", lambda: M.mobilenet_v3_small(weights=None))
image_classifier("mobilenet_v3_large", lambda: M.mobilenet_v3_large(weights=None), atol=2e-4)
image_classifier("efficientnet_b0", lambda: M.efficientnet_b0(weights=None), atol=2e-4)
image_classifier("densenet121", lambda: M.densenet121(weights=None))
image_classifier("regnet_y_400mf", lambda: M.regnet_y_400mf(weights=None), atol=3e-4)
image_classifier("convnext_tiny", lambda: M.convnext_tiny(weights=None))
image_classifier("shufflenet_v2_x1_0", lambda: M.shufflenet_v2_x1_0(weights=None), atol=1e-3)
# SqueezeNet's classifier is a 1x1 convolution followed by ReLU and average pooling (no Linear
# head to centre).
image_classifier("squeezenet1_1", lambda: M.squeezenet1_1(weights=None), head=False)
image_classifier("mnasnet1_0", lambda: M.mnasnet1_0(weights=None), atol=1e-3)
image_classifier("googlenet", lambda: M.googlenet(weights=None, aux_logits=False, init_weights=True),
                 atol=2e-4)
image_classifier("inception_v3", lambda: M.inception_v3(weights=None, aux_logits=False, init_weights=True),
                 size=299, atol=5e-4)
# ViT: the ViT-B/32 layout (224x224, 32x32 patches, class token, pre-norm blocks) at depth 6,
# width 384, 6 heads, MLP 1536 instead of 12 / 768 / 12 / 3072: ViT-B/32 is 350 MB.
image_classifier("vit_b_32_small", lambda: torchvision.models.vision_transformer.VisionTransformer(
    image_size=224, patch_size=32, num_layers=6, num_heads=6, hidden_dim=384, mlp_dim=1536),
    family="vit")
image_classifier("swin_t", lambda: M.swin_t(weights=None), family="vit")


# ---- segmentation -----------------------------------------------------------------------------


class OutOnly(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def segmenter(name, ctor, sizes, atol=1e-4, rtol=1e-3):
    def make(rng, n, size):
        return normalize(smooth_images(rng, n, size, size), IMAGENET)

    def build():
        model = OutOnly(ctor())
        redraw_zero_weights(model)
        rng = np.random.default_rng(seed_of(name, "calibration"))
        calibrate_bn(model, [(torch.from_numpy(make(rng, 8, sizes[8])),) for _ in range(2)])
        return model

    def inputs(model):
        rng = np.random.default_rng(seed_of(name, "inputs"))
        return {1: [make(rng, 1, sizes[1])], 8: [make(rng, 8, sizes[8])]}

    def verify(model, inputs, outs):
        out = outs[0]
        pix = np.moveaxis(out, 1, -1)
        check_logits(name, pix, 1)
        classes = len(np.unique(pix.argmax(-1)))
        require(classes >= 2, f"{name}: every pixel has the same class")

    spec(name, "segmentation", build, inputs, ["input"], ["out"],
         {"input": {0: "batch", 2: "height", 3: "width"}, "out": {0: "batch", 2: "height", 3: "width"}},
         atol=atol, rtol=rtol, verify=verify)


# The batch-8 cases use smaller images than the batch-1 cases (the height / width axes are
# dynamic too): 8 x 21 x 224 x 224 logits would be 34 MB per output file.
segmenter("fcn_resnet50", lambda: tvs.fcn_resnet50(weights=None, weights_backbone=None, aux_loss=False),
          {1: 224, 8: 112}, atol=1e-3)
segmenter("deeplabv3_mobilenet_v3_large",
          lambda: tvs.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, aux_loss=False),
          {1: 256, 8: 128}, atol=3e-4)
segmenter("lraspp_mobilenet_v3_large",
          lambda: tvs.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None), {1: 256, 8: 128},
          atol=2e-4)


# ---- detection --------------------------------------------------------------------------------


class Detector(nn.Module):
    """One image [3, H, W] in [0, 1] -> boxes [K, 4], scores [K], labels [K] (+ masks [K, 1, H, W])."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, image):
        out = self.model([image])[0]
        res = [out["boxes"], out["scores"], out["labels"]]
        if "masks" in out:
            res.append(out["masks"])
        return tuple(res)


def thresholds(model):
    """The (object, attribute) pairs of the score / NMS thresholds of a torchvision detector."""
    m = model.model
    if hasattr(m, "roi_heads"):
        return {"score": (m.roi_heads, "score_thresh"), "nms": (m.roi_heads, "nms_thresh"),
                "rpn_score": (m.rpn, "score_thresh"), "rpn_nms": (m.rpn, "nms_thresh")}
    return {"score": (m, "score_thresh"), "nms": (m, "nms_thresh")}


def detection_cap(model):
    m = model.model
    return m.roi_heads.detections_per_img if hasattr(m, "roi_heads") else m.detections_per_img


def choose_score_threshold(name, model, image, lo, want=(8, 40)):
    """Runs with the threshold `lo`, then puts the threshold in the widest gap between consecutive
    scores that leaves between want[0] and want[1] detections."""
    obj, attr = thresholds(model)["score"]
    cap = detection_cap(model)
    for _ in range(4):
        setattr(obj, attr, lo)
        with torch.no_grad():
            scores = model(image)[1].numpy()
        if len(scores) < cap:
            break
        lo = float(np.sort(scores)[::-1][cap // 2])  # the cap cut some: start higher
    require(len(scores) < cap, f"{name}: {len(scores)} detections reach the cap {cap}")
    require(len(scores) > want[0], f"{name}: only {len(scores)} detections at threshold {lo}")
    s = np.sort(scores)[::-1]
    hi = min(want[1], len(s) - 1)
    k = max(range(want[0], hi + 1), key=lambda k: s[k - 1] - s[k])
    thr = float((s[k - 1] + s[k]) / 2)
    require(s[k - 1] - s[k] > 4e-4, f"{name}: no score gap above 4e-4 (best {s[k - 1] - s[k]:.3g})")
    setattr(obj, attr, thr)
    return thr


def check_detections(name, model, image, outs):
    boxes, scores, labels = outs[:3]
    n = len(scores)
    require(n > 0, f"{name}: no detections")
    require(scores.std() > 1e-3, f"{name}: all scores equal ({scores[0]:.4f})")
    require(len(np.unique(labels)) >= 2, f"{name}: a single label")
    require(len(np.unique(scores)) == n, f"{name}: tied scores")
    # Float noise must not change the result: the same detections with every threshold moved
    # by +-1e-4.
    for key, (obj, attr) in thresholds(model).items():
        base = getattr(obj, attr)
        for delta in (-1e-4, 1e-4):
            setattr(obj, attr, base + delta)
            with torch.no_grad():
                o = to_numpy(model(image))
            setattr(obj, attr, base)
            require(len(o[1]) == n and np.allclose(o[0], boxes, atol=1e-3),
                    f"{name}: {key} threshold {base}{delta:+g} changes the detections "
                    f"({n} -> {len(o[1])})")


def detector(name, ctor, opsets, tune, size=(256, 320), first_thresh=0.0, atol=1e-4):
    def make(rng, n):
        return smooth_images(rng, n, *size)

    def build():
        model = Detector(ctor())
        redraw_zero_weights(model)
        rng = np.random.default_rng(seed_of(name, "calibration"))
        imgs = torch.from_numpy(make(rng, 8))
        calibrate_bn(model.model, [(list(imgs[:4]),), (list(imgs[4:]),)])
        with torch.no_grad():
            tune(model.model)
        return model

    def inputs(model):
        rng = np.random.default_rng(seed_of(name, "inputs"))
        image = make(rng, 1)[0]
        choose_score_threshold(name, model, torch.from_numpy(image), first_thresh)
        return {1: [image]}

    def verify(model, inputs, outs):
        check_detections(name, model, torch.from_numpy(inputs[0]), outs)

    outputs = ["boxes", "scores", "labels"] + (["masks"] if "mask" in name else [])
    axes = {"image": {1: "height", 2: "width"}}
    for o in outputs:
        axes[o] = {0: "detections"}
    spec(name, "detection", build, inputs, ["image"], outputs, axes, opsets=opsets,
         check="detection:0", atol=atol, verify=verify)


def tune_ssd(m):
    # The classification convolutions start at N(0, 0.03): every softmax score sat at 1/91.
    for block in m.head.classification_head.module_list:
        block[-1].weight.mul_(3)


def tune_retinanet(m):
    m.head.classification_head.cls_logits.weight.mul_(30)


def tune_rcnn(m):
    # RPN objectness starts at N(0, 0.01): every proposal had the same score, so which ones
    # survive the top-n cut was decided by float noise.
    m.rpn.head.cls_logits.weight.mul_(50)
    m.rpn.head.bbox_pred.weight.mul_(10)
    m.roi_heads.box_predictor.cls_score.weight.mul_(5)


def maskrcnn_mobilenet_v3_large_320_fpn():
    # The Mask R-CNN heads on fasterrcnn_mobilenet_v3_large_320_fpn's backbone and settings.
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.backbone_utils import _mobilenet_extractor
    backbone = _mobilenet_extractor(M.mobilenet_v3_large(weights=None, norm_layer=nn.BatchNorm2d), True, 6)
    anchors = AnchorGenerator(((32, 64, 128, 256, 512),) * 3, ((0.5, 1.0, 2.0),) * 3)
    return tvd.MaskRCNN(backbone, 91, rpn_anchor_generator=anchors, min_size=320, max_size=640,
                        rpn_pre_nms_top_n_test=150, rpn_post_nms_top_n_test=150, rpn_score_thresh=0.05)


detector("ssdlite320_mobilenet_v3_large",
         lambda: tvd.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None), (13, 17),
         tune_ssd, first_thresh=0.2)
detector("retinanet_resnet50_fpn",
         lambda: tvd.retinanet_resnet50_fpn(weights=None, weights_backbone=None, min_size=320, max_size=320),
         (13, 17), tune_retinanet, first_thresh=0.1)
# torchvision 0.14 exports RoiAlign wrongly at opset >= 16, so the R-CNN family is opset 15 only.
detector("fasterrcnn_mobilenet_v3_large_320_fpn",
         lambda: tvd.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None), (15,),
         tune_rcnn, first_thresh=0.2)
detector("maskrcnn_mobilenet_v3_large_320_fpn", maskrcnn_mobilenet_v3_large_320_fpn, (15,), tune_rcnn,
         first_thresh=0.08, atol=3e-3)


# ---- video --------------------------------------------------------------------------------------


def video_classifier(name, ctor, frames=8, size=64):
    def make(rng, n):
        return video_clips(rng, n, frames, size, size)

    def build():
        model = ctor()
        redraw_zero_weights(model)
        calibrate_bn(model, classifier_batches(name, make))
        return model

    def inputs(model):
        rng = np.random.default_rng(seed_of(name, "inputs"))
        cand = make(rng, 12)
        rows = pick_rows(name, model, cand, 9, last_linear(model))
        return {1: [cand[rows[:1]]], 8: [cand[rows[1:]]]}

    def verify(model, inputs, outs):
        check_logits(name, outs[0], len(inputs[0]))

    spec(name, "video", build, inputs, ["input"], ["logits"],
         {"input": {0: "batch"}, "logits": {0: "batch"}}, check="argmax:0", verify=verify)


video_classifier("r3d_18", lambda: tvv.r3d_18(weights=None))


# ---- text encoder (BERT style) ---------------------------------------------------------------


class BertEncoder(nn.Module):
    def __init__(self, vocab=30522, d=256, heads=4, layers=4, ff=1024, max_pos=512, types=2):
        super().__init__()
        self.heads = heads
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_pos, d)
        self.typ = nn.Embedding(types, d)
        self.norm = nn.LayerNorm(d, eps=1e-12)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation="gelu", batch_first=True,
                                           layer_norm_eps=1e-12)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.pool = nn.Linear(d, d)
        with torch.no_grad():
            for emb in (self.tok, self.pos, self.typ):
                emb.weight.normal_(0, 0.5)

    def forward(self, input_ids, token_type_ids, attention_mask):
        n, s = input_ids.shape[0], input_ids.shape[1]
        pos = torch.arange(s, device=input_ids.device).unsqueeze(0)
        x = self.norm(self.tok(input_ids) + self.pos(pos) + self.typ(token_type_ids))
        # 0 / 1 mask -> additive mask [N * heads, S, S] (as src_mask, which also keeps
        # nn.TransformerEncoderLayer off its fused fast path).
        add = (1.0 - attention_mask.to(x.dtype)) * -10000.0
        add = add[:, None, None, :].expand(n, self.heads, s, s).reshape(n * self.heads, s, s)
        h = self.encoder(x, mask=add)
        return h, torch.tanh(self.pool(h[:, 0]))


def bert_inputs(name, vocab=30522, seq=128):
    def inputs(model):
        rng = np.random.default_rng(seed_of(name, "inputs"))
        res = {}
        for n in (1, 8):
            ids = rng.integers(1000, vocab, size=(n, seq))
            ids[:, 0] = 101  # [CLS]
            types = np.zeros((n, seq), np.int64)
            mask = np.ones((n, seq), np.int64)
            for i in range(n):
                length = seq if (n == 1 or i == 0) else int(rng.integers(seq // 4, seq))
                split = int(rng.integers(2, length))
                ids[i, length - 1] = 102  # [SEP]
                types[i, split:length] = 1
                ids[i, length:] = 0  # [PAD]
                mask[i, length:] = 0
            res[n] = [ids.astype(np.int64), types, mask]
        return res
    return inputs


def verify_bert(model, inputs, outs):
    check_finite("bert", outs)
    h = outs[0]
    require(h.std() > 0.1, "bert: hidden states have no spread")
    # Padded positions must not influence the others: change the padded ids, compare.
    ids, types, mask = inputs
    if mask.min() == 0:
        ids2 = np.where(mask == 0, 7, ids)
        with torch.no_grad():
            h2 = model(*[torch.from_numpy(a) for a in (ids2, types, mask)])[0].numpy()
        keep = mask.astype(bool)
        require(np.abs(h2[keep] - h[keep]).max() < 1e-4, "bert: padding leaks into unmasked positions")


def build_bert():
    model = BertEncoder()
    redraw_zero_weights(model)
    return model.eval()


seq_axes = {0: "batch", 1: "sequence"}
spec("bert_encoder", "text_encoder", build_bert, bert_inputs("bert_encoder"),
     ["input_ids", "token_type_ids", "attention_mask"], ["last_hidden_state", "pooler_output"],
     {"input_ids": seq_axes, "token_type_ids": seq_axes, "attention_mask": seq_axes,
      "last_hidden_state": seq_axes, "pooler_output": {0: "batch"}}, verify=verify_bert)


# ---- decoders (GPT style) ----------------------------------------------------------------------


class GptBlock(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, ff)
        self.fc2 = nn.Linear(ff, d)

    def split(self, t):
        return t.reshape(t.shape[0], t.shape[1], self.heads, self.dh).transpose(1, 2)

    def forward(self, x, bias, past_k=None, past_v=None):
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = self.split(q), self.split(k), self.split(v)
        if past_k is not None:
            k = torch.cat([past_k, k], dim=2)
            v = torch.cat([past_v, v], dim=2)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.dh) + bias, dim=-1)
        y = (att @ v).transpose(1, 2)
        y = y.reshape(y.shape[0], y.shape[1], -1)
        x = x + self.proj(y)
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x, k, v


class Gpt(nn.Module):
    """A GPT-2-style decoder. With past=True the inputs are input_ids [N, S] plus past_key_i /
    past_value_i [N, heads, P, d/heads] per layer and the outputs logits plus present_key_i /
    present_value_i [N, heads, P + S, d/heads]."""

    def __init__(self, vocab=8000, d=256, heads=4, layers=4, ff=1024, max_pos=256, past=False):
        super().__init__()
        self.past = past
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_pos, d)
        self.blocks = nn.ModuleList([GptBlock(d, heads, ff) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        with torch.no_grad():
            self.pos.weight.mul_(0.5)
            for m in self.modules():
                if isinstance(m, nn.LayerNorm):
                    m.weight.uniform_(0.8, 1.2)
                    m.bias.normal_(0, 0.05)

    def forward(self, input_ids, *past):
        s = input_ids.shape[1]
        p = past[0].shape[2] if past else 0
        qpos = torch.arange(s, device=input_ids.device) + p
        kpos = torch.arange(s + p, device=input_ids.device) if past else qpos
        bias = torch.where(kpos[None, :] <= qpos[:, None], torch.tensor(0.0), torch.tensor(-1e9))
        x = self.tok(input_ids) + self.pos(qpos).unsqueeze(0)
        presents = []
        for i, block in enumerate(self.blocks):
            if past:
                x, k, v = block(x, bias, past[2 * i], past[2 * i + 1])
                presents += [k, v]
            else:
                x, _, _ = block(x, bias)
        logits = self.head(self.ln(x))
        return (logits, *presents) if self.past else logits


GPT_LAYERS, GPT_SEQ = 4, 64


def build_gpt(past):
    def build():
        torch.manual_seed(seed_of("gpt_decoder"))  # gpt_decoder_past shares the weights
        model = Gpt(past=past)
        return model.eval()
    return build


def gpt_candidates(n, seq, vocab=8000):
    rng = np.random.default_rng(seed_of("gpt_decoder", "inputs"))
    return rng.integers(0, vocab, size=(n, seq)).astype(np.int64)


def gpt_inputs(model):
    cand = gpt_candidates(16, GPT_SEQ)
    rows = pick_rows("gpt_decoder", model, cand, 9)
    return {1: [cand[rows[:1]]], 8: [cand[rows[1:]]]}


def gpt_past_inputs(model):
    """Past keys / values of a 63-token prefix computed by the same model, and the 64th token."""
    full = model
    cand = gpt_candidates(16, GPT_SEQ)
    res = {}
    with torch.no_grad():
        out = full(torch.from_numpy(cand[:, :-1]), *[torch.zeros(16, 4, 0, 64)] * (2 * GPT_LAYERS))
        past = [o.numpy() for o in out[1:]]
        logits = full(torch.from_numpy(cand[:, -1:]), *[torch.from_numpy(p) for p in past])[0].numpy()
    good = np.nonzero(margins(logits) >= MARGIN)[0]
    require(len(good) >= 9, "gpt_decoder_past: too few rows with an argmax margin")
    for n, rows in ((1, good[:1]), (8, good[1:9])):
        res[n] = [cand[rows, -1:]] + [p[rows] for p in past]
    return res


def verify_gpt(model, inputs, outs):
    check_logits("gpt_decoder", outs[0], len(inputs[0]))


def verify_gpt_past(model, inputs, outs):
    check_logits("gpt_decoder_past", outs[0], len(inputs[0]))
    # The incremental step must agree with the full-sequence decoder's last position.
    full = Gpt(past=False)
    full.load_state_dict(model.state_dict())
    full.eval()
    ids = gpt_candidates(16, GPT_SEQ)
    with torch.no_grad():
        ref = full(torch.from_numpy(ids)).numpy()[:, -1]
    d = np.abs(ref[:, None, :] - outs[0][None, :, 0, :]).max(axis=2).min(axis=0)
    require(d.max() < 1e-3, f"gpt_decoder_past: step disagrees with the full decoder by {d.max():.3g}")


past_names = [f"past_{kv}_{i}" for i in range(GPT_LAYERS) for kv in ("key", "value")]
present_names = [f"present_{kv}_{i}" for i in range(GPT_LAYERS) for kv in ("key", "value")]
spec("gpt_decoder", "decoder", build_gpt(False), gpt_inputs, ["input_ids"], ["logits"],
     {"input_ids": seq_axes, "logits": seq_axes}, check="argmax:0", verify=verify_gpt,
     directory="gpt_decoder")
spec("gpt_decoder_past", "decoder", build_gpt(True), gpt_past_inputs, ["input_ids"] + past_names,
     ["logits"] + present_names,
     {"input_ids": seq_axes, "logits": seq_axes,
      **{n: {0: "batch", 2: "past_sequence"} for n in past_names},
      **{n: {0: "batch", 2: "total_sequence"} for n in present_names}},
     check="argmax:0", verify=verify_gpt_past, directory="gpt_decoder")


# ---- recurrent ----------------------------------------------------------------------------------


class LstmGru(nn.Module):
    """features [N, T, 40] -> 2-layer bidirectional LSTM (128) -> 2-layer bidirectional GRU (128)
    -> logits [N, 10] from the GRU's last forward / backward states, and the GRU outputs [N, T, 256]."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(40, 128, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = nn.GRU(256, 128, num_layers=2, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(256, 10)

    def forward(self, x):
        y, _ = self.lstm(x)
        y, h = self.gru(y)
        return self.fc(torch.cat([h[-2], h[-1]], dim=1)), y


class RnnTanh(nn.Module):
    """features [N, T, 40] -> 2-layer bidirectional tanh RNN (128) -> logits [N, 10] and outputs."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(40, 128, num_layers=2, nonlinearity="tanh", bidirectional=True, batch_first=True)
        self.fc = nn.Linear(256, 10)

    def forward(self, x):
        y, h = self.rnn(x)
        return self.fc(torch.cat([h[-2], h[-1]], dim=1)), y


class LongLstm(nn.Module):
    """features [N, T, 64] -> 2-layer LSTM (256) -> logits [N, 10] from the last state, outputs
    [N, T, 256]."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(64, 256, num_layers=2, batch_first=True)
        self.fc = nn.Linear(256, 10)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        return self.fc(h[-1]), y


def recurrent(name, ctor, steps, dim):
    def first(model):
        return lambda x: model(x)[0]

    def build():
        return ctor().eval()

    def inputs(model):
        rng = np.random.default_rng(seed_of(name, "inputs"))
        cand = smooth_features(rng, 12, steps, dim)
        rows = pick_rows(name, first(model), cand, 9, model.fc)
        return {1: [cand[rows[:1]]], 8: [cand[rows[1:]]]}

    def verify(model, inputs, outs):
        check_finite(name, outs)
        check_logits(name, outs[0], len(inputs[0]))
        require(outs[1].std() > 1e-2, f"{name}: recurrent outputs have no spread")

    axes = {0: "batch", 1: "time"}
    spec(name, "recurrent", build, inputs, ["features"], ["logits", "outputs"],
         {"features": axes, "logits": {0: "batch"}, "outputs": axes}, check="argmax:0", verify=verify)


recurrent("lstm_gru_bidirectional", LstmGru, 100, 40)
recurrent("rnn_tanh_bidirectional", RnnTanh, 100, 40)
recurrent("lstm_1000_steps", LongLstm, 1000, 64)


# ---- audio ----------------------------------------------------------------------------------------


def stft_symbolic(g, x, n_fft, hop_length, win_length, window, normalized, onesided, return_complex):
    """aten::stft (real input [N, L], a window, onesided, not normalised) -> ONNX STFT (opset 17)
    [N, frames, bins, 2], transposed to torch's [N, bins, frames, 2]."""
    from torch.onnx import symbolic_helper as sh
    n_fft = sh._get_const(n_fft, "i", "n_fft")
    hop = sh._get_const(hop_length, "i", "hop_length")
    signal = g.op("Unsqueeze", x, g.op("Constant", value_t=torch.tensor([-1])))
    step = g.op("Constant", value_t=torch.tensor(hop, dtype=torch.int64))
    length = g.op("Constant", value_t=torch.tensor(n_fft, dtype=torch.int64))
    out = g.op("STFT", signal, step, window, length, onesided_i=1)
    return g.op("Transpose", out, perm_i=[0, 2, 1, 3])


class AudioCnn(nn.Module):
    """audio [N, samples] at 16 kHz -> |STFT| (n_fft 400, hop 160, Hann, centred with reflect
    padding) -> log -> fixed mel-like projection (201 -> 64 bins) -> 1-D conv stack -> global
    average + max pooling -> logits [N, 35]. front "stft" uses torch.stft (-> ONNX STFT at opset
    17); front "conv" computes the same DFT as a strided Conv1d with cos / sin kernels (opset 13,
    where ONNX has no STFT)."""

    def __init__(self, n_fft=400, hop=160, bins=64, classes=35):
        super().__init__()
        self.n_fft, self.hop, self.front = n_fft, hop, "stft"
        window = torch.hann_window(n_fft, periodic=True)
        self.register_buffer("window", window)
        k = torch.arange(n_fft // 2 + 1, dtype=torch.float64)[:, None]
        t = torch.arange(n_fft, dtype=torch.float64)[None, :]
        ang = 2 * math.pi * k * t / n_fft
        basis = torch.cat([torch.cos(ang), -torch.sin(ang)]) * window.double()
        self.register_buffer("dft", basis.float()[:, None, :])
        # Triangular filters spaced evenly on the mel scale (fixed, not learned).
        freqs = torch.linspace(0, 8000, n_fft // 2 + 1)
        mel = 2595 * torch.log10(1 + freqs / 700)
        edges = torch.linspace(0, float(mel[-1]), bins + 2)
        lo, mid, hi = edges[:-2, None], edges[1:-1, None], edges[2:, None]
        fb = torch.clamp(torch.minimum((mel[None, :] - lo) / (mid - lo), (hi - mel[None, :]) / (hi - mid)), 0)
        self.register_buffer("mel", fb)
        self.convs = nn.Sequential(
            nn.Conv1d(bins, 128, 5, padding=2), nn.BatchNorm1d(128), nn.ReLU(),
            nn.Conv1d(128, 128, 3, stride=2, padding=1), nn.BatchNorm1d(128), nn.ReLU(),
            nn.Conv1d(128, 256, 3, stride=2, padding=1, dilation=1), nn.BatchNorm1d(256), nn.ReLU(),
            nn.Conv1d(256, 256, 3, padding=2, dilation=2), nn.BatchNorm1d(256), nn.ReLU())
        self.fc = nn.Linear(512, classes)

    def forward(self, audio):
        if self.front == "stft":
            spec = torch.stft(audio, self.n_fft, hop_length=self.hop, window=self.window, center=True,
                              pad_mode="reflect", onesided=True, return_complex=False)
            power = spec[..., 0] ** 2 + spec[..., 1] ** 2
        else:
            pad = self.n_fft // 2
            x = F.pad(audio.unsqueeze(1), (pad, pad), mode="reflect")
            spec = F.conv1d(x, self.dft, stride=self.hop)
            re, im = spec.chunk(2, dim=1)
            power = re * re + im * im
        feats = torch.log(torch.matmul(self.mel, torch.sqrt(power + 1e-10)) + 1e-6)
        y = self.convs(feats)
        return self.fc(torch.cat([y.mean(dim=2), y.amax(dim=2)], dim=1))


AUDIO_SAMPLES = 16000


def build_audio():
    model = AudioCnn()
    calibrate_bn(model, classifier_batches("audio_cnn", lambda rng, n: audio_clips(rng, n, AUDIO_SAMPLES)))
    return model


def audio_inputs(model):
    rng = np.random.default_rng(seed_of("audio_cnn", "inputs"))
    cand = audio_clips(rng, 12, AUDIO_SAMPLES)
    rows = pick_rows("audio_cnn", model, cand, 9, model.fc)
    return {1: [cand[rows[:1]]], 8: [cand[rows[1:]]]}


def audio_variant(model, opset):
    model.front = "stft" if opset >= 17 else "conv"


def verify_audio(model, inputs, outs):
    check_logits("audio_cnn", outs[0], len(inputs[0]))


spec("audio_cnn", "audio", build_audio, audio_inputs, ["audio"], ["logits"],
     {"audio": {0: "batch", 1: "samples"}, "logits": {0: "batch"}}, check="argmax:0",
     atol={13: 1e-4, 17: 7e-3}, verify=verify_audio, variant=audio_variant)


# --------------------------------------------------------------------------------------------
# Export


@contextlib.contextmanager
def redirect_fds(path):
    """Sends the C++ exporter's stdout / stderr chatter to `path`."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def pack_weights(models, directory, out_names):
    """Moves the initializers of `models` ({path: onnx.ModelProto}) of at least INLINE_LIMIT bytes
    into directory/weights.bin, once per distinct content, and saves each model as out_names[i]."""
    blobs = {}
    with open(os.path.join(directory, "weights.bin"), "wb") as f:
        for model, out in zip(models, out_names):
            for t in model.graph.initializer:
                if not t.HasField("raw_data") or len(t.raw_data) < INLINE_LIMIT:
                    continue
                key = hashlib.sha1(t.raw_data).hexdigest()
                if key not in blobs:
                    pad = (-f.tell()) % 64
                    f.write(b"\0" * pad)
                    blobs[key] = (f.tell(), len(t.raw_data))
                    f.write(t.raw_data)
                offset, length = blobs[key]
                t.ClearField("raw_data")
                t.data_location = onnx.TensorProto.EXTERNAL
                del t.external_data[:]
                for k, v in (("location", "weights.bin"), ("offset", str(offset)), ("length", str(length))):
                    e = t.external_data.add()
                    e.key, e.value = k, v
            onnx.save(model, os.path.join(directory, out))


def save_npy(path, a):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, np.ascontiguousarray(a))


def export_spec(sp, out_dir, log_path, inline, phases):
    t = time.time()
    torch.manual_seed(seed_of(sp.name))
    model = sp.build()
    model.eval()
    inputs = sp.inputs(model)
    phases["build"] = time.time() - t
    t = time.time()
    cases = []
    torch_outs = {}
    variants = [None] if sp.variant is None else list(sp.opsets)
    for v in variants:
        if v is not None:
            sp.variant(model, v)
        for batch, arrays in inputs.items():
            with torch.no_grad():
                outs = to_numpy(model(*[torch.from_numpy(a) for a in arrays]))
            if len(outs) != len(sp.output_names):
                raise RuntimeError(f"{sp.name}: {len(outs)} outputs, expected {len(sp.output_names)}")
            check_finite(sp.name, outs)
            if sp.verify:
                sp.verify(model, arrays, outs)
            torch_outs[(v, batch)] = outs

    phases["torch"] = time.time() - t
    t = time.time()
    d = os.path.join(out_dir, sp.directory)
    os.makedirs(d, exist_ok=True)
    input_paths = {}
    for batch, arrays in inputs.items():
        for n, a in zip(sp.input_names, arrays):
            rel = f"{sp.directory}/b{batch}/{n}.npy"
            if sp.directory != sp.name:
                rel = f"{sp.directory}/{sp.name}_b{batch}/{n}.npy"
            save_npy(os.path.join(out_dir, rel), a)
            input_paths[(batch, n)] = rel

    exported = []
    prefix = "" if sp.directory == sp.name else sp.name[len(sp.directory):].lstrip("_") + "_"
    for opset in sp.opsets:
        if sp.variant is not None:
            sp.variant(model, opset)
        # Traced at batch 2 (batch 1 could bake broadcasts into the graph; batch 8 is slower).
        example = tuple(torch.from_numpy(a[:2] if max(inputs) > 1 else a) for a in inputs[max(inputs)])
        tmp = os.path.join(d, f".tmp_op{opset}.onnx")
        with redirect_fds(log_path):
            torch.onnx.export(model, example, tmp, opset_version=opset, input_names=sp.input_names,
                              output_names=sp.output_names, dynamic_axes=sp.dynamic_axes)
        exported.append((opset, tmp, f"{prefix}op{opset}.onnx"))

    phases["export"] = time.time() - t
    t = time.time()
    if inline:
        for opset, tmp, name in exported:
            os.replace(tmp, os.path.join(d, name))
    else:
        # Models sharing a directory (gpt_decoder / gpt_decoder_past) share one weights.bin: the
        # second one re-packs the files of the first.
        models, names = [], []
        for f in sorted(os.listdir(d)):
            if f.endswith(".onnx") and not f.startswith(".tmp_"):
                m = onnx.load(os.path.join(d, f), load_external_data=True)
                models.append(m)
                names.append(f)
        for opset, tmp, name in exported:
            models.append(onnx.load(tmp))
            names.append(name)
        pack_weights(models, d, names)
        for _, tmp, _ in exported:
            os.remove(tmp)

    phases["save"] = time.time() - t
    for opset, _, name in exported:
        for batch in inputs:
            v = opset if sp.variant is not None else None
            torch_paths = []
            for n, o in zip(sp.output_names, torch_outs[(v, batch)]):
                rel = f".torch/{sp.name}/" + (f"op{opset}_" if v else "") + f"b{batch}_{n}.npy"
                if not os.path.exists(os.path.join(out_dir, rel)):
                    save_npy(os.path.join(out_dir, rel), o)
                torch_paths.append(rel)
            out_base = (f"{sp.directory}/b{batch}" if sp.directory == sp.name
                        else f"{sp.directory}/{sp.name}_b{batch}")
            cases.append({
                "name": sp.name, "family": sp.family, "opset": opset, "batch": batch,
                "model": f"{sp.directory}/{name}", "check": sp.check,
                "atol": sp.atol[opset] if isinstance(sp.atol, dict) else sp.atol, "rtol": sp.rtol,
                "inputs": [[n, input_paths[(batch, n)]] for n in sp.input_names],
                "outputs": [[n, f"{out_base}/op{opset}_{n}.npy"] for n in sp.output_names],
                "torch": torch_paths,
            })
    return cases


def export_all(all_specs, out_dir, only=None, inline=False, prefix="zoo: ", what="models"):
    """Exports `all_specs` (those named in `only`, a comma-separated list, when given: their
    cases replace theirs in an existing OUT_DIR/cases.json) into out_dir and writes cases.json."""
    specs = all_specs
    want = []
    if only:
        want = only.split(",")
        unknown = set(want) - {s.name for s in all_specs}
        if unknown:
            sys.exit(f"unknown {what}: {', '.join(sorted(unknown))}")
        specs = [s for s in all_specs if s.name in want]
    os.makedirs(out_dir, exist_ok=True)
    log_path = os.path.join(out_dir, "export.log")
    cases_path = os.path.join(out_dir, "cases.json")
    cases = []
    if only and os.path.exists(cases_path):
        with open(cases_path) as f:
            cases = [c for c in json.load(f) if c["name"] not in want]
    start = time.time()
    for i, sp in enumerate(specs):
        t = time.time()
        print(f"{prefix}exporting {sp.name} ({i + 1}/{len(specs)})...", end="", flush=True)
        try:
            phases = {}
            new = export_spec(sp, out_dir, log_path, inline, phases)
        except Exception:
            print(f"\n{prefix}{sp.name} failed (the exporter's own messages are in {log_path})",
                  flush=True)
            raise
        cases += new
        print(f" {time.time() - t:.1f} s ({', '.join(f'{k} {v:.1f}' for k, v in phases.items())})",
              flush=True)
    order = {s.name: i for i, s in enumerate(all_specs)}
    cases.sort(key=lambda c: (order[c["name"]], c["opset"], c["batch"]))
    with open(cases_path, "w") as f:
        json.dump(cases, f, indent=1)
    if os.path.exists(log_path) and os.path.getsize(log_path) == 0:
        os.remove(log_path)
    print(f"{prefix}exported {len(specs)} {what} ({len(cases)} cases) in {time.time() - start:.0f} s",
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--inline", action="store_true", help="self-contained .onnx files, no weights.bin")
    ap.add_argument("--prefix", default="zoo: ", help="prefix of the progress lines")
    args = ap.parse_args()
    export_all(SPECS, args.out_dir, args.only, args.inline, args.prefix, "models")


if __name__ == "__main__":
    torch.onnx.register_custom_op_symbolic("aten::stft", stft_symbolic, 17)
    main()
