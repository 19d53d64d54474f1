// Runs onnxruntime on every case of the model zoo that tools/zoo/export_zoo.py exported (from
// ZOO_DIR/cases.json), writes onnxruntime's outputs as .npy (the reference kiln is compared with),
// compares them with torch's (ZOO_DIR/compare.tsv: max |onnxruntime - torch|, the atol that
// needs, the smallest argmax margin) and fails when they disagree beyond a case's tolerance or
// argmax, or a detector's count differs. Then writes ZOO_DIR/manifest.tsv: a '#' header line,
// then one line per case, TAB-separated:
//   name family opset batch model check atol rtol inputs outputs ort_ms
// (inputs / outputs: comma-separated ONNX_NAME=PATH.npy, paths relative to ZOO_DIR; ort_ms:
// onnxruntime's median latency with 1 intra-op thread, sequential executor, over 1-10 runs after
// the reference run; informational).
//   NODE_PATH=$KILN_DATA/ort/node_modules node zoo_reference.js ZOO_DIR [--prefix STR]
//       [--keep-torch] [--only NAME,...]   (--only: compare only, no manifest)
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');
const {readNpy, npyBytes} = require('./npy.js');

// ---- comparisons --------------------------------------------------------------------------------

// Max |a - b|, and the smallest atol at which every element passes |a - b| <= atol + rtol |b|.
function compare(a, b, rtol) {
  let maxAbs = 0, needAtol = 0;
  for (let i = 0; i < a.length; i++) {
    const x = Number(a[i]), y = Number(b[i]);
    const d = Math.abs(x - y);
    if (!(d <= maxAbs)) maxAbs = Number.isNaN(d) ? Infinity : d;
    const need = d - rtol * Math.abs(y);
    if (!(need <= needAtol)) needAtol = Number.isNaN(need) ? Infinity : need;
  }
  return {maxAbs, needAtol};
}

// Argmax over the last axis for every row, and the smallest top-1 / top-2 margin.
function argmaxRows(data, dims) {
  const n = dims[dims.length - 1];
  const rows = data.length / n;
  const idx = new Int32Array(rows);
  let minMargin = Infinity;
  for (let r = 0; r < rows; r++) {
    let best = -Infinity, second = -Infinity, bi = 0;
    for (let j = 0; j < n; j++) {
      const v = data[r * n + j];
      if (v > best) { second = best; best = v; bi = j; } else if (v > second) second = v;
    }
    idx[r] = bi;
    minMargin = Math.min(minMargin, best - second);
  }
  return {idx, minMargin};
}

const sameDims = (a, b) => a.length === b.length && a.every((d, i) => d === b[i]);

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function fmt(x) {
  return x === 0 ? '0' : x.toExponential(1);
}

// ---- main -----------------------------------------------------------------------------------------

(async () => {
  const args = process.argv.slice(2);
  const zoo = args[0];
  const prefix = args.includes('--prefix') ? args[args.indexOf('--prefix') + 1] : 'zoo: ';
  const keepTorch = args.includes('--keep-torch');
  const only = args.includes('--only') ? args[args.indexOf('--only') + 1].split(',') : null;
  const cases = JSON.parse(fs.readFileSync(path.join(zoo, 'cases.json'), 'utf8'));
  const opts = {
    intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential', logSeverityLevel: 3,
  };
  const manifest = ['# name\tfamily\topset\tbatch\tmodel\tcheck\tatol\trtol\tinputs\toutputs\tort_ms'];
  const report = ['# name\topset\tbatch\tort_ms\tmax_abs_ort_vs_torch\tatol_needed_at_rtol\t' +
                  'argmax_margin\tshapes'];
  const failures = [];
  const written = new Map();  // output file contents (by batch dir + output name) -> path, to share
  let session = null, sessionModel = null;
  const start = Date.now();
  // One progress line per model: its cases' latencies and the largest difference from torch.
  const names = [...new Set(cases.map((c) => c.name))];
  let line = null;
  const flush = () => {
    if (!line) return;
    console.log(`${prefix}onnxruntime ${line.name} (${names.indexOf(line.name) + 1}/${names.length}): ` +
                `${line.times.join(', ')}; max |ort - torch| ${fmt(line.maxAbs)}`);
    line = null;
  };
  for (const c of cases) {
    if (only && !only.includes(c.name)) continue;
    if (line && line.name !== c.name) flush();
    if (!line) line = {name: c.name, times: [], maxAbs: 0};
    const tag = `${c.name} op${c.opset} b${c.batch}`;
    if (sessionModel !== c.model) {
      session = null;
      session = await ort.InferenceSession.create(path.join(zoo, c.model), opts);
      sessionModel = c.model;
    }
    const feeds = {};
    for (const [name, file] of c.inputs) {
      const a = readNpy(path.join(zoo, file));
      feeds[name] = new ort.Tensor(a.type, a.data, a.dims);
    }
    let t0 = process.hrtime.bigint();
    const res = await session.run(feeds);
    const first = Number(process.hrtime.bigint() - t0) / 1e6;
    // Median of a few more runs (fewer for slow cases).
    const reps = first > 1500 ? 1 : first > 400 ? 3 : first > 50 ? 5 : 10;
    const times = [];
    for (let r = 0; r < reps; r++) {
      t0 = process.hrtime.bigint();
      await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    const ms = median(times);

    // Outputs: write, compare with torch.
    let maxAbs = 0, needAtol = 0, margin = '-';
    const shapes = [];
    const errs = [];
    const outs = [];
    c.outputs.forEach(([name, file], i) => {
      const o = res[name];
      if (!o) throw new Error(`${tag}: onnxruntime has no output '${name}'`);
      const t = readNpy(path.join(zoo, c.torch[i]));
      shapes.push(o.dims.join('x') || 'scalar');
      const bytes = npyBytes(o.type, o.data, o.dims);
      // A case whose output equals the other opset's byte for byte shares its file.
      const key = path.dirname(file) + '/' + name;
      const prev = written.get(key);
      let rel = file;
      if (prev && prev.bytes.equals(bytes)) {
        rel = prev.file;
      } else {
        fs.writeFileSync(path.join(zoo, file), bytes);
        written.set(key, {bytes, file});
      }
      outs.push(`${name}=${rel}`);
      if (o.type !== t.type) {
        errs.push(`output ${name}: onnxruntime ${o.type}, torch ${t.type}`);
        return;
      }
      if (!sameDims(o.dims, t.dims)) {
        errs.push(`output ${name}: onnxruntime ${o.dims.join('x')}, torch ${t.dims.join('x')}`);
        return;
      }
      const r = compare(o.data, t.data, c.rtol);
      if (o.type !== 'float32' && o.type !== 'float64' && r.maxAbs !== 0) {
        errs.push(`output ${name}: integer values differ`);
      }
      maxAbs = Math.max(maxAbs, r.maxAbs);
      needAtol = Math.max(needAtol, r.needAtol);
    });
    for (const item of c.check === '-' ? [] : c.check.split(',')) {
      const [kind, idx] = item.split(':');
      const [name] = c.outputs[Number(idx)];
      if (kind === 'argmax') {
        const o = res[name];
        const t = readNpy(path.join(zoo, c.torch[Number(idx)]));
        const a = argmaxRows(o.data, o.dims), b = argmaxRows(t.data, t.dims);
        margin = fmt(a.minMargin);
        if (a.idx.length !== b.idx.length || a.idx.some((v, i) => v !== b.idx[i])) {
          errs.push(`argmax of ${name} differs from torch`);
        }
      } else if (kind === 'detection') {
        if (res[name].dims[0] === 0) errs.push('no detections');
      } else {
        errs.push(`unknown check ${item}`);
      }
    }
    if (needAtol > c.atol) {
      errs.push(`max |onnxruntime - torch| ${fmt(maxAbs)} exceeds atol ${c.atol} + rtol ${c.rtol}`);
    }
    manifest.push([c.name, c.family, c.opset, c.batch, c.model, c.check, c.atol, c.rtol,
      c.inputs.map(([n, f]) => `${n}=${f}`).join(','), outs.join(','), ms.toFixed(2)].join('\t'));
    report.push([c.name, c.opset, c.batch, ms.toFixed(2), fmt(maxAbs), fmt(Math.max(needAtol, 0)),
      margin, shapes.join(',')].join('\t'));
    line.times.push(`op${c.opset} b${c.batch} ${ms.toFixed(1)} ms`);
    line.maxAbs = Math.max(line.maxAbs, maxAbs);
    for (const e of errs) {
      failures.push(`${tag}: ${e}`);
      console.log(`${prefix}onnxruntime ${tag}: FAILED: ${e}`);
    }
  }
  flush();
  session = null;
  fs.writeFileSync(path.join(zoo, 'compare.tsv'), report.join('\n') + '\n');
  if (failures.length) {
    console.error(`${prefix}onnxruntime disagrees with torch:\n  ${failures.join('\n  ')}`);
    process.exit(1);
  }
  if (!only) {
    fs.writeFileSync(path.join(zoo, 'manifest.tsv'), manifest.join('\n') + '\n');
    if (!keepTorch) fs.rmSync(path.join(zoo, '.torch'), {recursive: true, force: true});
  }
  const secs = ((Date.now() - start) / 1000).toFixed(0);
  console.log(`${prefix}onnxruntime ran ${manifest.length - 1} cases in ${secs} s`);
})().catch((e) => { console.error(e); process.exit(1); });
