// qconform-race: racy
// class: lanes publish through shared memory with only a shuffle between (llama.cpp's mm_ids_helper, issue #28376)
// warp-order: syncwarp (a shuffle exchanges registers; only __syncwarp orders a warp's memory, as racecheck has it)
// differential: missed (emu's threads switch only at the shuffles, after every lane stored its slot)
// launch: publish grid=1 block=32
// args: x:int32[32]=random(0,1000) y:int32[32]!out
__global__ void publish(const int* x, int* y) {
  __shared__ int slot[32];
  const int lane = threadIdx.x;
  slot[lane] = x[lane];
  int total = x[lane];
  for (int o = 16; o > 0; o >>= 1) total += __shfl_xor_sync(0xffffffffu, total, o);
  // missing __syncwarp()
  y[lane] = slot[(lane + 1) & 31] + (total & 0);
}
