#!/usr/bin/env bash
# The GPU check: run on a machine with a CUDA GPU and no network, in the repo, after ci/gpu-prepare.sh filled
# .gpu-deps/ on a machine with network (the folder is git-ignored: carry it explicitly).
#
#   ci/gpu-check.sh [--fake] [PHASE...]   PHASE: install probe test report report-large model generate, or all (default)
#
# Phases, each a step with its own time limit below 600 s, so that each fits one call of a short device slot
# (several phases can share a call; a later call on the same machine can run the next phase):
#   install   the wheels of .gpu-deps/ and PyCUDA (a carried wheel, else built from the carried sdist)
#   probe     the device, the driver, the backend's facts and the device's copy bandwidth
#   test      `pytest -m gpu tests/backends/gpu`: the backend's device tests (the matrix is left to `report`)
#   report    `qconform report --backend gpu` on the conformance matrix at the small shape sets (tiny, tails)
#   report-large  the same matrix at the model's own shapes (qwen3-30b-a3b), whose inputs take minutes to
#             draw, in its own step; together the two run the matrix once, never twice
#   model     a synthetic checkpoint for `generate` (qwen3-30b-a3b dims, 2 layers) in .gpu-work/
#   generate  `generate --backend gpu`: the generation program's kernels, every lane, 32 tokens, against the
#             reference lanes (makes the model first if the `model` phase did not run)
# Results land in $OUT if set, else ./gpu-results: gpu-check.log (the summary, its first lines written before
# any slow step, so that a run cut short still says how far it got), steps.log (every step's output), report/
# and report-large/ (report.json, .md, .html each) and the PyCUDA wheel built here (put it in .gpu-deps/ to skip
# the build next time).
# Keeps going after a failed step; exits 1 if any step failed.
#
# --fake (or QCONFORM_GPU_FAKE=1): a dry run on a machine without a GPU, end to end, against the fake driver of
# tests/backends/gpu/fake_pycuda.py: nothing is installed (the deps folder is inventoried), the device tests run on the
# fake, and the report runs on the fake, where every kernel launch is refused (the fake emulates none of the
# matrix's kernels), so its verdicts mean nothing; the step checks that the report is written.
#
# Knobs: PYTHON, GPU_DEPS (.gpu-deps), GPU_CHECK_SITE (where install puts packages, .gpu-site, on PYTHONPATH),
#   GPU_CHECK_WORKERS (pytest -n, default 4; 0 for none),
#   GPU_CHECK_SHAPES (tiny,tails), GPU_CHECK_LARGE_SHAPES (qwen3-30b-a3b), GPU_CHECK_SEED, GPU_CHECK_GENERATE_ARGS,
#   GPU_CHECK_WORK (.gpu-work), GPU_CHECK_{INSTALL,PROBE,TEST,REPORT,REPORT_LARGE,MODEL,GENERATE}_TIMEOUT (seconds, each below 600), QCONFORM_SEED_RS.
set -u
cd "$(dirname "$0")/.."
REPO="$PWD"

FAKE="${QCONFORM_GPU_FAKE:-0}"
PHASES=()
for arg in "$@"; do
  case "$arg" in
    --fake) FAKE=1 ;;
    all) PHASES+=(install probe test report report-large model generate) ;;
    install|probe|test|report|report-large|model|generate) PHASES+=("$arg") ;;
    *) echo "usage: $0 [--fake] [all|install|probe|test|report|report-large|model|generate]..." >&2; exit 2 ;;
  esac
done
[ ${#PHASES[@]} -gt 0 ] || PHASES=(install probe test report report-large model generate)
[ "$FAKE" = 1 ] || FAKE=0

RESULTS="${OUT:-$REPO/gpu-results}"
DEPS="${GPU_DEPS:-.gpu-deps}"
PY="${PYTHON:-python3}"
mkdir -p "$RESULTS"
SUMMARY="$RESULTS/gpu-check.log"
STEPS_LOG="$RESULTS/steps.log"
failed=0

declare -A LIMIT=(
  [install]="${GPU_CHECK_INSTALL_TIMEOUT:-540}" [probe]="${GPU_CHECK_PROBE_TIMEOUT:-120}"
  [test]="${GPU_CHECK_TEST_TIMEOUT:-420}" [report]="${GPU_CHECK_REPORT_TIMEOUT:-540}"
  [report-large]="${GPU_CHECK_REPORT_LARGE_TIMEOUT:-570}"
  [model]="${GPU_CHECK_MODEL_TIMEOUT:-420}" [generate]="${GPU_CHECK_GENERATE_TIMEOUT:-570}"
)
for p in "${!LIMIT[@]}"; do
  if ! [[ "${LIMIT[$p]}" =~ ^[0-9]+$ ]] || [ "${LIMIT[$p]}" -lt 1 ] || [ "${LIMIT[$p]}" -ge 600 ]; then
    echo "gpu-check: the $p limit must be a whole number of seconds in 1..599 (one device call is 600 s), got '${LIMIT[$p]}'" >&2
    exit 2
  fi
done

log() { echo "[gpu-check $(date -u +%H:%M:%S)] $*" | tee -a "$SUMMARY"; }

# step NAME CMD...: run under the phase's time limit, output appended to steps.log, outcome in the summary.
step() {
  local name=$1; shift
  local limit=${LIMIT[$name]} t0=$SECONDS rc
  log "$name: start (limit ${limit}s)"
  echo "== $(date -u +%H:%M:%S) $name: $*" >>"$STEPS_LOG"
  timeout --kill-after=10 "$limit" "$@" >>"$STEPS_LOG" 2>&1
  rc=$?
  log "$name: exit $rc after $((SECONDS - t0))s$([ $rc = 124 ] && echo " (timed out at ${limit}s)")"
  return $rc
}

# What the GPU tests need travels with the checkout: the seed specification from $QCONFORM_SEED_RS, else the
# copy ci/gpu-prepare.sh put in the deps folder.
if [ -z "${QCONFORM_SEED_RS:-}" ] && [ -f "$DEPS/seed/qwen_emit.rs" ]; then
  export QCONFORM_SEED_RS="$REPO/$DEPS/seed/qwen_emit.rs"
fi
# What the install phase installs goes to $SITE (kept between calls on a warm machine), not into the image.
SITE="${GPU_CHECK_SITE:-$REPO/.gpu-site}"
export PYTHONPATH="$REPO:$SITE${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if [ "$FAKE" = 1 ]; then
  # QCONFORM_GPU_FAKE_CONFIG: more options for the fake machine (tests/backends/gpu/fake_pycuda.py, FakeDriver), as JSON.
  export QCONFORM_GPU_DRIVER=tests.backends.gpu.fake_pycuda
  QCONFORM_FAKE_CUDA=$("$PY" -c 'import json, sys; print(json.dumps({"all_symbols": True, **json.loads(sys.argv[1])}))' \
    "${QCONFORM_GPU_FAKE_CONFIG:-{\}}") || { echo "gpu-check: QCONFORM_GPU_FAKE_CONFIG: not a JSON object" >&2; exit 2; }
  export QCONFORM_FAKE_CUDA
fi

# CUDA toolkit: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, else the folder above nvcc on PATH; it must hold
# include/cuda.h. PyCUDA needs it to build and, at run time, nvcc to compile kernels.
CUDA_ROOT=""
for root in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda "$(dirname "$(command -v nvcc || echo /nonexistent/bin/nvcc)")/.."; do
  if [ -n "$root" ] && [ -x "$root/bin/nvcc" ] && [ -e "$root/include/cuda.h" ]; then CUDA_ROOT="$(cd "$root" && pwd)"; break; fi
done
[ -n "$CUDA_ROOT" ] && export PATH="$CUDA_ROOT/bin:$PATH" CUDA_HOME="$CUDA_ROOT"

# The first lines of the results, before anything slow.
{
  echo "# qconform GPU check $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
  echo "# mode $([ "$FAKE" = 1 ] && echo 'DRY RUN against the fake driver (tests/backends/gpu/fake_pycuda.py)' || echo 'real device')"
  plan=""; for p in "${PHASES[@]}"; do plan+=" $p(<=${LIMIT[$p]}s)"; done
  echo "# phases${plan}"
  echo "# python $("$PY" --version 2>&1) at $(command -v "$PY"); CUDA root ${CUDA_ROOT:-not found}; deps $DEPS"
  seed=$("$PY" -c "from tests.seed import seed_path; p = seed_path(); print(p if p.is_file() else '')" 2>&1)
  echo "# seed specification ${seed:-not found (set QCONFORM_SEED_RS, or run ci/gpu-prepare.sh): the seed tests skip}"
} >>"$SUMMARY"
log "results in $RESULTS"

install_phase() {
  if [ "$FAKE" = 1 ]; then
    log "install: dry run: nothing installed; $DEPS holds $(ls "$DEPS" 2>/dev/null | wc -l) file(s)$(ls "$DEPS"/pycuda-* >/dev/null 2>&1 && echo ', PyCUDA among them' || echo ', no PyCUDA (run ci/gpu-prepare.sh)')"
    return 0
  fi
  if ! ls "$DEPS"/pycuda-* >/dev/null 2>&1; then
    log "install: no PyCUDA wheel or sdist in $DEPS: run ci/gpu-prepare.sh on a machine with network first"; return 1
  fi
  step install bash -c '
    set -euo pipefail
    deps=$1 results=$2 py=$3 cuda_root=$4 site=$5
    # Into a folder of our own on PYTHONPATH, as plain files: the image'"'"'s environment is left as it is.
    mkdir -p "$site"
    wheels=$(ls "$deps"/*.whl | grep -v "/pycuda-" || true)
    [ -z "$wheels" ] || "$py" -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$site" $wheels
    tag=$("$py" -c "import sys; print(f\"cp{sys.version_info[0]}{sys.version_info[1]}\")")
    wheel=$(ls "$deps"/pycuda-*-"$tag"-*.whl 2>/dev/null | tail -1 || true)
    if [ -z "$wheel" ]; then
      [ -n "$cuda_root" ] || { echo "no CUDA toolkit (bin/nvcc + include/cuda.h): cannot build PyCUDA"; exit 1; }
      ls "$deps"/pycuda-*.tar.gz >/dev/null 2>&1 || { echo "no PyCUDA wheel for $tag and no sdist in $deps"; exit 1; }
      src=$(mktemp -d)
      tar -xzf "$(ls "$deps"/pycuda-*.tar.gz | tail -1)" -C "$src"
      pkg=$(ls -d "$src"/pycuda-*/ | head -1)
      # PyCUDA reads its build configuration from siteconf.py: this toolkit, the driver library through the
      # toolkit stub (or the driver itself), no CURAND (unused). setup.cfg lets build_ext build PyCUDA'"'"'s
      # extensions side by side (the sources of one extension still compile one after another).
      libdirs=""
      for d in "$cuda_root"/lib64 "$cuda_root"/lib64/stubs "$cuda_root"/lib "$cuda_root"/lib/stubs \
               "$cuda_root"/targets/x86_64-linux/lib "$cuda_root"/targets/x86_64-linux/lib/stubs; do
        [ -d "$d" ] && libdirs+="\"$d\", "
      done
      if ! ls "$cuda_root"/lib64/stubs/libcuda.so "$cuda_root"/targets/x86_64-linux/lib/stubs/libcuda.so >/dev/null 2>&1; then
        drv=$(ldconfig -p 2>/dev/null | awk "/libcuda\\.so\\.1 /{print \$NF; exit}")
        if [ -n "$drv" ]; then mkdir -p "$src/libcuda"; ln -sf "$drv" "$src/libcuda/libcuda.so"; libdirs+="\"$src/libcuda\", "; fi
      fi
      printf "CUDA_ROOT = \"%s\"\nCUDA_ENABLE_CURAND = False\nCUDADRV_LIB_DIR = [%s]\n" "$cuda_root" "$libdirs" >"$pkg/siteconf.py"
      printf "\n[build_ext]\nparallel = %s\n" "$(nproc)" >>"$pkg/setup.cfg"
      cat "$pkg/siteconf.py"
      "$py" -m pip wheel -q --no-index --no-deps --no-build-isolation -w "$results" "$pkg"
      wheel=$(ls "$results"/pycuda-*.whl | tail -1)
      echo "built $wheel: put it in $deps/ to skip the build on the next run"
    fi
    "$py" -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$site" "$wheel"
    "$py" -c "import pycuda; print(\"PyCUDA\", pycuda.VERSION_TEXT)"
  ' install "$DEPS" "$RESULTS" "$PY" "$CUDA_ROOT" "$SITE"
}

probe_phase() {
  if [ "$FAKE" = 0 ]; then
    { echo "== nvidia-smi"; timeout 60 nvidia-smi 2>&1; } >>"$STEPS_LOG"
  fi
  step probe "$PY" - <<'EOF'
from harness.backends import get_backend, gpu_unavailable_reason
reason = gpu_unavailable_reason()
print("gpu backend:", "available" if reason is None else f"UNAVAILABLE: {reason}")
if reason is not None:
    raise SystemExit(1)
backend = get_backend("gpu")
print(backend.describe())
copy = backend.copy_bandwidth()
print("device-to-device copy:", f"{copy['gbps']:.0f} GB/s (bytes read + written), {copy}" if "gbps" in copy
      else copy["skipped"])
EOF
  local rc=$?
  grep -E "^(gpu backend|\{'backend'|device-to-device)" "$STEPS_LOG" | tail -3 >>"$SUMMARY"
  return $rc
}

test_phase() {
  local workers=()
  [ "${GPU_CHECK_WORKERS:-4}" != 0 ] && "$PY" -c "import xdist" 2>/dev/null && workers=(-n "${GPU_CHECK_WORKERS:-4}")
  # The generation test is the `generate` phase's work: deselected here so it runs once, not twice.
  step test "$PY" -m pytest -m gpu tests/backends/gpu "${workers[@]}" -p no:randomly -rs --durations=10 \
    --deselect tests/backends/gpu/test_generation_gpu.py
  local rc=$?
  grep -E "^(=+ .* in [0-9.]+s|SKIPPED)" "$STEPS_LOG" | tail -4 >>"$SUMMARY"
  return $rc
}

# run_report STEP SHAPES OUTDIR: one report run and its summary line.
run_report() {
  local name=$1 shapes=$2 dir=$3 rc
  step "$name" "$PY" -m harness.cli report --backend gpu --shapes "$shapes" --seed "${GPU_CHECK_SEED:-20261202}" \
    --out "$dir"
  rc=$?
  [ -s "$dir/report.json" ] && "$PY" - "$dir/report.json" "$name" >>"$SUMMARY" 2>&1 <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
meta = doc["meta"]
print(f"{sys.argv[2]}:", meta.get("shapes"), doc["summary"], "| copy bandwidth:", meta.get("copy_bandwidth_gbps"),
      meta.get("copy_bandwidth_note") or "", "| worker restarts:",
      len(meta.get("backend_info", {}).get("worker_restarts", [])))
EOF
  if [ "$FAKE" = 1 ] && [ $rc = 1 ] && [ -s "$dir/report.json" ]; then
    log "$name: dry run: exit 1 is expected (the fake driver runs none of the matrix's kernels); the report was written"
    return 0
  fi
  return $rc
}

report_phase() { run_report report "${GPU_CHECK_SHAPES:-tiny,tails}" "$RESULTS/report"; }
report-large_phase() { run_report report-large "${GPU_CHECK_LARGE_SHAPES:-qwen3-30b-a3b}" "$RESULTS/report-large"; }

# The generation program on the GPU, in two phases (each fits one call): `model` writes a synthetic checkpoint
# at the qwen3-30b-a3b dims with 2 layers into $WORK (kept between calls on a warm machine; $OUT is not), and
# `generate` runs every lane, 32 tokens, against the reference lanes; its report lands in generate/.
# The dry run uses the tiny preset and 4 tokens: the fake driver runs no kernel, so only the plumbing is checked.
WORK="${GPU_CHECK_WORK:-$REPO/.gpu-work}"
GEN_MODEL="$WORK/generate-$([ "$FAKE" = 1 ] && echo tiny || echo qwen3-30b-a3b)-2layers.gguf"

model_phase() {
  mkdir -p "$WORK"
  if [ -s "$GEN_MODEL" ]; then log "model: $GEN_MODEL is there already"; return 0; fi
  step model "$PY" -m harness.cli make-model --preset "$([ "$FAKE" = 1 ] && echo tiny || echo qwen3-30b-a3b)" \
    --layers 2 --no-progress --out "$GEN_MODEL"
}

generate_phase() {
  local rc
  [ -s "$GEN_MODEL" ] || model_phase || return 1
  # shellcheck disable=SC2086  # GPU_CHECK_GENERATE_ARGS is a list of words
  step generate "$PY" -m harness.cli generate --backend gpu --model "$GEN_MODEL" \
    --tokens "$([ "$FAKE" = 1 ] && echo 4 || echo 32)" --no-router-effect --out "$RESULTS/generate" \
    ${GPU_CHECK_GENERATE_ARGS:-}
  rc=$?
  grep -E "^(precise|fast|flash|twopass|exact)[: ]" "$STEPS_LOG" | tail -10 >>"$SUMMARY"
  if [ "$FAKE" = 1 ] && [ $rc = 1 ] && [ -s "$RESULTS/generate/report.json" ]; then
    log "generate: dry run: exit 1 is expected (the fake driver runs no kernel); the report was written"
    return 0
  fi
  return $rc
}

for phase in "${PHASES[@]}"; do
  "${phase}_phase" || failed=1
done
log "done: $([ $failed = 0 ] && echo 'all steps passed' || echo 'SOME STEPS FAILED')"
exit $failed
