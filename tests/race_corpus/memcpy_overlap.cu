// qconform-race: racy
// class: byte copies (memcpy) whose destination ranges overlap between threads
// launch: k grid=1 block=32
// args: x:int32[96]=random(0,100) y:int32[34]!out
__global__ void k(const int* x, int* y) {
  int t = threadIdx.x;
  memcpy(&y[t], &x[3 * t], 3 * sizeof(int));   // thread t writes y[t..t+2], as do threads t+1 and t+2
}
