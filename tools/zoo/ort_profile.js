// Profiles onnxruntime on one model: runs it REPS times with its node profiler on and prints
// the path of the profile it wrote (a JSON trace; tools/zoo/layers_vs_ort.py reads it).
//   NODE_PATH=$KILN_DATA/ort/node_modules node ort_profile.js MODEL.onnx REPS THREADS \
//       NAME=FILE.npy ...
// Inputs are .npy files (float32, float64, int64, int32). THREADS is onnxruntime's intra-op
// thread count; the executor is sequential, as in the zoo benchmark.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const ort = require('onnxruntime-node');

const NPY = {'<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array],
             '<i8': ['int64', BigInt64Array], '<i4': ['int32', Int32Array]};

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not a .npy file`);
  const v1 = buf.readUInt8(6) === 1;
  const hlen = v1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = v1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + hlen);
  const descr = /'descr':\s*'([^']*)'/.exec(header)[1];
  if (!NPY[descr]) throw new Error(`${file}: dtype ${descr} not supported`);
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order`);
  const dims = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim())
                   .filter((s) => s).map(Number);
  const [type, Array] = NPY[descr];
  const body = buf.subarray(start + hlen);
  const copy = new Uint8Array(body.length);
  copy.set(body);
  return new ort.Tensor(type, new Array(copy.buffer, 0, body.length / Array.BYTES_PER_ELEMENT),
                        dims);
}

(async () => {
  const [model, reps, threads, ...pairs] = process.argv.slice(2);
  if (!model || !(+reps > 0) || !(+threads > 0)) {
    console.error('usage: node ort_profile.js MODEL.onnx REPS THREADS NAME=FILE.npy ...');
    process.exit(2);
  }
  const feeds = {};
  for (const p of pairs) {
    const eq = p.indexOf('=');
    feeds[p.slice(0, eq)] = readNpy(p.slice(eq + 1));
  }
  const prefix = path.join(os.tmpdir(), `kiln-ort-profile-${process.pid}`);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: +threads, interOpNumThreads: 1, executionMode: 'sequential',
    enableProfiling: true, profileFilePrefix: prefix});
  for (let i = 0; i < +reps; i++) await session.run(feeds);
  session.endProfiling();  // writes PREFIX_<date>.json
  const dir = path.dirname(prefix);
  const mine = fs.readdirSync(dir).filter((f) => f.startsWith(path.basename(prefix) + '_'));
  if (mine.length !== 1) throw new Error(`expected one profile ${prefix}_*.json, found ${mine.length}`);
  console.log(path.join(dir, mine[0]));
})().catch((e) => {
  console.error(`ort_profile.js: ${e.message}`);
  process.exit(1);
});
