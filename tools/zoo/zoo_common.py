"""The model zoo's shared pieces: seeded inputs, weight preparation, the checks that reject a
degenerate model, and the Spec registry (spec() adds a model to SPECS). The models themselves are
in zoo_vision.py and zoo_sequence.py; the export in export_zoo.py, whose docstring describes the
zoo."""

import zlib

import numpy as np
import torch
from torch import nn

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


def batch_1_and_8(name, model, candidates, head=None):
    """The inputs of the batch-1 and batch-8 cases: the first 9 candidate rows pick_rows keeps."""
    rows = pick_rows(name, model, candidates, 9, head)
    return {1: [candidates[rows[:1]]], 8: [candidates[rows[1:]]]}


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
