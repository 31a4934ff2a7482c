#!/usr/bin/env bash
# llama.cpp's Vulkan backend, built from the pinned llama-cpp-python's own vendor/llama.cpp, for the
# `-m gpu` test tier (issue 31): on a machine without a GPU it runs on Mesa's software Vulkan
# (lavapipe, `llvmpipe` in vulkaninfo), which exercises device memory reports, partial offload and
# state copies from device buffers. There it is Mesa 25's lavapipe, unpacked beside the build
# (bench/vulkan_lavapipe.sh: Debian 12's corrupts the heap after a few model reloads).
#
#   bash bench/vulkan_build.sh            # as root on Debian 12: apt packages, headers, sdist, build
#   eval "$(bash bench/vulkan_build.sh --env)"   # LLAMA_CPP_LIB_PATH / MTMD_CPP_LIB point at it,
#                                                # GGML_VK_VISIBLE_DEVICES=0 names the first device,
#                                                # VK_ICD_FILENAMES the lavapipe if there is one
#
# Like bench/gpu_check.sh, this is plain CMake with -DBUILD_SHARED_LIBS=ON: the installed
# llama-cpp-python loads the build through LLAMA_CPP_LIB_PATH and MTMD_CPP_LIB, no wheel rebuilt.
# Debian 12's Vulkan C++ headers (1.3.239) lack vk::LayerSettingEXT, so the build compiles against
# Debian 13's libvulkan-dev headers (bench/vulkan_headers.sh, header-only) and links Debian 12's
# loader (libvulkan1). The shader generation is the slow part; set VULKAN_BUILD_JOBS and
# VULKAN_BUILD_NICE for the machine (defaults: 2 jobs, nice 19). The build is kept in
# VULKAN_BUILD_DIR (default ~/.cache/cllm-vulkan) and an up-to-date one is not rebuilt.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
DIR=${VULKAN_BUILD_DIR:-$HOME/.cache/cllm-vulkan}
JOBS=${VULKAN_BUILD_JOBS:-2}
NICE=${VULKAN_BUILD_NICE:-19}
PY=${VULKAN_BUILD_PYTHON:-$REPO/.venv/bin/python}
[ -x "$PY" ] || PY=python3
VERSION=$(sed -n 's/.*"llama-cpp-python==\([0-9.]*\)".*/\1/p' "$REPO/pyproject.toml" | head -1)
BIN=$DIR/build/bin
LVP=$DIR/lavapipe
if [ "${1:-}" = --env ]; then  # what the tier and a user's shell need, once built
    echo "export LLAMA_CPP_LIB_PATH=$BIN MTMD_CPP_LIB=$BIN GGML_VK_VISIBLE_DEVICES=\${GGML_VK_VISIBLE_DEVICES:-0}"
    if [ -f "$LVP/lvp_icd.json" ]; then  # step 5's lavapipe, on a machine without a GPU
        LIBS=$(dirname "$(ls "$LVP"/usr/lib/*-linux-gnu/libvulkan_lvp.so | head -1)")
        echo "export VK_ICD_FILENAMES=$LVP/lvp_icd.json LD_LIBRARY_PATH=$LIBS\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
    fi
    exit 0
fi
say() { echo "[$(date -u +%H:%M:%S)] $*"; }
mkdir -p "$DIR"

# 1. Debian 12's loader, lavapipe, the shader compiler and SPIR-V headers.
PKGS=(mesa-vulkan-drivers libvulkan1 vulkan-tools glslc glslang-tools spirv-headers)
if ! dpkg -s "${PKGS[@]}" >/dev/null 2>&1; then
    say "installing ${PKGS[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${PKGS[@]}"
fi
vulkaninfo --summary 2>/dev/null | grep -E 'deviceName|apiVersion' || say "warning: vulkaninfo sees no device"

# 2. Debian 13's Vulkan headers (header-only), for vk::LayerSettingEXT.
HDR=$DIR/headers
[ -f "$HDR/usr/include/vulkan/vulkan.hpp" ] || bash "$REPO/bench/vulkan_headers.sh" "$HDR"

# 3. The pinned sdist's llama.cpp: the very source the installed binding was built from.
[ -n "$VERSION" ] || { echo "no llama-cpp-python pin in pyproject.toml" >&2; exit 1; }
SRC=$DIR/src-$VERSION
if [ ! -f "$SRC/CMakeLists.txt" ]; then
    SDIST=$DIR/sdist/llama_cpp_python-$VERSION.tar.gz
    [ -f "$SDIST" ] || "$PY" -m pip download -q --no-deps --no-binary :all: \
        "llama-cpp-python==$VERSION" -d "$DIR/sdist"
    rm -rf "$SRC" "$DIR/unpack" && mkdir -p "$DIR/unpack"
    tar -xzf "$SDIST" -C "$DIR/unpack" "llama_cpp_python-$VERSION/vendor/llama.cpp"
    mv "$DIR/unpack/llama_cpp_python-$VERSION/vendor/llama.cpp" "$SRC" && rm -rf "$DIR/unpack"
fi

# 4. Configure and build the libraries cllm loads (libllama, libggml*, libmtmd).
LIBVK=$(ls /usr/lib/*-linux-gnu/libvulkan.so.1 | head -1)
FLAGS=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_VULKAN=ON -DGGML_NATIVE=ON
       -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF
       -DLLAMA_OPENSSL=OFF "-DVulkan_INCLUDE_DIR=$HDR/usr/include" "-DVulkan_LIBRARY=$LIBVK"
       -DVulkan_GLSLC_EXECUTABLE=/usr/bin/glslc "-DCMAKE_CXX_FLAGS=-I$HDR/usr/include")
say "configuring llama.cpp $VERSION (llama-cpp-python's) with Vulkan into $DIR/build"
cmake -S "$SRC" -B "$DIR/build" "${FLAGS[@]}" >"$DIR/configure.log" 2>&1 \
    || { tail -30 "$DIR/configure.log"; exit 1; }
grep -E 'GLSLC|glslc|Vulkan' "$DIR/configure.log" || true
say "building (-j$JOBS, nice $NICE; the shaders take long): log in $DIR/build.log"
T0=$(date +%s)
nice -n "$NICE" cmake --build "$DIR/build" -j "$JOBS" --target llama mtmd >"$DIR/build.log" 2>&1 \
    || { tail -40 "$DIR/build.log"; exit 1; }
say "built in $(( $(date +%s) - T0 )) s: $(ls "$BIN" | tr '\n' ' ')"

# 5. Without a GPU, Mesa 25's lavapipe (bench/vulkan_lavapipe.sh says why not Debian 12's).
if ! vulkaninfo --summary 2>/dev/null | grep deviceType | grep -vq PHYSICAL_DEVICE_TYPE_CPU \
        && [ ! -f "$LVP/lvp_icd.json" ]; then
    rm -rf "$LVP" && bash "$REPO/bench/vulkan_lavapipe.sh" "$LVP"
fi
# llama.cpp's Vulkan backend passes over CPU-type devices (lavapipe is one) unless they are named:
# --env names device 0.
eval "$(bash "$0" --env)"
"$PY" -c "from cllm_ollama.engine.binding import gpu_devices; \
print('llama.cpp devices:', gpu_devices())" || say "warning: $PY could not list the build's devices"
bash "$0" --env
