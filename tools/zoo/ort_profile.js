// Profiles onnxruntime on one model: runs it REPS times with its node profiler on and prints
// the path of the profile it wrote (a JSON trace; tools/zoo/layers_vs_ort.py reads it).
//   NODE_PATH=$KILN_DATA/ort/node_modules node ort_profile.js MODEL.onnx REPS THREADS \
//       NAME=FILE.npy ...
// Inputs are .npy files (the dtypes of tools/zoo/npy.js). THREADS is onnxruntime's intra-op
// thread count; the executor is sequential, as in the zoo benchmark.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const ort = require('onnxruntime-node');
const {readNpy} = require('./npy.js');

function tensor(file) {
  const t = readNpy(file);
  return new ort.Tensor(t.type, t.data, t.dims);
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
    feeds[p.slice(0, eq)] = tensor(p.slice(eq + 1));
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
