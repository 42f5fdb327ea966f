// qconform-race: race-free
// class: twin of global_intrablock_passes: a barrier after each pass orders the block's stores to its row
// launch: k grid=2 block=64
// args: base:float32[128]=random(-1,0) sel:int32[16]=distinct(0,64,8) y:float32[128]!out
__global__ void k(const float* base, const int* sel, float* y) {
  float* row = y + 64 * blockIdx.x;
  const int* pick = sel + 8 * blockIdx.x;
  int t = threadIdx.x;
  row[t] = -1.0e30f;
  __syncthreads();
  if (t < 8) row[pick[t]] = 0.0f;
  __syncthreads();
  row[t] += base[64 * blockIdx.x + t];
}
