#!/usr/bin/env bash
# Install qconform with its test and toolchain extras in a fresh venv, then run the README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."

# The CPU backend uses its built-in x86-64 fiber switch by default; Boost.Context is installed so that the
# tests of every fiber implementation (tests/backends/emu/test_fibers.py, forced by option) run the Boost path too.
# Boost's headers alone (libboost-dev) do not make it usable: the check is for the library.
if ! ldconfig -p 2>/dev/null | grep libboost_context >/dev/null && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libboost-context-dev) \
    || echo "ci/test.sh: could not install libboost-context-dev; the Boost.Context fiber tests will skip" >&2
fi

# Headless Chromium renders report.html in the report test (tests/judging/test_report_browser.py); without it
# that test skips with the reason.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium) \
    || echo "ci/test.sh: could not install chromium; the report's browser test will skip" >&2
fi

VENV="${QCONFORM_VENV:-.venv-ci}"
python3 -m venv "$VENV"
. "$VENV/bin/activate"
python -m pip install -q --upgrade pip
python -m pip install -q -e '.[test,toolchain,cluster]'
# llama.cpp for the `generate --compare llama.cpp` tests: built from source by pip the first time on a machine
# (several minutes), then taken from pip's wheel cache.
# A failed build is reported and leaves those tests skipped with the reason; it does not stop the suite.
python -m pip install -q -e '.[llama]' \
  || echo "ci/test.sh: could not install the llama extra (llama-cpp-python); the llama.cpp comparison tests will skip" >&2

# The README's test command (the venv is active, and pytest puts the repo root on the path):
pytest -n 2
