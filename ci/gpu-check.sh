#!/usr/bin/env bash
# Run on a lent GPU machine WITHOUT network, in the repo, after ci/gpu-prepare.sh filled .gpu-deps/ elsewhere:
# builds PyCUDA against the local CUDA, installs qconform, then runs `pytest -m gpu` and the GPU report.
# Everything lands in one folder: $OUT if set, else ./gpu-results: gpu-check.log (the summary), install.log,
# pytest.log, report.log and report/ (report.json, report.md, report.html): 7 files.
#   ci/gpu-check.sh [all|install|test]   (default all; install then test can be two calls on a warm machine)
# Keeps going after a failed step to collect every output; exits 1 if any step failed.
# Knobs: PYTHON, GPU_DEPS, GPU_CHECK_WORKERS (pytest -n, default 4), GPU_CHECK_PYTEST_ARGS (extra words for
#        pytest, e.g. tests/backends/gpu), GPU_CHECK_SEED, GPU_CHECK_SHAPES, GPU_CHECK_{BUILD,TEST,REPORT}_TIMEOUT (seconds).
set -u
cd "$(dirname "$0")/.."
PHASE="${1:-all}"
case "$PHASE" in all|install|test) ;; *) echo "usage: $0 [all|install|test]" >&2; exit 2 ;; esac

RESULTS="${OUT:-$PWD/gpu-results}"
DEPS="${GPU_DEPS:-.gpu-deps}"
PY="${PYTHON:-python3}"
mkdir -p "$RESULTS"
SUMMARY="$RESULTS/gpu-check.log"
failed=0

log() { echo "[gpu-check $(date -u +%H:%M:%S)] $*" | tee -a "$SUMMARY"; }
# step NAME LOG TIMEOUT_S CMD...: run with a time limit, output appended to $RESULTS/LOG.log, record the outcome.
step() {
  local name=$1 logname=$2 limit=$3; shift 3
  local t0=$SECONDS
  log "$name: start (limit ${limit}s)"
  echo "== $name: $*" >>"$RESULTS/$logname.log"
  timeout --kill-after=20 "$limit" "$@" >>"$RESULTS/$logname.log" 2>&1
  local rc=$?
  log "$name: exit $rc after $((SECONDS - t0))s$([ $rc = 124 ] && echo ' (timed out)')"
  [ $rc = 0 ] || failed=1
  return $rc
}

# CUDA toolkit: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, else the folder above nvcc on PATH; it must hold
# include/cuda.h. PyCUDA needs it to build and, at run time, nvcc to compile kernels.
CUDA_ROOT=""
for root in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda "$(dirname "$(command -v nvcc || echo /nonexistent/bin/nvcc)")/.."; do
  if [ -n "$root" ] && [ -x "$root/bin/nvcc" ] && [ -e "$root/include/cuda.h" ]; then CUDA_ROOT="$(cd "$root" && pwd)"; break; fi
done
NVCC="${CUDA_ROOT:+$CUDA_ROOT/bin/nvcc}"
[ -n "$CUDA_ROOT" ] && export PATH="$CUDA_ROOT/bin:$PATH" CUDA_HOME="$CUDA_ROOT"

install_phase() {
  if ! ls "$DEPS"/pycuda-*.tar.gz >/dev/null 2>&1; then
    log "no PyCUDA sdist in $DEPS: run ci/gpu-prepare.sh on a machine with network first"; failed=1; return
  fi
  [ -n "$NVCC" ] || { log "no CUDA toolkit (bin/nvcc + include/cuda.h) found: cannot build PyCUDA"; failed=1; return; }
  step install-deps install 300 "$PY" -m pip install --no-index --find-links "$DEPS" --no-build-isolation \
    setuptools wheel "pytools>=2011.2" "platformdirs>=2.2" mako "gguf>=0.10" "rich>=13" "pytest-xdist>=3.5"

  # PyCUDA reads its build configuration from siteconf.py beside setup.py: point it at this toolkit, link
  # the driver through the toolkit's stub libcuda.so, and leave out CURAND (qconform does not use it).
  local src; src="$(mktemp -d)"
  tar -xzf "$(ls "$DEPS"/pycuda-*.tar.gz | tail -1)" -C "$src"
  local pkg; pkg="$(ls -d "$src"/pycuda-*/ | head -1)"
  local libdirs=("$CUDA_ROOT/lib64" "$CUDA_ROOT/lib64/stubs" "$CUDA_ROOT/lib" "$CUDA_ROOT/lib/stubs"
                 "$CUDA_ROOT/targets/x86_64-linux/lib" "$CUDA_ROOT/targets/x86_64-linux/lib/stubs")
  local d have_stub=""
  for d in "${libdirs[@]}"; do [ -e "$d/libcuda.so" ] && have_stub=1; done
  if [ -z "$have_stub" ]; then
    # No stub: link against the driver's own library under the unversioned name the linker looks for.
    local drv; drv="$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')"
    if [ -n "$drv" ]; then mkdir -p "$src/libcuda" && ln -sf "$drv" "$src/libcuda/libcuda.so" && libdirs+=("$src/libcuda"); fi
  fi
  {
    echo "CUDA_ROOT = '$CUDA_ROOT'"
    echo "CUDA_ENABLE_CURAND = False"
    printf "CUDADRV_LIB_DIR = ["; printf "'%s', " "${libdirs[@]}"; echo "]"
  } >"$pkg/siteconf.py"
  cat "$pkg/siteconf.py" >>"$SUMMARY"
  step build-pycuda install "${GPU_CHECK_BUILD_TIMEOUT:-900}" "$PY" -m pip install -v --no-index --no-deps \
    --no-build-isolation "$pkg"
  rm -rf "$src"

  step install-qconform install 300 "$PY" -m pip install --no-index --no-deps --no-build-isolation -e .
}

test_phase() {
  # Fall back to the source tree if the editable install did not happen.
  "$PY" -c "import harness" 2>/dev/null || export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  {
    echo "== nvidia-smi"; timeout 60 nvidia-smi 2>&1
    echo "== python: $("$PY" --version 2>&1) at $(command -v "$PY")"
    echo "== nvcc: $( [ -n "$NVCC" ] && "$NVCC" --version | tail -1)"
    echo "== backend"
    timeout 300 "$PY" - <<'EOF' 2>&1
from harness.backends import get_backend, gpu_unavailable_reason
reason = gpu_unavailable_reason()
print("gpu backend:", "available" if reason is None else f"UNAVAILABLE: {reason}")
if reason is None:
    backend = get_backend("gpu")
    print(backend.describe())
    print(f"device-to-device copy: {backend.copy_bandwidth_gbps():.0f} GB/s (bytes read + written)")
EOF
  } >>"$SUMMARY"

  local workers=()
  "$PY" -c "import xdist" 2>/dev/null && workers=(-n "${GPU_CHECK_WORKERS:-4}")
  # shellcheck disable=SC2086  # GPU_CHECK_PYTEST_ARGS is a list of words, e.g. "tests/backends/gpu -x"
  step pytest pytest "${GPU_CHECK_TEST_TIMEOUT:-900}" "$PY" -m pytest -m gpu "${workers[@]}" -rs --durations=15 \
    ${GPU_CHECK_PYTEST_ARGS:-}
  tail -3 "$RESULTS/pytest.log" >>"$SUMMARY"

  step report report "${GPU_CHECK_REPORT_TIMEOUT:-900}" "$PY" -m harness.cli report --backend gpu \
    --shapes "${GPU_CHECK_SHAPES:-tiny,tails,qwen3-30b-a3b}" --seed "${GPU_CHECK_SEED:-20261202}" \
    --out "$RESULTS/report"
  tail -5 "$RESULTS/report.log" >>"$SUMMARY"
}

log "phase $PHASE; results in $RESULTS; CUDA root ${CUDA_ROOT:-not found}"
case "$PHASE" in
  all) install_phase; test_phase ;;
  install) install_phase ;;
  test) test_phase ;;
esac
log "done: $([ $failed = 0 ] && echo 'all steps passed' || echo 'SOME STEPS FAILED')"
exit $failed
