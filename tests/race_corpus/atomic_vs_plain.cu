// qconform-race: racy
// class: a plain read of a counter that other threads update atomically
// launch: k grid=1 block=64
// args: count:int32[1]=zeros seen:int32[1]=zeros
__global__ void k(int* count, int* seen) {
  if (threadIdx.x == 5) seen[0] = count[0];   // plain read, unordered with the atomics below
  atomicAdd(count, 1);
}
