typedef float kf32x8 __attribute__((ext_vector_type(8)));
typedef float kf32x8u __attribute__((ext_vector_type(8), aligned(4)));
#ifndef KILN_FMA_kf32x8
#define KILN_FMA_kf32x8
static inline kf32x8 kiln_fma_kf32x8(kf32x8 a, kf32x8 b, kf32x8 c) {
#pragma clang fp contract(fast)
  return a*b+c;
}
#endif
void fused(void** bufs, const long long* vars, long long start, long long end) {
  float* restrict data0 = (float*)bufs[0];
  float* restrict data1 = (float*)bufs[1];
  float* restrict data2 = (float*)bufs[2];
  kf32x8 alu0 = ((kf32x8)(1.0f));
  kf32x8 alu1 = ((kf32x8)(0.0f));
  for (long long ridx0 = (int)start; ridx0 < (int)end; ridx0++) {
    for (long long ridx1 = 0; ridx1 < 8; ridx1++) {
      long long alu2 = (ridx1*8);
      long long alu3 = ((ridx0*64)+alu2);
      kf32x8 val4 = (*((kf32x8u*)(data1+alu3)));
      kf32x8 val5 = (*((kf32x8u*)(data2+alu2)));
      kf32x8 alu6 = kiln_fma_kf32x8(val4,val5,alu0);
      kf32x8 alu7 = __builtin_elementwise_max(alu6,alu1);
      kf32x8 alu8 = ((kf32x8){__builtin_sqrtf(alu7[0]), __builtin_sqrtf(alu7[1]), __builtin_sqrtf(alu7[2]), __builtin_sqrtf(alu7[3]), __builtin_sqrtf(alu7[4]), __builtin_sqrtf(alu7[5]), __builtin_sqrtf(alu7[6]), __builtin_sqrtf(alu7[7])});
      *((kf32x8u*)(data0+alu3)) = alu8;
    }
  }
}
