// Scalar inline PTX for the emu backend (ptx.py translates each instruction to a statement over these): register
// operands read and written as a PTX type, cvt between every integer and float type in its rounding modes, and the
// integer instructions whose PTX semantics differ from C++'s operators (shift clamping, mul.hi, bfe/bfi, lop3,
// division by zero). Included by emu_device.hpp in kernel code only.
#pragma once

namespace emu {
[[noreturn]] void unsupported_asm(const char* what);   // emu_runtime.cpp: an inline PTX that ran but is not emulated

namespace ptx {
// A register operand (an asm operand's C++ lvalue or a .reg local) as the PTX type T: the same bits where the sizes
// agree, an integer conversion (zero or sign extension as the C++ type says, truncation) where they do not, a
// pointer as its 64-bit address; a predicate is nonzero.
template <class T, class S>
inline T rd(const S& s) {
  if constexpr (std::is_pointer<S>::value) {
    return rd<T>(uint64_t(reinterpret_cast<uintptr_t>(s)));
  } else if constexpr (std::is_same<T, bool>::value) {
    return !(s == S(0));
  } else if constexpr (sizeof(S) == sizeof(T) && std::is_trivially_copyable<S>::value) {
    return __builtin_bit_cast(T, s);
  } else if constexpr ((std::is_integral<S>::value || std::is_enum<S>::value) && std::is_integral<T>::value) {
    return T(s);
  } else {
    static_assert(sizeof(S) == sizeof(T), "inline PTX: an operand of another size than the instruction's type");
    return T();
  }
}
template <class D, class T>
inline void wr(D& d, T v) {
  if constexpr (std::is_same<D, bool>::value) {
    d = !(v == T(0));
  } else if constexpr (std::is_pointer<D>::value) {
    d = reinterpret_cast<D>(uintptr_t(rd<uint64_t>(v)));
  } else if constexpr (sizeof(D) == sizeof(T) && std::is_trivially_copyable<D>::value) {
    d = __builtin_bit_cast(D, v);
  } else if constexpr (std::is_integral<D>::value && (std::is_integral<T>::value || std::is_same<T, bool>::value)) {
    d = D(v);
  } else {
    static_assert(sizeof(D) == sizeof(T), "inline PTX: a destination of another size than the instruction's type");
  }
}
template <class T> inline uint64_t bits_of(T v) {
  if constexpr (sizeof(T) == 8) return __builtin_bit_cast(uint64_t, v);
  else if constexpr (sizeof(T) == 4) return __builtin_bit_cast(uint32_t, v);
  else if constexpr (sizeof(T) == 2) return __builtin_bit_cast(uint16_t, v);
  else return __builtin_bit_cast(uint8_t, v);
}
template <class T> inline T from_bits(uint64_t b) {
  if constexpr (sizeof(T) == 8) return __builtin_bit_cast(T, b);
  else if constexpr (sizeof(T) == 4) return __builtin_bit_cast(T, uint32_t(b));
  else if constexpr (sizeof(T) == 2) return __builtin_bit_cast(T, uint16_t(b));
  else return __builtin_bit_cast(T, uint8_t(b));
}

inline float saturate01(float x) { return x != x ? 0.0f : x < 0 ? 0.0f : x > 1 ? 1.0f : x; }
inline double saturate01(double x) { return x != x ? 0.0 : x < 0 ? 0.0 : x > 1 ? 1.0 : x; }

// cvt: type codes 1-4 u8..u64, 5-8 s8..s64, 9 f16, 10 bf16, 11 f32, 12 f64; flags 1 .ftz, 2 .sat, 4 .relu,
// 8 an integer rounding (.rni, .rzi, .rmi, .rpi: a float rounded to an integral value in its own format).
// Float to integer rounds in `mode` and saturates (NaN to 0), as PTX's cvt does; integer to float and float to a
// narrower float round once in `mode`; integer to integer wraps, or clamps with .sat.
inline bool is_int(int k) { return k <= 8; }
inline bool is_signed(int k) { return k >= 5 && k <= 8; }
inline int int_bits(int k) { return 8 << ((k - 1) & 3); }
inline uint64_t cvt(int dk, int ak, int mode, int flags, uint64_t bits) {
  // the source, exactly: an integer, or a double (every f16, bf16 and f32 is one)
  int64_t si = 0; uint64_t ui = 0; double x = 0;
  if (is_int(ak)) {
    int w = int_bits(ak);
    ui = w == 64 ? bits : bits & ((uint64_t(1) << w) - 1);
    si = is_signed(ak) && w < 64 && (ui >> (w - 1) & 1) ? int64_t(ui | ~((uint64_t(1) << w) - 1)) : int64_t(ui);
  } else if (ak == 9) {
    x = HalfBits::value((unsigned short)bits);
  } else if (ak == 10) {
    x = Bf16Bits::value((unsigned short)bits);
  } else if (ak == 11) {
    float f = __builtin_bit_cast(float, uint32_t(bits));
    x = (flags & 1) ? flush_subnormal(f) : f;
  } else {
    x = __builtin_bit_cast(double, bits);
  }
  if (is_int(dk)) {
    int w = int_bits(dk);
    if (!is_int(ak)) {                       // float to integer: round in the mode, saturate, NaN to 0
      double r = round_int(x, mode);
      if (is_signed(dk)) {
        int64_t lo = w == 64 ? INT64_MIN : -(int64_t(1) << (w - 1)), hi = w == 64 ? INT64_MAX : (int64_t(1) << (w - 1)) - 1;
        int64_t v = r != r ? 0 : r <= double(lo) ? lo : r >= double(hi) ? hi : int64_t(r);
        return uint64_t(v);
      }
      uint64_t hi = w == 64 ? UINT64_MAX : (uint64_t(1) << w) - 1;
      return r != r || r <= 0 ? 0 : r >= double(hi) ? hi : uint64_t(r);
    }
    if (flags & 2) {                          // .sat: clamp to the destination's range
      if (is_signed(dk)) {
        int64_t lo = w == 64 ? INT64_MIN : -(int64_t(1) << (w - 1)), hi = w == 64 ? INT64_MAX : (int64_t(1) << (w - 1)) - 1;
        if (is_signed(ak)) return uint64_t(si < lo ? lo : si > hi ? hi : si);
        return uint64_t(ui > uint64_t(hi) ? hi : int64_t(ui));
      }
      uint64_t hi = w == 64 ? UINT64_MAX : (uint64_t(1) << w) - 1;
      if (is_signed(ak)) return si < 0 ? 0 : uint64_t(si) > hi ? hi : uint64_t(si);
      return ui > hi ? hi : ui;
    }
    return w == 64 ? ui : ui & ((uint64_t(1) << w) - 1);
  }
  if (dk == 9 || dk == 10) {                  // to f16 / bf16: one rounding (int_to_odd keeps the sticky bit)
    double v = is_int(ak) ? (is_signed(ak) ? int_to_odd(si) : int_to_odd(ui)) : x;
    if ((flags & 4) && !(v != v) && v < 0) v = 0;
    if ((flags & 2) && !is_int(ak)) v = saturate01(v);
    return dk == 9 ? round16<HalfBits>(v, mode) : round16<Bf16Bits>(v, mode);
  }
  if (dk == 11) {
    float f;
    if (is_int(ak)) f = is_signed(ak) ? round_to<float>(int_to_odd(si), mode) : round_to<float>(int_to_odd(ui), mode);
    else if (flags & 8) f = float(round_int(x, mode));              // cvt.rni.f32.f32 and kin
    else f = round_to<float>(x, mode);
    if (flags & 2) f = saturate01(f);
    if (flags & 1) f = flush_subnormal(f);
    return __builtin_bit_cast(uint32_t, f);
  }
  double d = is_int(ak) ? (is_signed(ak) ? round_to<double>((long double)si, mode) : round_to<double>((long double)ui, mode))
                        : ((flags & 8) ? round_int(x, mode) : x);
  if (flags & 2) d = saturate01(d);
  return __builtin_bit_cast(uint64_t, d);
}

// Integer instructions as PTX defines them.
template <class T> inline T mul_hi(T a, T b) {
  if constexpr (sizeof(T) == 8) {
    using W = typename std::conditional<std::is_signed<T>::value, __int128, unsigned __int128>::type;
    return T((W(a) * W(b)) >> 64);
  } else {
    using W = typename std::conditional<std::is_signed<T>::value, int64_t, uint64_t>::type;
    return T((W(a) * W(b)) >> (8 * sizeof(T)));
  }
}
// Division by zero: PTX leaves the result unspecified; emu gives all ones (unsigned) or -1, and INT_MIN / -1 wraps.
template <class T> inline T div(T a, T b) {
  if (b == 0) return T(-1);
  if constexpr (std::is_signed<T>::value) if (b == T(-1)) return T(typename std::make_unsigned<T>::type(0) - a);
  return T(a / b);
}
template <class T> inline T rem(T a, T b) {
  if (b == 0) return a;
  if constexpr (std::is_signed<T>::value) if (b == T(-1)) return T(0);
  return T(a % b);
}
// Shift amounts past the width clamp to it: shl and shr.u give 0, shr.s the sign.
template <class T> inline T shl(T a, uint32_t n) {
  using U = typename std::make_unsigned<T>::type;
  return n >= 8 * sizeof(T) ? T(0) : T(U(a) << n);
}
template <class T> inline T shr(T a, uint32_t n) {
  if (n >= 8 * sizeof(T)) return std::is_signed<T>::value && a < 0 ? T(-1) : T(0);
  return T(a >> n);
}
template <class T> inline int popc(T a) { return __builtin_popcountll(uint64_t(typename std::make_unsigned<T>::type(a))); }
template <class T> inline int clz(T a) {
  uint64_t u = uint64_t(typename std::make_unsigned<T>::type(a));
  return u == 0 ? int(8 * sizeof(T)) : __builtin_clzll(u) - int(64 - 8 * sizeof(T));
}
template <class T> inline T brev(T a) {
  using U = typename std::make_unsigned<T>::type;
  U u = U(a), r = 0;
  for (unsigned i = 0; i < 8 * sizeof(T); ++i) r = U(r | (((u >> i) & 1u) << (8 * sizeof(T) - 1 - i)));
  return T(r);
}
// bfe: `len` bits from `pos` (each taken from its low 8 bits), sign-extended from the last bit taken for signed types;
// bits past the register replicate that sign (or are 0).
template <class T> inline T bfe(T a, uint32_t pos, uint32_t len) {
  using U = typename std::make_unsigned<T>::type;
  const unsigned msb = 8 * sizeof(T) - 1;
  pos &= 0xff; len &= 0xff;
  U u = U(a), r = 0;
  bool sbit = std::is_signed<T>::value && len != 0 && ((u >> std::min<unsigned>(pos + len - 1, msb)) & 1u);
  for (unsigned i = 0; i <= msb; ++i) {
    bool bit = (i < len && pos + i <= msb) ? ((u >> (pos + i)) & 1u) : sbit;
    r = U(r | (U(bit) << i));
  }
  return T(r);
}
template <class T> inline T bfi(T f, T b, uint32_t pos, uint32_t len) {
  using U = typename std::make_unsigned<T>::type;
  const unsigned msb = 8 * sizeof(T) - 1;
  pos &= 0xff; len &= 0xff;
  U r = U(b);
  for (unsigned i = 0; i < len && pos + i <= msb; ++i)
    r = U((r & ~(U(1) << (pos + i))) | (U((U(f) >> i) & 1u) << (pos + i)));
  return T(r);
}
// prmt.b32 in its default mode: each nibble of c picks a byte of {b, a} (low 3 bits), or with its high bit set
// replicates that byte's sign (__byte_perm is the same without the sign bit).
inline uint32_t prmt(uint32_t a, uint32_t b, uint32_t c) {
  uint64_t bytes = uint64_t(b) << 32 | a;
  uint32_t r = 0;
  for (int k = 0; k < 4; ++k) {
    unsigned sel = c >> (4 * k) & 0xfu;
    uint32_t byte = uint32_t(bytes >> (8 * (sel & 7u))) & 0xffu;
    if (sel & 8u) byte = (byte & 0x80u) ? 0xffu : 0u;
    r |= byte << (8 * k);
  }
  return r;
}
// lop3.b32: bit k of the lookup table is the result where (a, b, c) are the bits of k, a the highest (the table is
// F(0xF0, 0xCC, 0xAA) for the function F).
inline uint32_t lop3(uint32_t a, uint32_t b, uint32_t c, uint32_t lut) {
  uint32_t r = 0;
  for (int k = 0; k < 8; ++k)
    if (lut >> k & 1u) r |= ((k & 4) ? a : ~a) & ((k & 2) ? b : ~b) & ((k & 1) ? c : ~c);
  return r;
}
}  // namespace ptx
}  // namespace emu
