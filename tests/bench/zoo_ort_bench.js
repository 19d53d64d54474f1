// Times onnxruntime-node (the reference) on one model of the zoo, for
// tests/bench/zoo_bench.cc: each case on its own .npy inputs, 2 warm-up runs,
// then the median (STAT median) or the minimum (STAT min) of up to REPS runs,
// stopping after BUDGET_MS (at least 3).
// Prints `ort_<id>: <ms> ms` per case; a case that fails prints its
// error on stderr and no line (the others go on).
//   NODE_PATH=$KILN_DATA/ort/node_modules node zoo_ort_bench.js ZOO_DIR THREADS REPS BUDGET_MS \
//       STAT MODEL id:onnx_name=rel/path.npy[,onnx_name=rel/path.npy...] ...
// (MODEL and the .npy paths are relative to ZOO_DIR, as in manifest.tsv.)
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

// npy descr -> [onnxruntime type, typed array, bytes per element]
// (the reader of tools/zoo/zoo_reference.js)
const DTYPES = {
  '<f4': ['float32', Float32Array, 4],
  '<f8': ['float64', Float64Array, 8],
  '<i8': ['int64', BigInt64Array, 8],
  '<i4': ['int32', Int32Array, 4],
  '<u1': ['uint8', Uint8Array, 1],
  '|u1': ['uint8', Uint8Array, 1],
  '|i1': ['int8', Int8Array, 1],
  '|b1': ['bool', Uint8Array, 1],
};

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = buf.readUInt8(6);
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const hstart = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', hstart, hstart + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order`);
  const dims = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim())
      .filter((s) => s).map(Number);
  const t = DTYPES[descr];
  if (!t) throw new Error(`${file}: dtype ${descr} not supported`);
  const count = dims.reduce((a, b) => a * b, 1);
  const off = hstart + hlen;
  const bytes = new Uint8Array(count * t[2]);
  bytes.set(buf.subarray(off, off + count * t[2]));
  return {type: t[0], data: new t[1](bytes.buffer, 0, count), dims};
}

(async () => {
  const [dir, threads, reps, budgetMs, stat, model, ...cases] = process.argv.slice(2);
  if (!cases.length || (stat !== 'median' && stat !== 'min')) {
    throw new Error('usage: zoo_ort_bench.js ZOO_DIR THREADS REPS BUDGET_MS median|min MODEL id:inputs ...');
  }
  const session = await ort.InferenceSession.create(path.join(dir, model), {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1, executionMode: 'sequential',
    logSeverityLevel: 3});
  let failed = false;
  for (const c of cases) {
    const colon = c.indexOf(':');
    const id = c.slice(0, colon);
    try {
      const feeds = {};
      for (const item of c.slice(colon + 1).split(',')) {
        const eq = item.indexOf('=');
        const a = readNpy(path.join(dir, item.slice(eq + 1)));
        feeds[item.slice(0, eq)] = new ort.Tensor(a.type, a.data, a.dims);
      }
      for (let i = 0; i < 2; i++) await session.run(feeds);
      const times = [];
      const start = Date.now();
      while (times.length < Number(reps) &&
             (times.length < 3 || Date.now() - start < Number(budgetMs))) {
        const t0 = process.hrtime.bigint();
        await session.run(feeds);
        times.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
      times.sort((a, b) => a - b);
      const ms = stat === 'min' ? times[0] : times[Math.floor(times.length / 2)];
      console.log(`ort_${id}: ${ms.toFixed(3)} ms`);
    } catch (e) {
      console.error(`ort_${id}: ${e.message || e}`);
      failed = true;
    }
  }
  process.exit(failed ? 1 : 0);
})().catch((e) => { console.error(e); process.exit(1); });
