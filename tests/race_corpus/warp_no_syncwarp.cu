// qconform-race: racy
// class: intra-warp exchange through shared memory without __syncwarp (no implicit lock step since Volta)
// launch: k grid=1 block=32
// args: x:int32[32]=random(0,1000) y:int32[32]!out
__global__ void k(const int* x, int* y) {
  __shared__ int s[32];
  int lane = threadIdx.x;
  s[lane] = x[lane];
  // missing __syncwarp()
  y[lane] = s[lane ^ 1];
}
