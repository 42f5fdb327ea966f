// qconform-race: racy
// class: inter-block race on global memory: every block stores its own id into one element
// launch: k grid=8 block=32
// args: last:int32[1]=zeros y:int32[256]!out
__global__ void k(int* last, int* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (threadIdx.x == 0) last[0] = blockIdx.x;
  y[i] = i;
}
