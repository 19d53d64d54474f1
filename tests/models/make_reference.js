// Builds realistic inputs for the PaddleOCR models (a synthetic text page for
// det, synthetic text lines for rec / cls), runs onnxruntime on them, and
// writes every input and output as .npy into OUT_DIR/<case>/.
//   node make_reference.js MODELS_DIR OUT_DIR
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

function writeNpy(file, data, shape) {
  const dict = `{'descr': '<f4', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
  let header = dict;
  const pre = 10;
  while ((pre + header.length + 1) % 64 !== 0) header += ' ';
  header += '\n';
  const buf = Buffer.alloc(pre + header.length + data.length * 4);
  buf.write('\x93NUMPY', 0, 'latin1');
  buf.writeUInt8(1, 6);
  buf.writeUInt8(0, 7);
  buf.writeUInt16LE(header.length, 8);
  buf.write(header, pre, 'latin1');
  Buffer.from(data.buffer, data.byteOffset, data.length * 4).copy(buf, pre + header.length);
  fs.writeFileSync(file, buf);
}

// A deterministic pseudo-random generator (mulberry32).
function rng(seed) {
  return () => {
    seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Grayscale image [h][w] in 0..255: light paper with dark glyph-like strokes
// arranged in text lines.
function textImage(h, w, lines, seed) {
  const r = rng(seed);
  const img = new Float32Array(h * w);
  for (let i = 0; i < h * w; i++) img[i] = 235 + 15 * r();
  const lineH = Math.floor(h / lines);
  for (let l = 0; l < lines; l++) {
    const top = l * lineH + Math.floor(lineH * 0.2);
    const gh = Math.max(4, Math.floor(lineH * 0.6));
    let x = Math.floor(4 + r() * w * 0.1);
    const end = w - Math.floor(4 + r() * w * 0.2);
    while (x < end) {
      const gw = Math.max(3, Math.floor(gh * (0.5 + 0.4 * r())));
      const strokes = 2 + Math.floor(r() * 3);
      for (let s = 0; s < strokes; s++) {
        const vertical = r() < 0.5;
        const sx = x + Math.floor(r() * gw * 0.7), sy = top + Math.floor(r() * gh * 0.7);
        const len = Math.floor((vertical ? gh : gw) * (0.5 + 0.5 * r()));
        const thick = Math.max(1, Math.floor(gh / 8));
        for (let k = 0; k < len; k++) {
          for (let t = 0; t < thick; t++) {
            const px = vertical ? sx + t : sx + k, py = vertical ? sy + k : sy + t;
            if (px >= 0 && px < w && py >= 0 && py < h) img[py * w + px] = 20 + 30 * r();
          }
        }
      }
      x += gw + Math.floor(gh * 0.25) + (r() < 0.12 ? gh : 0);
    }
  }
  return img;
}

// NCHW float input from grayscale images, normalized per channel.
function toInput(imgs, h, w, mean, std) {
  const n = imgs.length;
  const out = new Float32Array(n * 3 * h * w);
  for (let b = 0; b < n; b++)
    for (let c = 0; c < 3; c++)
      for (let i = 0; i < h * w; i++)
        out[((b * 3 + c) * h * w) + i] = (imgs[b][i] / 255 - mean[c]) / std[c];
  return out;
}

const IMAGENET = [[0.485, 0.456, 0.406], [0.229, 0.224, 0.225]];
const HALF = [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]];

const CASES = [
  {name: 'det_1x640', model: 'ch_PP-OCRv4_det_infer.onnx', n: 1, h: 640, w: 640, lines: 12, norm: IMAGENET},
  {name: 'det_2x320', model: 'ch_PP-OCRv4_det_infer.onnx', n: 2, h: 320, w: 320, lines: 6, norm: IMAGENET},
  {name: 'rec_1x320', model: 'ch_PP-OCRv4_rec_infer.onnx', n: 1, h: 48, w: 320, lines: 1, norm: HALF},
  {name: 'rec_4x160', model: 'ch_PP-OCRv4_rec_infer.onnx', n: 4, h: 48, w: 160, lines: 1, norm: HALF},
  {name: 'cls_1x192', model: 'ch_ppocr_mobile_v2.0_cls_infer.onnx', n: 1, h: 48, w: 192, lines: 1, norm: HALF},
  {name: 'cls_8x192', model: 'ch_ppocr_mobile_v2.0_cls_infer.onnx', n: 8, h: 48, w: 192, lines: 1, norm: HALF},
];

(async () => {
  const [modelsDir, outDir] = process.argv.slice(2);
  const sessions = {};
  for (const c of CASES) {
    if (!sessions[c.model]) {
      sessions[c.model] = await ort.InferenceSession.create(path.join(modelsDir, c.model),
                                                            {intraOpNumThreads: 2});
    }
    const s = sessions[c.model];
    const imgs = [];
    for (let b = 0; b < c.n; b++) imgs.push(textImage(c.h, c.w, c.lines, 1000 * c.h + 10 * b + c.n));
    const data = toInput(imgs, c.h, c.w, c.norm[0], c.norm[1]);
    const shape = [c.n, 3, c.h, c.w];
    const res = await s.run({[s.inputNames[0]]: new ort.Tensor('float32', data, shape)});
    const dir = path.join(outDir, c.name);
    fs.mkdirSync(dir, {recursive: true});
    writeNpy(path.join(dir, 'input_0.npy'), data, shape);
    const out = res[s.outputNames[0]];
    writeNpy(path.join(dir, 'output_0.npy'), out.data, out.dims);
    fs.writeFileSync(path.join(dir, 'model.txt'), c.model + '\n' + s.inputNames[0] + '\n');
    console.log(`fetch_testdata: ${c.name}: output ${out.dims.join('x')}`);
  }
})().catch((e) => { console.error(e); process.exit(1); });
