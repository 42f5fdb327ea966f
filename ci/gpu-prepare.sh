#!/usr/bin/env bash
# Run on a machine WITH network, in the repo: download into .gpu-deps/ (git-ignored) what a GPU machine without
# network needs to run ci/gpu-check.sh: the PyCUDA source distribution (it has no wheels; it is built there
# against the local CUDA) and, as Python 3.12 manylinux x86_64 wheels, PyCUDA's runtime dependencies and
# qconform's own. Packages the GPU image already has (numpy, setuptools, wheel, pytest, hypothesis, ...) are
# still fetched where small, so that the check does not depend on the image's exact contents; numpy is not
# (the image has it, and its wheel alone is larger than everything else together).
set -euo pipefail
cd "$(dirname "$0")/.."

DEST="${GPU_DEPS:-.gpu-deps}"
PY="${PYTHON:-python3}"
PYCUDA_VERSION="${PYCUDA_VERSION:-2026.1}"
TARGET=(--python-version 3.12 --implementation cp --abi cp312
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
# PyCUDA's runtime needs (see its setup.py and pytools' metadata), qconform's (pyproject.toml), pytest-xdist
# for `pytest -n`, and the build backends pip needs with --no-build-isolation.
WHEELS=(pytools platformdirs siphash24 typing-extensions mako markupsafe
        gguf pyyaml tqdm requests rich markdown-it-py mdurl pygments
        pytest-xdist execnet setuptools wheel)
PRESENT_ON_GPU_IMAGE=(numpy)

rm -rf "$DEST"
mkdir -p "$DEST"
# The sdist: only PyCUDA itself is forced to source; its build requirements may come as wheels.
"$PY" -m pip download -q --no-deps --no-binary pycuda -d "$DEST" "pycuda==$PYCUDA_VERSION"
# Wheels with their dependencies resolved for the GPU machine's Python, then drop what the image has.
"$PY" -m pip download -q --only-binary=:all: "${TARGET[@]}" -d "$DEST" "${WHEELS[@]}"
for name in "${PRESENT_ON_GPU_IMAGE[@]}"; do rm -f "$DEST/$name"-*.whl; done

ls -1 "$DEST"
echo "gpu-prepare: $(find "$DEST" -type f | wc -l) files, $(du -sh "$DEST" | cut -f1) in $DEST"
