#!/usr/bin/env bash
# The GPU check's CUDA build made ahead, here, on a machine without a GPU, so that a lent GPU's
# few minutes (15 in all) go to measuring: on the H200 the build took 265 s of them with 16 jobs.
# Here it takes ~45 minutes on two cores, run while other work goes on (not beside a benchmark).
#
#   python bench/gpu_prepare.py && bash bench/cuda_prebuild.sh && python bench/gpu_prepare.py
#
# The first gpu_prepare makes the trimmed source; this builds it with CUDA's compiler from NVIDIA's
# wheels (13.0, the GPU machine's version: its driver runs what 13.0 builds) and packs build/bin
# as .gpu-carry/llama.cpp-VERSION-cuda90.tar.xz; the second checks what travels. gpu_check.sh
# uses the carried build when it runs there (it finds the CUDA runtime and cuBLAS in the machine's
# toolkit) and builds from the source when it does not. The CPU code is compiled for AVX2, not
# for this machine (llama_flags.sh): the GPU machine's processor is another.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CLLM_BENCH_CACHE:-$HOME/.cache/cllm-bench}
ARCH=${GPU_CHECK_ARCH:-90}
JOBS=${CUDA_PREBUILD_JOBS:-$(nproc)}
TOOLKIT=$CACHE/cuda-13.0
CUDA=$TOOLKIT/nvidia/cu13
WORK=$CACHE/cuda-prebuild
# Pinned to the GPU machine's CUDA 13.0 (/work/.library/device/KINDS.md: nvcc 13.0, driver 580).
WHEELS=(nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-runtime==13.0.96
        nvidia-cuda-cccl==13.0.85 nvidia-cublas==13.0.2.14)

SRC_TGZ=$(ls "$REPO"/.gpu-carry/llama.cpp-*.tar.gz 2>/dev/null | head -1)
[ -n "$SRC_TGZ" ] || { echo "no .gpu-carry/llama.cpp-*.tar.gz: run python bench/gpu_prepare.py first" >&2; exit 1; }
VERSION=$(basename "$SRC_TGZ" .tar.gz)  # llama.cpp-<llama-cpp-python's version>
DST=$REPO/.gpu-carry/$VERSION-cuda$ARCH.tar.xz

if [ ! -x "$CUDA/bin/nvcc" ]; then
    echo "== CUDA 13.0's compiler, runtime and cuBLAS from NVIDIA's wheels into $TOOLKIT"
    mkdir -p "$CACHE/cuda-wheels"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_12_x86_64 -d "$CACHE/cuda-wheels" "${WHEELS[@]}"
    rm -rf "$TOOLKIT"
    python3 -m pip install -q --no-deps --no-compile --target "$TOOLKIT" "$CACHE"/cuda-wheels/*.whl
    # The layout nvcc.profile and CMake's FindCUDAToolkit look for in a toolkit.
    mkdir -p "$CUDA/targets/x86_64-linux" "$CUDA/lib/stubs"
    ln -sfn ../../include "$CUDA/targets/x86_64-linux/include"
    ln -sfn ../../lib "$CUDA/targets/x86_64-linux/lib"
    ln -sfn lib "$CUDA/lib64"
    for lib in cudart cublas cublasLt; do ln -sf "lib$lib.so.13" "$CUDA/lib/lib$lib.so"; done
    # The driver's library, to link against: ggml-cuda's memory pool calls it (cuMemCreate...).
    # The GPU machine's driver provides the real one, by this name.
    echo 'void cllm_libcuda_stub(void) {}' >"$WORK.stub.c"
    gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$CUDA/lib/stubs/libcuda.so" "$WORK.stub.c"
    rm -f "$WORK.stub.c"
fi
export PATH=$CUDA/bin:$PATH
nvcc --version | tail -2

echo "== configuring $VERSION for CUDA (compute capability $ARCH)"
rm -rf "$WORK/src" && mkdir -p "$WORK/src"
tar -xzf "$SRC_TGZ" -C "$WORK/src"
# shellcheck source=bench/llama_flags.sh
. "$REPO/bench/llama_flags.sh"
llama_cmake_flags cuda portable
# The stub has none of the driver's symbols: executables link without them, the driver has them.
FLAGS+=("-DCUDAToolkit_ROOT=$CUDA" "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined"
        # The libraries find each other beside themselves wherever build/bin is unpacked.
        "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON" "-DCMAKE_INSTALL_RPATH=\$ORIGIN")
cmake -S "$WORK/src/llama.cpp" -B "$WORK/build" "${FLAGS[@]}" >"$WORK/configure.log" 2>&1 \
    || { tail -30 "$WORK/configure.log"; exit 1; }
echo "== building llama-server and llama-batched-bench (-j$JOBS; log: $WORK/build.log)"
nice -n 10 cmake --build "$WORK/build" -j "$JOBS" --target llama-server llama-batched-bench >"$WORK/build.log" 2>&1 \
    || { tail -30 "$WORK/build.log"; exit 1; }

echo "== packing $DST"
(cd "$WORK/build/bin" && nvcc --version | tail -1 >BUILD-INFO && echo "${FLAGS[*]}" >>BUILD-INFO)
tar -cJf "$DST.part" -C "$WORK/build/bin" .
mv "$DST.part" "$DST"
ls -la "$DST"
