#!/usr/bin/env bash
# Newer Vulkan C++ headers for building llama.cpp's Vulkan backend on Debian 12 (issue 31's
# lavapipe tier). Debian 12's libvulkan-dev (1.3.239) predates VK_EXT_layer_settings, and
# ggml-vulkan.cpp fails on `'LayerSettingEXT' is not a member of 'vk'`. Debian 13's libvulkan-dev
# (1.4.309; header-only use, nothing installed system-wide) has it: this fetches that package and
# spirv-headers with apt's own client, from private lists, and unpacks them under $1.
#
# Then: apt-get install mesa-vulkan-drivers libvulkan1 glslc glslang-tools (Debian 12's) and
#   CMAKE_ARGS="-DGGML_VULKAN=on -DVulkan_INCLUDE_DIR=$1/usr/include -DCMAKE_CXX_FLAGS=-I$1/usr/include"
# Checked 2026-11-27: `vk::LayerSettingEXT` compiles with g++ 12 against them; llama.cpp's Vulkan
# build itself not yet run with them (the shader build takes long on two cores).
set -euo pipefail
DEST=${1:-/tmp/vulkan-headers}
LISTS=$(mktemp -d)
mkdir -p "$LISTS/lists/partial" "$LISTS/cache/archives/partial" "$DEST"
echo "deb http://deb.debian.org/debian trixie main" >"$LISTS/sources.list"
O=(-o "Dir::Etc::SourceList=$LISTS/sources.list" -o Dir::Etc::SourceParts=/dev/null
   -o "Dir::State::Lists=$LISTS/lists" -o "Dir::Cache=$LISTS/cache")
apt-get "${O[@]}" update -qq
(cd "$LISTS" && apt-get "${O[@]}" download libvulkan-dev spirv-headers)
for deb in "$LISTS"/*.deb; do dpkg -x "$deb" "$DEST"; done
grep -m1 "define VK_HEADER_VERSION " "$DEST/usr/include/vulkan/vulkan_core.h"
rm -rf "$LISTS"
