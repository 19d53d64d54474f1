typedef float kf32x8 __attribute__((ext_vector_type(8)));
typedef float kf32x8u __attribute__((ext_vector_type(8), aligned(4)));
#ifndef KILN_FMA_kf32x8
#define KILN_FMA_kf32x8
static inline kf32x8 kiln_fma_kf32x8(kf32x8 a, kf32x8 b, kf32x8 c) {
#pragma clang fp contract(fast)
  return a*b+c;
}
#endif
void matmul(void** bufs, const long long* vars, long long start, long long end) {
  float* restrict data0 = (float*)bufs[0];
  float* restrict data1 = (float*)bufs[1];
  float* restrict data2 = (float*)bufs[2];
  kf32x8 alu0 = ((kf32x8)(0.0f));
  for (long long ridx0 = 0; ridx0 < 4; ridx0++) {
    long long alu1 = (ridx0*16);
    for (long long ridx1 = (int)start; ridx1 < (int)end; ridx1++) {
      kf32x8 acc0 = alu0;
      kf32x8 acc1 = alu0;
      kf32x8 acc2 = alu0;
      kf32x8 acc3 = alu0;
      kf32x8 acc4 = alu0;
      kf32x8 acc5 = alu0;
      kf32x8 acc6 = alu0;
      kf32x8 acc7 = alu0;
      for (long long ridx2 = 0; ridx2 < 32; ridx2++) {
        long long alu2 = ((ridx1*128)+ridx2);
        float val3 = data1[alu2];
        kf32x8 alu4 = ((kf32x8)(val3));
        long long alu5 = ((ridx2*64)+alu1);
        kf32x8 val6 = (*((kf32x8u*)(data2+alu5)));
        kf32x8 alu7 = kiln_fma_kf32x8(alu4,val6,acc0);
        acc0 = alu7;
        float val8 = data1[(alu2+32)];
        kf32x8 alu9 = ((kf32x8)(val8));
        kf32x8 alu10 = kiln_fma_kf32x8(alu9,val6,acc1);
        acc1 = alu10;
        float val11 = data1[(alu2+64)];
        kf32x8 alu12 = ((kf32x8)(val11));
        kf32x8 alu13 = kiln_fma_kf32x8(alu12,val6,acc2);
        acc2 = alu13;
        float val14 = data1[(alu2+96)];
        kf32x8 alu15 = ((kf32x8)(val14));
        kf32x8 alu16 = kiln_fma_kf32x8(alu15,val6,acc3);
        acc3 = alu16;
        kf32x8 val17 = (*((kf32x8u*)(data2+(alu5+8))));
        kf32x8 alu18 = kiln_fma_kf32x8(alu4,val17,acc4);
        acc4 = alu18;
        kf32x8 alu19 = kiln_fma_kf32x8(alu9,val17,acc5);
        acc5 = alu19;
        kf32x8 alu20 = kiln_fma_kf32x8(alu12,val17,acc6);
        acc6 = alu20;
        kf32x8 alu21 = kiln_fma_kf32x8(alu15,val17,acc7);
        acc7 = alu21;
      }
      long long alu22 = ((ridx1*256)+alu1);
      *((kf32x8u*)(data0+alu22)) = acc0;
      *((kf32x8u*)(data0+(alu22+64))) = acc1;
      *((kf32x8u*)(data0+(alu22+128))) = acc2;
      *((kf32x8u*)(data0+(alu22+192))) = acc3;
      *((kf32x8u*)(data0+(alu22+8))) = acc4;
      *((kf32x8u*)(data0+(alu22+72))) = acc5;
      *((kf32x8u*)(data0+(alu22+136))) = acc6;
      *((kf32x8u*)(data0+(alu22+200))) = acc7;
    }
  }
}
