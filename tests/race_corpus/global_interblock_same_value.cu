// qconform-race: racy
// class: race hidden by coinciding values: every block stores the same flag into one global element
// differential: missed (no schedule can see it: the values coincide or never reach an output)
// launch: k grid=8 block=32
// args: flag:int32[1]=zeros y:int32[256]!out
__global__ void k(int* flag, int* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (threadIdx.x == 0) flag[0] = 1;       // same value from every block: invisible to any schedule
  y[i] = i;
}
