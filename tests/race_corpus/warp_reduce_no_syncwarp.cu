// qconform-race: racy
// class: intra-warp tree reduction in shared memory without __syncwarp between the steps
// launch: k grid=1 block=32
// args: x:int32[32]=random(0,100) y:int32[1]!out
__global__ void k(const int* x, int* y) {
  __shared__ int s[32];
  int lane = threadIdx.x;
  s[lane] = x[lane];
  __syncwarp();
  for (int d = 16; d > 0; d /= 2) {
    if (lane < d) s[lane] += s[lane + d];   // reads a slot another lane writes in the same step
  }
  __syncwarp();
  if (lane == 0) y[0] = s[0];
}
