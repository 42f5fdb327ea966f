// qconform-race: race-free
// class: twin of scalar_value_race: a barrier orders the header stamp before the last thread's write, at every value of the parameter
// launch: stamp grid=1 block=64
// args: y:int32[128]=zeros header_at:int32=range(1,128)
__global__ void stamp(int* y, int header_at) {
  int t = threadIdx.x;
  if (t == 0) y[header_at] = -1;
  __syncthreads();
  if (t == blockDim.x - 1) y[t] = t;
}
