// qconform-race: racy
// class: race hidden by coinciding values: every thread writes the same constant into one shared slot
// differential: missed (no schedule can see it: the values coincide or never reach an output)
// launch: k grid=1 block=64
// args: x:int32[64]=random(0,100) y:int32[64]!out
__global__ void k(const int* x, int* y) {
  __shared__ int scale;
  scale = 3;                       // all 64 threads, same value: a write-write race by the memory model
  __syncthreads();
  y[threadIdx.x] = scale * x[threadIdx.x];
}
