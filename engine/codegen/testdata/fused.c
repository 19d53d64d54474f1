typedef float kf32x8 __attribute__((ext_vector_type(8)));
typedef float kf32x8u __attribute__((ext_vector_type(8), aligned(4)));
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
      kf32x8 alu6 = (val4*val5);
      kf32x8 alu7 = (alu6+alu0);
      kf32x8 alu8 = __builtin_elementwise_max(alu7,alu1);
      kf32x8 alu9 = ((kf32x8){__builtin_sqrtf(alu8[0]), __builtin_sqrtf(alu8[1]), __builtin_sqrtf(alu8[2]), __builtin_sqrtf(alu8[3]), __builtin_sqrtf(alu8[4]), __builtin_sqrtf(alu8[5]), __builtin_sqrtf(alu8[6]), __builtin_sqrtf(alu8[7])});
      *((kf32x8u*)(data0+alu3)) = alu9;
    }
  }
}
