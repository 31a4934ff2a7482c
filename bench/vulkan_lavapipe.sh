#!/usr/bin/env bash
# Mesa 25's software Vulkan (lavapipe) for the `-m gpu` tier on a machine without a GPU, unpacked
# under $1 and used through VK_ICD_FILENAMES (nothing installed system-wide).
#
# Debian 12's own lavapipe (Mesa 22.3.6) corrupts the heap once a process has loaded and freed a
# partly offloaded model a few times: glibc aborts with "corrupted double-linked list" or
# "corrupted size vs. prev_size", or lavapipe's queue thread jumps into freed memory (gdb: a
# SIGSEGV under libvulkan_lvp.so's own thread). Measured 2026-12-01 with a stress of the tier's
# pattern (reload with another num_gpu, a burst, a prompt saved to the host cache and restored):
# Debian 12's lavapipe crashed within 2-4 rounds in 3 runs of 3; bookworm-backports' Mesa 25.0.7
# ran 28 rounds in 2 runs without one. CI once failed on it (the restore test, session 63).
#
# This fetches bookworm-backports' mesa-vulkan-drivers with the libdrm it needs (the rest of its
# dependencies are Debian 12's, which bench/vulkan_build.sh installs with Debian 12's Mesa) with
# apt's own client from private lists, unpacks them under $1, and writes $1/lvp_icd.json naming
# its libvulkan_lvp.so by path. Its libdrm is found through LD_LIBRARY_PATH=$1/usr/lib/<triplet>
# (bench/vulkan_build.sh --env says both).
set -euo pipefail
DEST=${1:?usage: vulkan_lavapipe.sh DEST}
LISTS=$(mktemp -d)
trap 'rm -rf "$LISTS"' EXIT
mkdir -p "$LISTS/lists/partial" "$LISTS/cache/archives/partial" "$DEST"
echo "deb http://deb.debian.org/debian bookworm-backports main" >"$LISTS/sources.list"
O=(-o "Dir::Etc::SourceList=$LISTS/sources.list" -o Dir::Etc::SourceParts=/dev/null
   -o "Dir::State::Lists=$LISTS/lists" -o "Dir::Cache=$LISTS/cache")
apt-get "${O[@]}" update -qq
(cd "$LISTS" && apt-get "${O[@]}" download mesa-vulkan-drivers libdrm2 libdrm-amdgpu1)
for deb in "$LISTS"/*.deb; do dpkg -x "$deb" "$DEST"; done
LVP=$(ls "$DEST"/usr/lib/*-linux-gnu/libvulkan_lvp.so | head -1)
sed "s#\"library_path\": \"[^\"]*\"#\"library_path\": \"$LVP\"#" \
    "$DEST/usr/share/vulkan/icd.d/lvp_icd.json" >"$DEST/lvp_icd.json"
grep -q "$LVP" "$DEST/lvp_icd.json"
echo "lavapipe $(ls "$LISTS"/mesa-vulkan-drivers_*.deb | sed 's/.*_\(.*\)_.*/\1/') in $DEST"
