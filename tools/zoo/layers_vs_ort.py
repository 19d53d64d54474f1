#!/usr/bin/env python3
"""kiln's kernels beside onnxruntime's nodes, layer by layer, for one model of the zoo.

  tools/zoo/layers_vs_ort.py MODEL [--batch B] [--threads T] [--reps N] [--top K]

Runs the model's zoo case (ZOO_DIR/manifest.tsv, highest opset) through `kiln run` with DEBUG=2
and through onnxruntime-node's profiler (tools/zoo/ort_profile.js), at the same batch and thread
count, and pairs the two sides' layers by their arithmetic: a kiln reduce kernel and an
onnxruntime Conv / MatMul / Gemm node with the same FLOP count (within 0.5%) are the same layer.
A 3x3 convolution that kiln runs as Winograd F(2x2, 3x3) is paired through its 16-plane matmul.
Each side's time per layer is its fastest run (kiln: per position in the replay; onnxruntime: per
node). Prints the paired layers grouped by shape with both times, the worst first, then what is
left unpaired on each side (kiln's elementwise kernels: activations, padding, transforms, copies,
and reduces out of order or of other ops: pools; onnxruntime's other nodes), and the totals.

A batch that kiln builds in slices of images (its `batch:` line) is refused: one slice's kernels
do not pair with whole-batch nodes; KILN_BATCH_SPLIT=0 compares kiln's whole-batch kernels.

Needs the kiln CLI built (`bazel build -c opt //clients:kiln`), node, and the data of
tools/fetch_testdata ($KILN_DATA, default ~/.cache/kiln/data).
"""
import argparse
import collections
import json
import math
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.environ.get("KILN_DATA", os.path.expanduser("~/.cache/kiln/data"))
ZOO = os.path.join(DATA, "zoo")


def zoo_case(model, batch):
    """(onnx path, [NAME=PATH]) of the manifest's case, at its highest opset."""
    best = None
    with open(os.path.join(ZOO, "manifest.tsv")) as f:
        for line in f:
            if line.startswith("#"):
                continue
            c = line.rstrip("\n").split("\t")
            if c[0] != model or int(c[3]) != batch:
                continue
            if best is None or int(c[2]) > int(best[2]):
                best = c
    if best is None:
        sys.exit(f"layers_vs_ort: no zoo case {model} at batch {batch} in {ZOO}/manifest.tsv")
    inputs = []
    for pair in best[8].split(","):
        name, rel = pair.split("=", 1)
        inputs.append(f"{name}={os.path.join(ZOO, rel)}")
    return os.path.join(ZOO, best[4]), inputs


def kiln_layers(kiln, model, inputs, threads, reps):
    """[(kernel name, us, flops)] per position of one replay, each its fastest run."""
    env = dict(os.environ, DEBUG="2", KILN_THREADS=str(threads))
    args = [kiln, "run", "--model", model, "--repeat", str(reps)]
    for i in inputs:
        args += ["--input", i]
    out = subprocess.run(args, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"layers_vs_ort: kiln run failed:\n{out.stderr[-2000:]}")
    text = out.stdout + out.stderr
    sliced = re.search(r"^batch: (\d+) images, built in slices of (\d+)", text, re.M)
    if sliced:
        sys.exit(f"layers_vs_ort: kiln built this batch of {sliced[1]} images in slices of "
                 f"{sliced[2]}, so its kernels do one slice's work each and do not pair with "
                 "onnxruntime's whole-batch nodes; compare kiln's whole-batch kernels with "
                 "KILN_BATCH_SPLIT=0, or use --batch 1")
    rows = [m for m in re.finditer(
        r"^kernel (\S+)\s+global=\S+\s+([\d.]+) us\s+([\d.]+) GFLOP/s.*\(jit\)", text, re.M)]
    # The replays run the same kernels in the same order: the shortest period of the names
    # is one replay.
    names = [m[1] for m in rows]
    per_run = next((p for p in range(1, len(names) // 2 + 1)
                    if len(names) % p == 0 and names[p:] == names[:-p]), 0)
    if per_run == 0:
        sys.exit("layers_vs_ort: no repeating replays in kiln's output (--reps of at least 4)")
    runs = len(rows) // per_run
    best = []
    for i in range(per_run):
        times = [float(rows[r * per_run + i][2]) for r in range(runs)]
        m = rows[i]
        us = min(times)
        flops = float(m[3]) * float(m[2]) * 1e3  # GFLOP/s x us
        best.append((m[1], us, flops))
    return best


def ort_layers(model, inputs, threads, reps):
    """[(node name, op, output shape, us, flops, Winograd flops)] per node, each its fastest
    run (the FLOP counts 0 for nodes that are not a Conv / MatMul / Gemm)."""
    env = dict(os.environ, NODE_PATH=os.path.join(DATA, "ort", "node_modules"))
    out = subprocess.run(["node", os.path.join(ROOT, "tools", "zoo", "ort_profile.js"), model,
                          str(reps), str(threads)] + inputs, env=env, capture_output=True,
                         text=True)
    if out.returncode != 0:
        sys.exit(f"layers_vs_ort: onnxruntime failed:\n{out.stderr[-2000:]}")
    path = out.stdout.strip().splitlines()[-1]
    with open(path) as f:
        events = json.load(f)
    os.unlink(path)
    times = collections.defaultdict(list)
    first = {}
    info = {}
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        name = e["name"][: -len("_kernel_time")]
        times[name].append(e["dur"])
        first.setdefault(name, e["ts"])
        a = e.get("args", {})
        shapes = [list(s.values())[0] for s in a.get("input_type_shape", [])]
        outs = [list(s.values())[0] for s in a.get("output_type_shape", [])]
        info[name] = (a.get("op_name", "?"), shapes, outs)
    nodes = []
    for name, ts in sorted(times.items(), key=lambda kv: first[kv[0]]):
        op, shapes, outs = info[name]
        nodes.append((name, op, outs[0] if outs else [], min(ts), node_flops(op, shapes, outs),
                      winograd_flops(op, shapes, outs)))
    return nodes


def node_flops(op, shapes, outs):
    """Multiply-adds x 2 of a Conv / MatMul / Gemm node (0 for other nodes)."""
    try:
        if op in ("Conv", "FusedConv") and len(shapes) >= 2 and outs:
            w = shapes[1]  # (Cout, Cin / groups, k...)
            return 2.0 * math.prod(outs[0]) * math.prod(w[1:])
        if op in ("MatMul", "FusedMatMul", "Gemm") and len(shapes) >= 2 and outs:
            a = shapes[0]
            return 2.0 * math.prod(outs[0]) * a[-1]
    except (TypeError, IndexError):
        pass
    return 0.0


def winograd_flops(op, shapes, outs):
    """The 16-plane matmul of a 3x3, stride-1 convolution run as Winograd F(2x2, 3x3)."""
    if op not in ("Conv", "FusedConv") or len(shapes) < 2 or not outs:
        return 0.0
    w, y = shapes[1], outs[0]
    if len(w) != 4 or w[2:] != [3, 3] or len(y) != 4:
        return 0.0
    tiles = y[0] * ((y[2] + 1) // 2) * ((y[3] + 1) // 2)
    return 2.0 * 16 * w[0] * w[1] * tiles


def pair(kernels, nodes):
    """Aligns kiln's reduce kernels with onnxruntime's Conv / MatMul / Gemm nodes, both in
    execution order: the longest in-order pairing of kernels and nodes whose FLOP counts agree.
    kiln counts the lanes it computes, so its count may exceed the node's by the padding of its
    vectors (a 55-wide row in 64 lanes); a kernel within [1, 1.4] of a node's count (or of its
    Winograd matmul's) may pair with it, the closer the better."""
    ks = [i for i, k in enumerate(kernels) if k[0].startswith("r_") and k[2] > 0]
    ns = [j for j, n in enumerate(nodes) if n[4] > 0]

    def score(i, j):  # (|log FLOP ratio|, Winograd?) of kernel ks[i] as node ns[j], or None
        best = None
        for target, wino in ((nodes[ns[j]][4], False), (nodes[ns[j]][5], True)):
            if target <= 0:
                continue
            r = kernels[ks[i]][2] / target
            if 0.995 <= r <= 1.4 and (best is None or abs(math.log(r)) < best[0]):
                best = (abs(math.log(r)), wino)
        return best

    a, b = len(ks), len(ns)
    # dp[i][j]: best (count, -cost) over ks[i:], ns[j:]
    dp = [[(0, 0.0)] * (b + 1) for _ in range(a + 1)]
    choice = [[0] * (b + 1) for _ in range(a + 1)]
    for i in range(a - 1, -1, -1):
        for j in range(b - 1, -1, -1):
            opts = [(dp[i + 1][j], 1), (dp[i][j + 1], 2)]
            sc = score(i, j)
            if sc is not None:
                c, cost = dp[i + 1][j + 1]
                opts.append(((c + 1, cost - sc[0]), 3))
            dp[i][j], choice[i][j] = max(opts, key=lambda o: o[0])
    pairs, used = [], set()
    i = j = 0
    while i < a and j < b:
        c = choice[i][j]
        if c == 3:
            pairs.append((nodes[ns[j]], ks[i], score(i, j)[1]))
            used.add(ks[i])
            i, j = i + 1, j + 1
        elif c == 1:
            i += 1
        else:
            j += 1
    return pairs, used


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", help="a zoo model name (ZOO_DIR/manifest.tsv), e.g. mnasnet1_0")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=30, help="runs on each side (default 30)")
    ap.add_argument("--top", type=int, default=20, help="paired shapes to list (default 20)")
    ap.add_argument("--kiln", default=os.path.join(ROOT, "bazel-bin", "clients", "kiln"))
    a = ap.parse_args()
    if not os.path.exists(a.kiln):
        sys.exit(f"layers_vs_ort: {a.kiln} not found: bazel build -c opt //clients:kiln")
    model, inputs = zoo_case(a.model, a.batch)
    kernels = kiln_layers(a.kiln, model, inputs, a.threads, a.reps)
    nodes = ort_layers(model, inputs, a.threads, a.reps)
    print(f"# {a.model} batch {a.batch}, {a.threads} thread(s): kiln {len(kernels)} kernels, "
          f"onnxruntime {len(nodes)} nodes")
    pairs, used = pair(kernels, nodes)
    groups = collections.OrderedDict()
    for n, i, wino in pairs:
        key = (n[1] + (" (Winograd in kiln)" if wino else ""), tuple(n[2]), n[4])
        g = groups.setdefault(key, [0, 0.0, 0.0, kernels[i][0]])
        g[0] += 1
        g[1] += kernels[i][1]
        g[2] += n[3]
    rows = sorted(groups.items(), key=lambda kv: -(kv[1][1] - kv[1][2]))
    print("(worst first; GFLOP/s are the node's FLOPs over each side's time: a Winograd layer's\n"
          " transforms are among kiln's unpaired elementwise kernels)")
    print(f"{'layer':44s} {'n':>3s} {'kiln us':>9s} {'ORT us':>9s} {'ratio':>6s}  GFLOP/s kiln/ORT  kernel")
    for (op, shape, flops), (cnt, kt, ot, kname) in rows[: a.top]:
        label = f"{op} -> {'x'.join(map(str, shape))}"
        print(f"{label:44s} {cnt:3d} {kt:9.1f} {ot:9.1f} {kt / max(ot, 1e-9):6.2f}  "
              f"{cnt * flops / kt / 1e3:6.1f} / {cnt * flops / max(ot, 1e-9) / 1e3:6.1f}  {kname}")
    paired_k = sum(kernels[i][1] for _, i, _ in pairs)
    paired_o = sum(n[3] for n, _, _ in pairs)
    rest_k = collections.Counter()
    for i, k in enumerate(kernels):
        if i not in used:
            rest_k["kiln " + ("reduce" if k[0].startswith("r_") else "elementwise")] += k[1]
    paired_names = {n[0] for n, _, _ in pairs}
    rest_o = collections.Counter()
    for n in nodes:
        if n[0] not in paired_names:
            rest_o[n[1]] += n[3]
    total_k = sum(k[1] for k in kernels)
    total_o = sum(n[3] for n in nodes)
    print(f"paired layers: kiln {paired_k / 1e3:.2f} ms, onnxruntime {paired_o / 1e3:.2f} ms "
          f"({len(pairs)} layers, {paired_k / max(paired_o, 1e-9):.2f}x)")
    print("unpaired kiln: " + ", ".join(f"{k} {v / 1e3:.2f} ms" for k, v in rest_k.most_common()))
    print("unpaired onnxruntime: " +
          ", ".join(f"{k} {v / 1e3:.2f} ms" for k, v in rest_o.most_common(8)))
    print(f"total: kiln {total_k / 1e3:.2f} ms of kernels, onnxruntime {total_o / 1e3:.2f} ms of "
          f"nodes ({total_k / max(total_o, 1e-9):.2f}x)")


if __name__ == "__main__":
    main()
