#!/bin/bash
# Builds llama.cpp c392e5094 and ik_llama.cpp 8337e4cd3 (the commits ../shared/tools/build-anchors.sh
# names) for the AVX-512 benchmark machine: x86-64-v4 + AVX512-VNNI + BF16 + VBMI, GGML_NATIVE=OFF,
# static ggml/llama (BUILD_SHARED_LIBS=OFF), OpenMP from devbench/lib/libgomp.so.1. Copies the
# stripped llama-bench (both) and llama-quantize (llama.cpp) into devbench/anchors/.
#   usage: bench/device/build_anchors.sh [WORK_DIR]     (default /work/anchors-v4; JOBS=2; nice -n 10)
# About 5 minutes (llama.cpp) and 40 (ik_llama.cpp, its iqk flash-attention files) on 2 busy cores.
set -euo pipefail
# The bundle for the device machine: devbench/ at the repository root (git-ignored).
HERE=${DEVBENCH_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/devbench}
mkdir -p "$HERE"
WORK=${1:-/work/anchors-v4}
JOBS=${JOBS:-2}
# Git directories of the two projects (the tool library's fetch puts them under /work/.mirror).
LG=${LLAMA_GIT_DIR:-/work/.mirror/ggerganov+llama.cpp/repo} IG=${IK_GIT_DIR:-/work/.mirror/ikawrakow+ik_llama.cpp/repo}
mkdir -p "$WORK" && cd "$WORK"

checkout() {  # GIT_DIR COMMIT DEST: the commit's tree less the blobs the snapshot lacks (as build-anchors.sh)
  [ -f "$3/CMakeLists.txt" ] && return
  local idx; idx=$(mktemp)
  GIT_INDEX_FILE=$idx git --git-dir="$1" read-tree "$2"
  git --git-dir="$1" ls-tree -r "$2" | awk '$2 == "blob" { print $3 " " $4 }' |
    while read -r sha path; do git --git-dir="$1" cat-file -e "$sha" 2>/dev/null || printf '%s\0' "$path"; done |
    GIT_INDEX_FILE=$idx xargs -0 -r git --git-dir="$1" update-index --force-remove --
  mkdir -p "$3"
  GIT_INDEX_FILE=$idx git --git-dir="$1" checkout-index -a --prefix="$3/"
  rm -f "$idx"
}
checkout "$LG" c392e5094 llama.cpp
checkout "$IG" 8337e4cd3 ik_llama.cpp

FLAGS="-march=x86-64-v4 -mavx512vnni -mavx512bf16 -mavx512vbmi"
COMMON=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF
  -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON
  -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DLLAMA_BUILD_TESTS=OFF
  "-DCMAKE_C_FLAGS=$FLAGS" "-DCMAKE_CXX_FLAGS=$FLAGS")
for src in llama.cpp ik_llama.cpp; do
  extra=(); [ $src = ik_llama.cpp ] && extra=(-DGGML_IQK_FA_ALL_QUANTS=OFF)
  echo "== $src $(date -u +%T)"
  cmake -S $src -B $src/build-v4 "${COMMON[@]}" "${extra[@]}" > $src.configure.log
  nice -n 10 cmake --build $src/build-v4 -j"$JOBS" --target llama-bench llama-quantize > $src.build.log
done

mkdir -p "$HERE/anchors/llama.cpp" "$HERE/anchors/ik" "$HERE/lib"
strip -o "$HERE/anchors/llama.cpp/llama-bench" llama.cpp/build-v4/bin/llama-bench
strip -o "$HERE/anchors/llama.cpp/llama-quantize" llama.cpp/build-v4/bin/llama-quantize
# gzipped (21 MB -> 7 MB) so that the bundle stays under 36 MiB; run.sh unpacks it into /tmp.
strip -o "$HERE/anchors/ik/llama-bench" ik_llama.cpp/build-v4/bin/llama-bench
cp -L "$(ldd llama.cpp/build-v4/bin/llama-bench | awk '$1 == "libgomp.so.1" { print $3 }')" "$HERE/lib/libgomp.so.1"
strip --strip-unneeded "$HERE/lib/libgomp.so.1"
# The AVX-512 VNNI int8 dot products are compiled in when vpdpbusd on zmm registers appears.
for b in "$HERE"/anchors/*/llama-bench; do
  echo "$b: vpdpbusd zmm $(objdump -d --no-show-raw-insn "$b" | grep -c 'vpdpbusd.*zmm')"
done
gzip -9 -f "$HERE/anchors/ik/llama-bench"
