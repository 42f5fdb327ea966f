// qconform-race: racy
// class: race hidden by coinciding values: every thread clears the same shared words with memset
// differential: missed (no schedule can see it: the values coincide or never reach an output)
// launch: k grid=1 block=64
// args: x:int32[64]=random(0,100) y:int32[64]!out
__global__ void k(const int* x, int* y) {
  __shared__ int acc[2];
  __builtin_memset(acc, 0, sizeof acc);          // all 64 threads, same bytes: a write-write race
  __syncthreads();
  y[threadIdx.x] = x[threadIdx.x] + acc[threadIdx.x % 2];
}
