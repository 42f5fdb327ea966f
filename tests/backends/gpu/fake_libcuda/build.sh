#!/usr/bin/env bash
# Build the fake driver for the PyCUDA installed in $PYTHON, then run the GPU tests against it:
#   tests/backends/gpu/fake_libcuda/build.sh /tmp/fakecuda && \
#   LD_LIBRARY_PATH=/tmp/fakecuda python -m pytest -m gpu tests/backends/gpu
# Entry points PyCUDA links but the fake does not implement are generated as stubs that fail.
set -euo pipefail
out="${1:?usage: build.sh OUTDIR}"
here="$(cd "$(dirname "$0")" && pwd)"
py="${PYTHON:-python3}"
driver_so="$("$py" -c 'import importlib.util, pathlib; s = importlib.util.find_spec("pycuda"); print(next(pathlib.Path(s.origin).parent.glob("_driver*.so")))')"
mkdir -p "$out"
{
  cat "$here/fake_libcuda.c"
  nm -D --undefined-only "$driver_so" | awk '{print $2}' | sed 's/@.*//' | grep '^cu' | sort -u |
    while read -r sym; do grep -q "int $sym(" "$here/fake_libcuda.c" || echo "int $sym(void) { return 999; }"; done
} >"$out/fake_libcuda_all.c"
gcc -O1 -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$out/libcuda.so.1" "$out/fake_libcuda_all.c"
echo "built $out/libcuda.so.1"
