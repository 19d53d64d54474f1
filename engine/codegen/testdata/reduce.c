typedef float kf32x8 __attribute__((ext_vector_type(8)));
typedef float kf32x8u __attribute__((ext_vector_type(8), aligned(4)));
void reduce(void** bufs, const long long* vars, long long start, long long end) {
  float* restrict data0 = (float*)bufs[0];
  float* restrict data1 = (float*)bufs[1];
  kf32x8 alu0 = ((kf32x8)(0.0f));
  for (long long ridx0 = (int)start; ridx0 < (int)end; ridx0++) {
    kf32x8 acc0 = alu0;
    for (long long ridx1 = 0; ridx1 < 8; ridx1++) {
      long long alu1 = ((ridx0*256)+(ridx1*32));
      kf32x8 val2 = (*((kf32x8u*)(data1+alu1)));
      kf32x8 alu3 = (acc0+val2);
      acc0 = alu3;
      kf32x8 val4 = (*((kf32x8u*)(data1+(alu1+8))));
      kf32x8 alu5 = (acc0+val4);
      acc0 = alu5;
      kf32x8 val6 = (*((kf32x8u*)(data1+(alu1+16))));
      kf32x8 alu7 = (acc0+val6);
      acc0 = alu7;
      kf32x8 val8 = (*((kf32x8u*)(data1+(alu1+24))));
      kf32x8 alu9 = (acc0+val8);
      acc0 = alu9;
    }
    data0[ridx0] = (((((((acc0[0]+acc0[1])+acc0[2])+acc0[3])+acc0[4])+acc0[5])+acc0[6])+acc0[7]);
  }
}
