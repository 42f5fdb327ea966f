// qconform-race: race-free
// class: twin of global_interblock_same_value: the flag is set with an atomic
// launch: k grid=8 block=32
// args: flag:int32[1]=zeros y:int32[256]!out
__global__ void k(int* flag, int* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (threadIdx.x == 0) atomicExch(&flag[0], 1);
  y[i] = i;
}
