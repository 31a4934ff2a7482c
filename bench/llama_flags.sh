# Sourced by bench/gpu_check.sh and bench/cuda_prebuild.sh: the CMake settings of the GPU check's
# llama.cpp build, written once so that a build made ahead (cuda_prebuild.sh) is the one the
# check would have made, but for the CPU code it is compiled for.
#
# llama_cmake_flags BACKEND CPU: sets the array FLAGS. BACKEND: cpu or cuda; CPU: native (this
# machine's instructions) or portable (AVX2, FMA, F16C, BMI2: any x86-64 server of the last decade,
# for a build that runs on another machine).
llama_cmake_flags() {
    local backend=$1 cpu=$2
    FLAGS=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON
           -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF
           -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF
           # No AMX kernels (H100/H200 hosts are mostly AMX Xeons): GCC's native build of this
           # llama.cpp's dies with SIGILL at their first tile instruction (README); cllm's binding
           # leaves them out at run time too, llama-server and batched-bench could not.
           -DCMAKE_C_FLAGS=-U__AMX_INT8__ -DCMAKE_CXX_FLAGS=-U__AMX_INT8__)
    if [ "$cpu" = native ]; then
        FLAGS+=(-DGGML_NATIVE=ON)
    else
        FLAGS+=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON)
    fi
    if [ "$backend" = cuda ]; then
        # Compute capability 9.0 (an H100 or H200) alone unless GPU_CHECK_ARCH says otherwise.
        FLAGS+=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=${GPU_CHECK_ARCH:-90}" "-DCMAKE_CUDA_COMPILER=$(command -v nvcc)")
    fi
}
