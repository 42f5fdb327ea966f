// qconform-race: race-free
// class: twin of memcpy_overlap: each thread copies into its own three elements
// launch: k grid=1 block=32
// args: x:int32[96]=random(0,100) y:int32[96]!out
__global__ void k(const int* x, int* y) {
  int t = threadIdx.x;
  memcpy(&y[3 * t], &x[3 * t], 3 * sizeof(int));
}
