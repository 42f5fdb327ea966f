// qconform-race: racy
// class: intra-block race on global memory: one block's passes over its own output row (fill, unmask the selected slots, add a base) with no barrier between, so a slot another thread filled may be unmasked before or after the fill
// launch: k grid=2 block=64
// args: base:float32[128]=random(-1,0) sel:int32[16]=distinct(0,64,8) y:float32[128]!out
__global__ void k(const float* base, const int* sel, float* y) {
  float* row = y + 64 * blockIdx.x;
  const int* pick = sel + 8 * blockIdx.x;
  int t = threadIdx.x;
  row[t] = -1.0e30f;                     // pass 1: mask every slot
  if (t < 8) row[pick[t]] = 0.0f;        // pass 2: unmask the selected slots, which other threads filled in pass 1
  row[t] += base[64 * blockIdx.x + t];   // pass 3: nothing orders it after another thread's unmasking
}
