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
const path = require('path');
const ort = require('onnxruntime-node');
const {readNpy} = require(path.join(__dirname, '..', '..', 'tools', 'zoo', 'npy.js'));

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
