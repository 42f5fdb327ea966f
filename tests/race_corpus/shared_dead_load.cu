// qconform-race: racy
// class: shared read-write race on a load whose value nothing uses (HeCBench's marchingCubes, issue #254)
// differential: missed (the value read never reaches an output)
// accesses: source (the optimised build drops the dead load, as nvcc's does; only the build that makes every
//   access of the source shows the race)
// launch: k grid=1 block=64
// args: x:int32[64]=random(0,100) y:int32[64]!out
__global__ void k(const int* x, int* y) {
  __shared__ int offset;
  if (threadIdx.x == 63) offset = x[0];
  int unused = offset;             // read while thread 63 may still store it, and never used
  (void)unused;
  y[threadIdx.x] = x[threadIdx.x];
}
