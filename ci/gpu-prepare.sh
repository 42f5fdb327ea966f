#!/usr/bin/env bash
# Run on a machine WITH network, in the repo: fill .gpu-deps/ (git-ignored, so carry it explicitly) with what a
# GPU machine without network needs for ci/gpu-check.sh:
#   - Python 3.12 manylinux x86-64 wheels of PyCUDA's runtime dependencies, of qconform's own, of pytest-xdist,
#     and of the build tools pip needs with --no-build-isolation (numpy is left out: the GPU image has it);
#   - PyCUDA: it is published as a source distribution only, and its extension must be compiled against the
#     GPU machine's CUDA headers and driver library, so the sdist travels and ci/gpu-check.sh's install phase
#     builds the wheel there and leaves it in the results. Put that wheel here and
#     later runs install it instead of building: this script keeps a pycuda-*.whl already in the folder;
#   - a copy of the seed specification ($QCONFORM_SEED_RS, else ../shared/seed/qwen_emit.rs) in seed/, which
#     ci/gpu-check.sh hands to the tests through $QCONFORM_SEED_RS (../shared does not travel with a checkout).
set -euo pipefail
cd "$(dirname "$0")/.."

DEST="${GPU_DEPS:-.gpu-deps}"
PY="${PYTHON:-python3}"
PYCUDA_VERSION="${PYCUDA_VERSION:-2026.1}"
TARGET=(--python-version 3.12 --implementation cp --abi cp312
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
# PyCUDA's runtime needs (its setup.py and pytools' metadata), qconform's (pyproject.toml), pytest-xdist for
# `pytest -n`, and the build backends pip needs with --no-build-isolation.
WHEELS=(pytools platformdirs siphash24 typing-extensions mako markupsafe
        gguf pyyaml tqdm requests rich markdown-it-py mdurl pygments
        pytest-xdist execnet setuptools wheel)
PRESENT_ON_GPU_IMAGE=(numpy)

mkdir -p "$DEST"
# Start afresh, except for a PyCUDA wheel built on a GPU machine earlier (it saves the build there).
find "$DEST" -mindepth 1 -maxdepth 1 ! -name 'pycuda-*.whl' -exec rm -rf {} +
"$PY" -m pip download -q --no-deps --no-binary pycuda -d "$DEST" "pycuda==$PYCUDA_VERSION"
"$PY" -m pip download -q --only-binary=:all: "${TARGET[@]}" -d "$DEST" "${WHEELS[@]}"
for name in "${PRESENT_ON_GPU_IMAGE[@]}"; do rm -f "$DEST/$name"-*.whl; done

seed="${QCONFORM_SEED_RS:-../shared/seed/qwen_emit.rs}"
if [ -f "$seed" ]; then
  mkdir -p "$DEST/seed" && cp "$seed" "$DEST/seed/qwen_emit.rs"
else
  echo "gpu-prepare: no seed specification at $seed: the seed tests will skip on the GPU machine" >&2
fi

ls -1 "$DEST"
echo "gpu-prepare: $(find "$DEST" -type f | wc -l) files, $(du -sh "$DEST" | cut -f1) in $DEST"
