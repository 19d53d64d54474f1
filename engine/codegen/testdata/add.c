typedef float kf32x8 __attribute__((ext_vector_type(8)));
typedef float kf32x8u __attribute__((ext_vector_type(8), aligned(4)));
typedef int ki32x8 __attribute__((ext_vector_type(8)));
typedef unsigned char kbx8 __attribute__((ext_vector_type(8)));
#ifndef KILN_H_kiln_mload_kf32x8
#define KILN_H_kiln_mload_kf32x8
static inline kf32x8 kiln_mload_kf32x8(const void* p, kbx8 g, kf32x8 alt) {
  unsigned long long all_; __builtin_memcpy(&all_, &g, sizeof(all_));
  if (all_ == 0x0101010101010101ull)
    return *(const kf32x8u*)p;
  ki32x8 m = -__builtin_convertvector(g, ki32x8);
#if defined(__AVX__)
  kf32x8 v = (kf32x8)__builtin_ia32_maskloadps256((const kf32x8*)p, m);
#else
  kf32x8 v = alt;
  for (int i = 0; i < 8; ++i) if (g[i]) v[i] = ((const float*)p)[i];
#endif
  return (m != 0) ? v : alt;
}
#endif
#ifndef KILN_H_kiln_mstore_kf32x8
#define KILN_H_kiln_mstore_kf32x8
static inline void kiln_mstore_kf32x8(void* p, kbx8 g, kf32x8 v) {
  unsigned long long all_; __builtin_memcpy(&all_, &g, sizeof(all_));
  if (all_ == 0x0101010101010101ull)
    { *(kf32x8u*)p = v; return; }
#if defined(__AVX__)
  __builtin_ia32_maskstoreps256((kf32x8*)p, -__builtin_convertvector(g, ki32x8), (kf32x8)v);
#else
  for (int i = 0; i < 8; ++i) if (g[i]) ((float*)p)[i] = v[i];
#endif
}
#endif
void add(void** bufs, const long long* vars, long long start, long long end) {
  float* restrict data0 = (float*)bufs[0];
  float* restrict data1 = (float*)bufs[1];
  float* restrict data2 = (float*)bufs[2];
  ki32x8 alu0 = ((ki32x8){0, 1, 2, 3, 4, 5, 6, 7});
  ki32x8 alu1 = ((ki32x8)(37));
  kf32x8 alu2 = ((kf32x8)(0.0f));
  for (long long ridx0 = (int)start; ridx0 < (int)end; ridx0++) {
    long long alu3 = (ridx0*8);
    ki32x8 alu4 = ((ki32x8)(alu3));
    ki32x8 alu5 = (alu4+alu0);
    kbx8 alu6 = (__builtin_convertvector(alu5<alu1, kbx8)&1);
    kf32x8 val7 = kiln_mload_kf32x8(data1+alu3, alu6, alu2);
    kf32x8 val8 = kiln_mload_kf32x8(data2+alu3, alu6, alu2);
    kf32x8 alu9 = (val7+val8);
    kiln_mstore_kf32x8(data0+alu3, alu6, alu9);
  }
}
