// qconform-race: racy
// class: race at one value of a scalar parameter: thread 0 stamps a header at y[header_at], the last thread writes y[blockDim.x - 1]; they meet only when header_at is 63 (a sweep over the parameter's domain finds it; a launch at any other value is race-free)
// launch: stamp grid=1 block=64
// args: y:int32[128]=zeros header_at:int32=range(1,128)
__global__ void stamp(int* y, int header_at) {
  int t = threadIdx.x;
  if (t == blockDim.x - 1) y[t] = t;
  if (t == 0) y[header_at] = -1;
}
