// qconform-race: race-free
// class: twin of warp_reduce_no_syncwarp: the reduction through __shfl_down_sync
// launch: k grid=1 block=32
// args: x:int32[32]=random(0,100) y:int32[1]!out
__global__ void k(const int* x, int* y) {
  int v = x[threadIdx.x];
  for (int d = 16; d > 0; d /= 2) v += __shfl_down_sync(0xffffffffu, v, d);
  if (threadIdx.x == 0) y[0] = v;
}
