"""The CPU execution backend (harness.backends.emu.backend.EmuBackend). In: unmodified CUDA C source and launches.
Out: results with CUDA's execution semantics, run on fibers in a worker process, with bounds, race, barrier
and poison checks raised as KernelFaults. Its pieces:

emu_device.hpp    what device code sees: CUDA types, intrinsics and macros (force-included); it includes
                  emu_float16.hpp (__half, __nv_bfloat16 and their pairs), emu_float8.hpp (FP8) and
                  emu_rounding.hpp (the _rz/_rd/_ru intrinsics and conversions), which share emu_exact.hpp
                  (rounding to odd, TwoSum, directed rounding)
emu_runtime.cpp   C++ runtime: fibers per CUDA thread, barriers, warp collectives, the int8 mma, checks
                  (compiled once, linked into every module with hidden visibility)
rewrite.py        CUDA source -> C++ translation unit (shared memory slots, inline PTX, launch trampolines)
toolchain.py      host compiler and fiber implementation (built-in x86-64 switch, Boost.Context or ucontext),
                  compile flags
build.py          compile + cache by content hash
worker.py         the subprocess that runs launches (harness.backends.client / protocol talk to it)
runs.py           one launch under several schedules; checks.py compares the runs; harness.backends.args
                  validates the arguments
sampling.py       which blocks the extra schedules run (block sampling)
staging.py        large arguments through shared memory; watchdog.py: the per-block progress counter
"""
