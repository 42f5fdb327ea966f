// qconform-race: race-free
// class: grid-stride loop: every element written by exactly one thread of one block
// launch: k grid=3 block=32
// args: x:float32[500]=random(-1,1) y:float32[500]!out n:int32=500
__global__ void k(const float* x, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = x[i] * x[i];
}
