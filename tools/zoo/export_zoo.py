#!/usr/bin/python3
"""Exports kiln's model zoo: torchvision / torch models with seeded random weights, as ONNX.

  /usr/bin/python3 tools/zoo/export_zoo.py OUT_DIR [--only NAME,...] [--inline] [--prefix STR]

The models are defined in zoo_vision.py and zoo_sequence.py, the inputs, weight preparation,
checks and the Spec registry they share in zoo_common.py; this file exports them.

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
import os
import sys
import time
import warnings

import numpy as np
import onnx
import torch

warnings.filterwarnings("ignore")

import zoo_vision  # noqa: E402,F401  (registers its models in SPECS: the zoo's order)
import zoo_sequence  # noqa: E402  (registers its models after zoo_vision's)
from zoo_common import INLINE_LIMIT, SPECS, check_finite, seed_of, to_numpy  # noqa: E402

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
    torch.onnx.register_custom_op_symbolic("aten::stft", zoo_sequence.stft_symbolic, 17)
    main()
