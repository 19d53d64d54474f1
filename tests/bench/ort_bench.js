// Times onnxruntime-node (the reference) on the PaddleOCR models, for
// tools/bench. Prints `ort_<case>: <median ms> ms` lines.
//   node ort_bench.js MODELS_DIR THREADS case:model:NxCxHxW ...
'use strict';
const path = require('path');
const ort = require('onnxruntime-node');

(async () => {
  const [dir, threads, ...cases] = process.argv.slice(2);
  const sessions = {};
  for (const c of cases) {
    const [name, model, dims] = c.split(':');
    const shape = dims.split('x').map(Number);
    if (!sessions[model]) {
      sessions[model] = await ort.InferenceSession.create(path.join(dir, model), {
        intraOpNumThreads: Number(threads), interOpNumThreads: 1});
    }
    const s = sessions[model];
    const n = shape.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) data[i] = ((i * 2654435761) % 1000) / 1000 - 0.5;
    const feeds = {[s.inputNames[0]]: new ort.Tensor('float32', data, shape)};
    for (let i = 0; i < 2; i++) await s.run(feeds);
    const times = [];
    const start = Date.now();
    while (times.length < 30 && (times.length < 3 || Date.now() - start < 8000)) {
      const t0 = process.hrtime.bigint();
      await s.run(feeds);
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    times.sort((a, b) => a - b);
    console.log(`ort_${name}: ${times[Math.floor(times.length / 2)].toFixed(3)} ms`);
  }
})().catch((e) => { console.error(e); process.exit(1); });
