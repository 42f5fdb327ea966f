// qconform emu: signal reporters of the sandboxed worker (included once, by emu_runtime.cpp).
//
// The worker's seccomp filter answers a refused system call with SIGSYS (SECCOMP_RET_TRAP). The handler
// installed here names the call on stderr (`emu-sandbox: refused system call N`) and ends the process;
// the parent turns that line into a SandboxViolation and starts a new worker. A SIGSEGV/SIGBUS leaves its
// address (`emu-fault: SIGSEGV write at 0x...`) so that the parent can name the device buffer whose guard pages
// were hit, then the default action ends the process as before. Both are installed by a constructor of
// priority 101, which runs when a module is loaded and before any initializer of the kernel source.
// A fault of a fiber whose stack pointer, or the address it touched, lies below its stack is a stack overflow
// (`emu-stack-overflow: ...`, naming the thread): the fiber stacks lie side by side in one pool, so a large
// frame can leap over the guard page into another mapping, even a buffer's guard pages. Only the running
// module knows its fibers, so emu_launch installs its own reporter again before every launch.
// The same goes for the race detector's last words (race_last_words, emu_race.hpp): the final state of the
// races the running launch announced, written before a memory fault or the CPU time limit ends the worker, and
// on SIGUSR1, which the parent sends before it kills a worker stopped at its time limit.
#pragma once
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

namespace emu {

constexpr int kSandboxExit = 99;     // exit status of a worker stopped by the sandbox (see sandbox.py)
constexpr int kLastWordsExit = 98;   // exit status of a worker that gave its last words at the parent's ask

inline void sig_put(char*& p, const char* s) { while (*s) *p++ = *s++; }

inline void sig_put_uint(char*& p, unsigned long long v, unsigned base) {
  char tmp[24];
  int n = 0;
  do { tmp[n++] = "0123456789abcdef"[v % base]; v /= base; } while (v);
  while (n) *p++ = tmp[--n];
}

// Async-signal-safe: formatting by hand, then write(2) and _exit (both allowed by the filter).
void sandbox_trap(int, siginfo_t* si, void*) {
  char buf[128];
  char* p = buf;
  sig_put(p, "\nemu-sandbox: refused system call ");
  sig_put_uint(p, (unsigned)si->si_syscall, 10);
  sig_put(p, " arch 0x");
  sig_put_uint(p, si->si_arch, 16);
  sig_put(p, "\n");
  ssize_t ignored = write(2, buf, size_t(p - buf));
  (void)ignored;
  _exit(kSandboxExit);
}

// Defined with the fibers (emu_runtime.cpp): writes the `emu-stack-overflow` line and returns true when the
// fault is the running fiber's stack overflow (stack pointer `sp`, 0 when unknown; faulting address `addr`).
bool report_stack_overflow(char*& p, unsigned long long sp, unsigned long long addr);

// Defined with the race detector (emu_race.hpp): the `emu-race-state` lines, then, when `end`, `emu-race-end`;
// and the answer to the parent's SIGUSR1 (at the next tracked access, or at once when asked again).
void race_last_words(bool end);
void race_last_words_asked();

inline unsigned long long fault_stack_pointer(void* ctx) {
#if defined(__x86_64__)
  return static_cast<unsigned long long>(static_cast<ucontext_t*>(ctx)->uc_mcontext.gregs[REG_RSP]);
#elif defined(__aarch64__)
  return static_cast<ucontext_t*>(ctx)->uc_mcontext.sp;
#else
  (void)ctx;
  return 0;
#endif
}

void memory_fault(int sig, siginfo_t* si, void* ctx) {
  char buf[384];
  char* p = buf;
  if (report_stack_overflow(p, fault_stack_pointer(ctx), reinterpret_cast<unsigned long long>(si->si_addr))) {
    ssize_t ignored = write(2, buf, size_t(p - buf));
    (void)ignored;
    race_last_words(false);
    return;      // SA_RESETHAND: the access runs again and ends the process
  }
  sig_put(p, sig == SIGBUS ? "\nemu-fault: SIGBUS " : "\nemu-fault: SIGSEGV ");
#if defined(__x86_64__)
  // bit 1 of the page-fault error code: the access was a write
  sig_put(p, (static_cast<ucontext_t*>(ctx)->uc_mcontext.gregs[REG_ERR] & 2) ? "write" : "read");
#else
  (void)ctx;
  sig_put(p, "access");
#endif
  sig_put(p, " at 0x");
  sig_put_uint(p, reinterpret_cast<unsigned long long>(si->si_addr), 16);
  sig_put(p, "\n");
  ssize_t ignored = write(2, buf, size_t(p - buf));
  (void)ignored;
  race_last_words(false);
  // SA_RESETHAND restored the default action: the faulting access runs again and ends the process.
}

// SIGUSR1: the parent is about to kill the worker (it exits after its last words). SIGXCPU: the CPU time limit
// (SA_RESETHAND: the signal raised again ends the process as before, and no race is found after the last words).
void last_words_asked(int) { race_last_words_asked(); }
void cpu_limit_reached(int) {
  race_last_words(false);
  raise(SIGXCPU);      // blocked until the handler returns, then the default action ends the process at once
}

// Integer division by zero (and INT_MIN / -1) traps on x86 (#DE, SIGFPE); on a GPU it gives an unspecified value
// (the PTX ISA's div and rem) and the thread goes on, so a kernel that divides a padding lane by zero and drops
// the result runs there. The handler finishes the faulting div/idiv with one such value and resumes after it:
// quotient all ones and remainder the dividend for a zero divisor; quotient INT_MIN and remainder 0 for
// INT_MIN / -1. g_int_divisions_by_zero counts them (emu_int_divisions_by_zero). An instruction it does not
// decode ends the worker with SIGFPE as before.
unsigned long long g_int_divisions_by_zero = 0;

#if defined(__x86_64__)
inline greg_t& x86_register(greg_t* g, int r) {     // by the instruction encoding's register number
  static const int kIndex[16] = {REG_RAX, REG_RCX, REG_RDX, REG_RBX, REG_RSP, REG_RBP, REG_RSI, REG_RDI,
                                 REG_R8, REG_R9, REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15};
  return g[kIndex[r]];
}

inline bool finish_division(ucontext_t* uc) {
  greg_t* g = uc->uc_mcontext.gregs;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(g[REG_RIP]);
  bool operand16 = false;
  for (;; ++p) {                                     // legacy prefixes (an address-size prefix: not decoded)
    if (*p == 0x66) operand16 = true;
    else if (*p != 0xF2 && *p != 0xF3 && *p != 0x2E && *p != 0x3E && *p != 0x26 && *p != 0x36 && *p != 0x64 &&
             *p != 0x65) break;
  }
  unsigned char rex = (*p & 0xF0) == 0x40 ? *p++ : 0;
  unsigned char op = *p++;
  if (op != 0xF6 && op != 0xF7) return false;
  unsigned char modrm = *p++;
  int mod = modrm >> 6, reg = (modrm >> 3) & 7, rm = modrm & 7;
  if (reg != 6 && reg != 7) return false;           // /6 div, /7 idiv
  int width = op == 0xF6 ? 8 : (rex & 8) ? 64 : operand16 ? 16 : 32;
  uint64_t mask = width == 64 ? ~0ull : (1ull << width) - 1;
  uint64_t divisor;
  if (mod == 3) {
    int r = rm | (rex & 1) << 3;
    divisor = width == 8 && !rex && r >= 4 ? uint64_t(x86_register(g, r - 4)) >> 8 : uint64_t(x86_register(g, r));
  } else {
    uint64_t addr = 0;
    bool rip_relative = false;
    if (rm == 4) {
      unsigned char sib = *p++;
      int index = (sib >> 3 & 7) | (rex & 2) << 2, base = (sib & 7) | (rex & 1) << 3;
      if (index != 4) addr += uint64_t(x86_register(g, index)) << (sib >> 6);
      if ((sib & 7) == 5 && mod == 0) { int32_t d; __builtin_memcpy(&d, p, 4); p += 4; addr += int64_t(d); }
      else addr += uint64_t(x86_register(g, base));
    } else if (rm == 5 && mod == 0) {
      rip_relative = true;
    } else {
      addr += uint64_t(x86_register(g, rm | (rex & 1) << 3));
    }
    if (mod == 1) { addr += int64_t(int8_t(*p)); p += 1; }
    else if (mod == 2 || rip_relative) { int32_t d; __builtin_memcpy(&d, p, 4); p += 4; addr += int64_t(d); }
    if (rip_relative) addr += reinterpret_cast<uint64_t>(p);      // the end of the instruction (no immediate)
    divisor = 0;
    __builtin_memcpy(&divisor, reinterpret_cast<const void*>(addr), size_t(width / 8));
  }
  divisor &= mask;
  uint64_t low = width == 8 ? uint64_t(g[REG_RAX]) & 0xFF : uint64_t(g[REG_RAX]) & mask;
  uint64_t quotient, remainder;
  if (divisor == 0) {
    quotient = mask;
    remainder = low;
  } else if (reg == 7 && divisor == mask && low == (mask >> 1) + 1) {     // INT_MIN / -1
    quotient = low;
    remainder = 0;
  } else {
    return false;
  }
  greg_t& rax = g[REG_RAX];
  greg_t& rdx = g[REG_RDX];
  if (width == 8) {
    rax = greg_t((uint64_t(rax) & ~0xFFFFull) | (remainder & 0xFF) << 8 | (quotient & 0xFF));
  } else if (width == 16) {
    rax = greg_t((uint64_t(rax) & ~0xFFFFull) | quotient);
    rdx = greg_t((uint64_t(rdx) & ~0xFFFFull) | remainder);
  } else {                                           // a 32-bit result clears the upper half, as the CPU does
    rax = greg_t(quotient);
    rdx = greg_t(remainder);
  }
  g[REG_RIP] = greg_t(reinterpret_cast<uint64_t>(p));
  ++g_int_divisions_by_zero;
  return true;
}
#endif

void integer_division(int sig, siginfo_t* si, void* ctx) {
#if defined(__x86_64__)
  if (si->si_code == FPE_INTDIV && finish_division(static_cast<ucontext_t*>(ctx))) return;
#else
  (void)si; (void)ctx;
#endif
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, nullptr);       // the instruction runs again and ends the process, as without a handler
}

alignas(16) char g_signal_stack[64 * 1024];    // a fiber whose stack overflowed cannot run a handler

// This module's reporters (at load, and again before each of its launches): SIGSEGV/SIGBUS, SIGUSR1, SIGXCPU,
// and the handler of integer division (SIGFPE).
void install_memory_fault_reporter() {
#if !defined(__SANITIZE_ADDRESS__)   // AddressSanitizer reports memory faults itself (on a stack of its own)
  stack_t ss {};
  ss.ss_sp = g_signal_stack;
  ss.ss_size = sizeof g_signal_stack;
  sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sa.sa_sigaction = memory_fault;
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
#endif
  struct sigaction words {};
  sigemptyset(&words.sa_mask);
  words.sa_flags = SA_ONSTACK;
  words.sa_handler = last_words_asked;
  sigaction(SIGUSR1, &words, nullptr);
  words.sa_flags = SA_ONSTACK | SA_RESETHAND;
  words.sa_handler = cpu_limit_reached;
  sigaction(SIGXCPU, &words, nullptr);
  struct sigaction division {};
  sigemptyset(&division.sa_mask);
  division.sa_flags = SA_SIGINFO | SA_ONSTACK;
  division.sa_sigaction = integer_division;
  sigaction(SIGFPE, &division, nullptr);
}

__attribute__((constructor(101))) void install_signal_reporters() {
  struct sigaction sa {};
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_SIGINFO;
  sa.sa_sigaction = sandbox_trap;
  sigaction(SIGSYS, &sa, nullptr);
  install_memory_fault_reporter();
}

}  // namespace emu
