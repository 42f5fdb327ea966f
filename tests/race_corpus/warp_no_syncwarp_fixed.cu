// qconform-race: race-free
// class: twin of warp_no_syncwarp: __syncwarp orders the lanes
// launch: k grid=1 block=32
// args: x:int32[32]=random(0,1000) y:int32[32]!out
__global__ void k(const int* x, int* y) {
  __shared__ int s[32];
  int lane = threadIdx.x;
  s[lane] = x[lane];
  __syncwarp();
  y[lane] = s[lane ^ 1];
}
