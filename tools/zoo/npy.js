// .npy files for the zoo's onnxruntime scripts (zoo_reference.js, ort_profile.js): readNpy
// gives {type (onnxruntime's name), data (a typed array), dims}; npyBytes writes one.
'use strict';
const fs = require('fs');

const DTYPES = {
  // npy descr -> [onnxruntime type, typed array, bytes per element]
  '<f4': ['float32', Float32Array, 4],
  '<f8': ['float64', Float64Array, 8],
  '<i8': ['int64', BigInt64Array, 8],
  '<i4': ['int32', Int32Array, 4],
  '<u1': ['uint8', Uint8Array, 1],
  '|u1': ['uint8', Uint8Array, 1],
  '|i1': ['int8', Int8Array, 1],
  '|b1': ['bool', Uint8Array, 1],
};
const DESCR = {
  float32: '<f4', float64: '<f8', int64: '<i8', int32: '<i4', uint8: '|u1', int8: '|i1', bool: '|b1',
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
  const dims = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s)
      .map(Number);
  const t = DTYPES[descr];
  if (!t) throw new Error(`${file}: dtype ${descr} not supported`);
  const count = dims.reduce((a, b) => a * b, 1);
  const off = hstart + hlen;
  const bytes = new Uint8Array(count * t[2]);
  bytes.set(buf.subarray(off, off + count * t[2]));
  const data = new t[1](bytes.buffer, 0, count);
  return {type: t[0], data, dims};
}

function npyBytes(type, data, dims) {
  const descr = DESCR[type];
  if (!descr) throw new Error(`cannot write ${type} as .npy`);
  const shape = dims.join(', ') + (dims.length === 1 ? ',' : '');
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${shape}), }`;
  const pre = 10;
  while ((pre + header.length + 1) % 64 !== 0) header += ' ';
  header += '\n';
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const buf = Buffer.alloc(pre + header.length + body.length);
  buf.write('\x93NUMPY', 0, 'latin1');
  buf.writeUInt8(1, 6);
  buf.writeUInt8(0, 7);
  buf.writeUInt16LE(header.length, 8);
  buf.write(header, pre, 'latin1');
  body.copy(buf, pre + header.length);
  return buf;
}

module.exports = {readNpy, npyBytes};
