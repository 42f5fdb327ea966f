// CUDA's SIMD-in-a-word intrinsics (`__vadd4`, `__vsubss4`, `__vcmpeq2`, `__vsads4`...): a 32-bit word taken as
// four bytes (suffix 4) or two halfwords (suffix 2), each lane computed on its own as the CUDA Math API documents
// it; quantized-dot kernels (ggml's q2_K/q3_K/q6_K, `__vsubss4`) use them. Included by emu_device.hpp.
#pragma once

namespace emu_simd {

// Each lane of `a` (and `b`), sign-extended (Signed) or zero-extended, given to `f`; the results, cut to the lane's
// width, put back in place.
template <int W, bool Signed, class F>
inline unsigned lanewise(unsigned a, unsigned b, F f) {
  const unsigned mask = (1u << W) - 1u;
  unsigned r = 0;
  for (int at = 0; at < 32; at += W) {
    int64_t x, y;
    if (Signed) {
      x = int64_t(int32_t(a << (32 - W - at)) >> (32 - W));
      y = int64_t(int32_t(b << (32 - W - at)) >> (32 - W));
    } else {
      x = int64_t((a >> at) & mask);
      y = int64_t((b >> at) & mask);
    }
    r |= (unsigned(uint64_t(f(x, y))) & mask) << at;
  }
  return r;
}

template <int W, bool Signed, class F>
inline int64_t lane_sum(unsigned a, unsigned b, F f) {
  int64_t sum = 0;
  lanewise<W, Signed>(a, b, [&](int64_t x, int64_t y) { sum += f(x, y); return int64_t(0); });
  return sum;
}

template <int W> constexpr int64_t smax = (int64_t(1) << (W - 1)) - 1;
template <int W> constexpr int64_t smin = -(int64_t(1) << (W - 1));
template <int W> constexpr int64_t umax = (int64_t(1) << W) - 1;

inline int64_t clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }
inline int64_t magnitude(int64_t v) { return v < 0 ? -v : v; }
// The signed average with ties away from zero: C++'s division truncates toward zero.
inline int64_t average_away(int64_t s) { return (s + (s >= 0 ? 1 : -1)) / 2; }

}  // namespace emu_simd

#define EMU_SIMD_PAIR(NAME, SIGNED, EXPR)                                                                      \
  inline unsigned NAME##2(unsigned a, unsigned b) {                                                            \
    constexpr int W = 16; (void)W;                                                                              \
    return emu_simd::lanewise<16, SIGNED>(a, b, [](int64_t x, int64_t y) -> int64_t { return EXPR; });       \
  }                                                                                                            \
  inline unsigned NAME##4(unsigned a, unsigned b) {                                                            \
    constexpr int W = 8; (void)W;                                                                               \
    return emu_simd::lanewise<8, SIGNED>(a, b, [](int64_t x, int64_t y) -> int64_t { return EXPR; });        \
  }

#define EMU_SIMD_ONE(NAME, EXPR)                                                                               \
  inline unsigned NAME##2(unsigned a) {                                                                        \
    constexpr int W = 16; (void)W;                                                                              \
    return emu_simd::lanewise<16, true>(a, 0u, [](int64_t x, int64_t) -> int64_t { return EXPR; });          \
  }                                                                                                            \
  inline unsigned NAME##4(unsigned a) {                                                                        \
    constexpr int W = 8; (void)W;                                                                               \
    return emu_simd::lanewise<8, true>(a, 0u, [](int64_t x, int64_t) -> int64_t { return EXPR; });           \
  }

// The lambdas see W through the enclosing constexpr (captureless: a constexpr is not odr-used).
EMU_SIMD_PAIR(__vadd, false, x + y)
EMU_SIMD_PAIR(__vsub, false, x - y)
EMU_SIMD_PAIR(__vaddss, true, emu_simd::clamp(x + y, emu_simd::smin<W>, emu_simd::smax<W>))
EMU_SIMD_PAIR(__vsubss, true, emu_simd::clamp(x - y, emu_simd::smin<W>, emu_simd::smax<W>))
EMU_SIMD_PAIR(__vaddus, false, emu_simd::clamp(x + y, 0, emu_simd::umax<W>))
EMU_SIMD_PAIR(__vsubus, false, emu_simd::clamp(x - y, 0, emu_simd::umax<W>))
EMU_SIMD_PAIR(__vavgs, true, emu_simd::average_away(x + y))
EMU_SIMD_PAIR(__vavgu, false, (x + y + 1) >> 1)
EMU_SIMD_PAIR(__vhaddu, false, (x + y) >> 1)
EMU_SIMD_PAIR(__vabsdiffs, true, emu_simd::magnitude(x - y))
EMU_SIMD_PAIR(__vabsdiffu, false, emu_simd::magnitude(x - y))
EMU_SIMD_PAIR(__vmaxs, true, x > y ? x : y)
EMU_SIMD_PAIR(__vmaxu, false, x > y ? x : y)
EMU_SIMD_PAIR(__vmins, true, x < y ? x : y)
EMU_SIMD_PAIR(__vminu, false, x < y ? x : y)
EMU_SIMD_PAIR(__vcmpeq, false, x == y ? -1 : 0)
EMU_SIMD_PAIR(__vcmpne, false, x != y ? -1 : 0)
EMU_SIMD_PAIR(__vcmpges, true, x >= y ? -1 : 0)
EMU_SIMD_PAIR(__vcmpgeu, false, x >= y ? -1 : 0)
EMU_SIMD_PAIR(__vcmpgts, true, x > y ? -1 : 0)
EMU_SIMD_PAIR(__vcmpgtu, false, x > y ? -1 : 0)
EMU_SIMD_PAIR(__vcmples, true, x <= y ? -1 : 0)
EMU_SIMD_PAIR(__vcmpleu, false, x <= y ? -1 : 0)
EMU_SIMD_PAIR(__vcmplts, true, x < y ? -1 : 0)
EMU_SIMD_PAIR(__vcmpltu, false, x < y ? -1 : 0)
EMU_SIMD_PAIR(__vseteq, false, x == y)
EMU_SIMD_PAIR(__vsetne, false, x != y)
EMU_SIMD_PAIR(__vsetges, true, x >= y)
EMU_SIMD_PAIR(__vsetgeu, false, x >= y)
EMU_SIMD_PAIR(__vsetgts, true, x > y)
EMU_SIMD_PAIR(__vsetgtu, false, x > y)
EMU_SIMD_PAIR(__vsetles, true, x <= y)
EMU_SIMD_PAIR(__vsetleu, false, x <= y)
EMU_SIMD_PAIR(__vsetlts, true, x < y)
EMU_SIMD_PAIR(__vsetltu, false, x < y)
EMU_SIMD_ONE(__vabs, emu_simd::magnitude(x))
EMU_SIMD_ONE(__vabsss, emu_simd::clamp(emu_simd::magnitude(x), 0, emu_simd::smax<W>))
EMU_SIMD_ONE(__vneg, -x)
EMU_SIMD_ONE(__vnegss, emu_simd::clamp(-x, emu_simd::smin<W>, emu_simd::smax<W>))

// Sums of the lanes' absolute differences: one number, not a word of lanes.
inline unsigned __vsads2(unsigned a, unsigned b) {
  return unsigned(emu_simd::lane_sum<16, true>(a, b, [](int64_t x, int64_t y) { return emu_simd::magnitude(x - y); }));
}
inline unsigned __vsads4(unsigned a, unsigned b) {
  return unsigned(emu_simd::lane_sum<8, true>(a, b, [](int64_t x, int64_t y) { return emu_simd::magnitude(x - y); }));
}
inline unsigned __vsadu2(unsigned a, unsigned b) {
  return unsigned(emu_simd::lane_sum<16, false>(a, b, [](int64_t x, int64_t y) { return emu_simd::magnitude(x - y); }));
}
inline unsigned __vsadu4(unsigned a, unsigned b) {
  return unsigned(emu_simd::lane_sum<8, false>(a, b, [](int64_t x, int64_t y) { return emu_simd::magnitude(x - y); }));
}

#undef EMU_SIMD_PAIR
#undef EMU_SIMD_ONE
