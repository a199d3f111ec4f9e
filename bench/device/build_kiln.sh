#!/bin/bash
# Builds kiln for the device machine (an AVX-512 Xeon lent for minutes) from this repository's
# current commit: the portable build (every kernel target, chosen at start-up) and kiln-bench
# built for that CPU alone (-DKILN_NATIVE=ON -DKILN_NATIVE_ARCH=$NATIVE_ARCH, default
# sapphirerapids: the -march=native build issue 18 compares against). Puts the stripped programs
# in devbench/kiln/, the shared libraries they need beyond glibc/libstdc++/libgcc in devbench/lib/,
# and the Llama vocabulary the model generator copies in devbench/vocab/.
#   usage: bench/device/build_kiln.sh     (env: JOBS=2, FULL_TESTS=1 for the whole kiln-tests)
# kiln-tests here is, by default, the kernel part of the suite only (the test files below,
# linked against the same objects the full suite uses). The source is a scratch clone at
# /tmp/kiln-devbench-src: kiln-tests finds its fixtures under the source path compiled into
# it, and the run scripts link that path to the repository root on the device machine.
set -euo pipefail
# The bundle for the device machine: devbench/ at the repository root (git-ignored).
HERE=${DEVBENCH_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/devbench}
mkdir -p "$HERE"
REPO=${KILN_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
SRC=${KILN_DEVBENCH_SRC:-/tmp/kiln-devbench-src}
JOBS=${JOBS:-2}
FLAGS=""   # the portable build: every kernel target, chosen at start-up
NATIVE_ARCH=${NATIVE_ARCH:-sapphirerapids}   # the -march=native equivalent for the benchmark CPU
COMMIT=$(git -C "$REPO" rev-parse HEAD)
KERNEL_TESTS="test_kernels_attention test_attention_chunks test_kernels_dropout test_kernels_gradients test_kernels_kquants
  test_kernels_legacy test_kernels_matmul test_kernels_vector test_quant test_quant_fixture test_half
  test_interleaved_model support/quantized_llama support/sample_gguf support/sample_gguf_build"

if [ ! -d "$SRC/.git" ]; then git clone -q --no-checkout "$REPO" "$SRC"; fi
git -C "$SRC" fetch -q "$REPO" "$COMMIT"
git -C "$SRC" checkout -q --detach "$COMMIT"
echo "kiln $(git -C "$SRC" log -1 --format='%h %s' | cut -c1-70)"

export CCACHE_BASEDIR=/tmp CCACHE_DIR=${CCACHE_DIR:-/work/.ccache}
B=$SRC/build-port
# No MPI: the device machine has no Open MPI runtime, and the tools would need its libraries.
cmake -S "$SRC" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_NATIVE=OFF -DKILN_MPI=OFF \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DKILN_SHARED_DIR=/tmp/kiln-devbench-shared >/dev/null
nice -n 10 cmake --build "$B" -j"$JOBS" --target kiln-bench kiln-kernel-bench kiln-attention-bench kiln
# kiln-bench built as -march=native would build it on the benchmark machine (issue 18's comparison).
BN=$SRC/build-native
cmake -S "$SRC" -B "$BN" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_NATIVE=ON -DKILN_NATIVE_ARCH="$NATIVE_ARCH" \
  -DKILN_TESTS=OFF -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DKILN_SHARED_DIR=/tmp/kiln-devbench-shared >/dev/null
nice -n 10 cmake --build "$BN" -j"$JOBS" --target kiln-bench
if [ "${FULL_TESTS:-0}" = 1 ]; then
  nice -n 10 cmake --build "$B" -j"$JOBS" --target kiln-tests
else
  # The compile commands the full suite would use, run directly: ninja's object targets would
  # first build everything kiln-tests depends on (server, converter, C API, all tools).
  objs=""
  for t in main $KERNEL_TESTS; do objs+=" tests/CMakeFiles/kiln-tests.dir/$t.cpp.o"; done
  python3 - "$B/compile_commands.json" $objs <<'PY' | (cd "$B" && nice -n 10 xargs -d '\n' -P "$JOBS" -I{} sh -c '{}')
import json, sys
wanted = set(sys.argv[2:])
for entry in json.load(open(sys.argv[1])):
    out = entry["command"].split(" -o ")[1].split()[0]
    if out in wanted:
        print("cd %s && %s" % (entry["directory"], entry["command"]))
        wanted.discard(out)
if wanted:
    sys.exit("build_kiln.sh: no compile command for " + " ".join(sorted(wanted)))
PY
  (cd "$B" && c++ $FLAGS -O3 $objs -o tests/kiln-tests libkiln.a -lfmt -lpcre2-32)
fi

rm -rf "$HERE/kiln" && mkdir -p "$HERE/kiln" "$HERE/lib"
for exe in bench/kiln-bench bench/kiln-kernel-bench bench/kiln-attention-bench tools/kiln tests/kiln-tests; do
  strip -o "$HERE/kiln/$(basename $exe)" "$B/$exe"
done
strip -o "$HERE/kiln/kiln-bench-native" "$BN/bench/kiln-bench"
# Libraries outside the C/C++ runtime that the other machine's image may lack.
for exe in "$HERE"/kiln/*; do ldd "$exe"; done | awk '$3 ~ /^\// { print $3 }' | sort -u |
  grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so' |
  while read -r lib; do cp -L "$lib" "$HERE/lib/"; strip --strip-unneeded "$HERE/lib/$(basename "$lib")"; done
if [ "${FULL_TESTS:-0}" = 1 ]; then
  # The whole suite starts kiln's programs by the build paths compiled into kiln-tests
  # (/tmp/kiln-devbench-src/build-port/...): every program and library of the build, stripped,
  # travels as one archive (the device tool carries 64 MiB in all) that run_suite.sh unpacks at the
  # repository root there; ../shared's models and data go along as devbench/shared.
  stage=$(mktemp -d)
  (cd "$B" && find . -path ./CMakeFiles -prune -o -path '*/CMakeFiles' -prune -o -type f \( -perm -u+x -o -name 'libkiln.so*' \) -print) |
    while read -r f; do mkdir -p "$stage/build-port/$(dirname "$f")"; strip -o "$stage/build-port/$f" "$B/$f" 2>/dev/null || cp "$B/$f" "$stage/build-port/$f"; done
  (cd "$B" && find . -name 'libkiln.so*' -type l) | while read -r f; do cp -P "$B/$f" "$stage/build-port/$f"; done
  # Libraries outside the C/C++ runtime that the suite's programs need (kiln-viz, kiln-train...).
  find "$stage/build-port" -type f -perm -u+x | while read -r exe; do ldd "$exe" 2>/dev/null; done |
    awk '$3 ~ /^\// { print $3 }' | sort -u | grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so' |
    while read -r lib; do cp -L "$lib" "$HERE/lib/"; strip --strip-unneeded "$HERE/lib/$(basename "$lib")"; done
  tar -cf - -C "$stage" build-port | xz -T"$JOBS" -9 > "$HERE/build-port.tar.xz" && rm -rf "$stage"  # 30 MB gzipped, 6.5 xz
  rm -rf "$HERE/shared" && mkdir -p "$HERE/shared" && cp -r "$REPO/../shared/models" "$REPO/../shared/data" "$HERE/shared/"
fi
echo "$COMMIT" > "$HERE/kiln/COMMIT"
# The model generator copies the 32000-token Llama vocabulary (../shared is not on the device machine).
mkdir -p "$HERE/vocab" && cp "$REPO/../shared/models/vocab/ggml-vocab-llama-spm.gguf" "$HERE/vocab/"
# The AVX-512 VNNI int8 kernels are compiled in when vpdpbusd on zmm registers appears.
for exe in kiln-bench kiln-bench-native; do
  echo "vpdpbusd (zmm) in $exe: $(objdump -d --no-show-raw-insn "$HERE/kiln/$exe" | grep -c 'vpdpbusd.*zmm')"
done
ls -la "$HERE/kiln" "$HERE/lib"
