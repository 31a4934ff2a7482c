#!/usr/bin/env bash
# The test suite against llama.cpp built for a plain AVX2 CPU (no AVX-512), on any x86-64 machine:
# llama.cpp is compiled for the CPU it is installed on, and its kernels (so which greedy near-ties
# flip) differ between AVX2 and AVX-512. Builds the pinned llama-cpp-python once into .venv-avx2
# (about 10 minutes on two cores) and runs pytest from .venv with that build first on the path.
# Usage: bench/avx2_suite.sh [pytest arguments]   (after the README's test setup made .venv)
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(.venv/bin/python -c "from importlib.metadata import version; print(version('llama-cpp-python'))")
if [ ! -d .venv-avx2/lib ]; then
  python3 -m venv .venv-avx2
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF" \
    .venv-avx2/bin/pip install -q --no-deps --no-cache-dir --no-binary llama-cpp-python "llama-cpp-python==$version"
fi
site=$(echo .venv-avx2/lib/python3*/site-packages)
PYTHONPATH="$PWD/$site" .venv/bin/python -c "import llama_cpp; info = llama_cpp.llama_print_system_info().decode(); assert 'AVX512' not in info, info; print(info)"
PYTHONPATH="$PWD/$site" exec .venv/bin/python -m pytest "$@"
