#!/usr/bin/env bash
# Cross-builds kiln for aarch64 Linux and runs its test suite under user-mode
# qemu (no ARM machine, no binfmt_misc needed):
#   bash scripts/test-aarch64.sh            install what is missing, build in
#                                           build-aarch64/, run the suite, compare
#                                           greedy text with the x86 build's
# Environment:
#   JOBS=N             parallel compiles and tests (default: nproc)
#   QEMU_CPU=name      the emulated CPU (qemu's default, "max", has every
#                      feature, sdot and smmla included; cortex-a76 has sdot
#                      without smmla; cortex-a53 is a plain ARMv8.0 core)
#   KILN_SHARED_DIR    the folder with models/ (default: ../shared)
#   KILN_X86_BUILD     the host build whose kiln the greedy text is compared with
#                      (default: build/; built there, kiln alone, when missing)
#   KILN_AARCH64_TESTS a ctest -R regex to run part of the suite
#   KILN_AARCH64_TAGS  Catch2 tags (e.g. "[kernels]"): instead of ctest, run
#                      kiln-tests with them once per kernel target the emulated
#                      CPU runs (what CI does: the whole suite takes too long
#                      under qemu)
# Exits non-zero when the build or any test fails, or the texts differ.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
triple=aarch64-linux-gnu
shared=${KILN_SHARED_DIR:-$(cd .. && pwd)/shared}
x86_build=${KILN_X86_BUILD:-build}

# ---- what the build needs: the host's tools and header-only libraries, the
# cross compiler and qemu, and arm64 builds of the compiled libraries (Debian
# multiarch puts them beside the host's, in /usr/lib/aarch64-linux-gnu).
bash scripts/install-deps.sh g++-$triple qemu-user
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
target_packages=(libfmt-dev:arm64 libpcre2-dev:arm64 libcairo2-dev:arm64 libcpp-httplib-dev:arm64 libxsimd-dev:arm64)
missing=()
for p in "${target_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -ne 0 ]; then
  echo "installing: ${missing[*]}" >&2
  dpkg --print-foreign-architectures | grep -qx arm64 || $sudo dpkg --add-architecture arm64
  $sudo apt-get update -o DPkg::Lock::Timeout=600 -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${missing[@]}" >/dev/null
fi

# ---- the cross build
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
start=$SECONDS
cmake -S . -B build-aarch64 -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/$triple.cmake \
  -DKILN_SHARED_DIR="$shared" "${launcher[@]}" >/dev/null
cmake --build build-aarch64 -j"$jobs"
echo "cross build: $((SECONDS - start)) s" >&2

# ---- the suite under qemu. Left out, besides the long tests:
#  * The "server" script tests (server_http, server_openai_client,
#    server_chat_page): Python and Node start kiln-server themselves, which
#    needs binfmt_misc for an aarch64 binary; kiln-server's own code is tested
#    by the [server] cases. (The kernels_under_<target> scripts do run: they
#    start kiln through KILN_TEST_LAUNCHER.)
#  * C API cases that load libkiln.so into the host's Python (ctypes cannot load
#    an aarch64 library into an x86 process) or build a consumer with the host
#    CMake against the install: "C API: the Python ...", "cmake --install gives ...".
#  * The pseudo-terminal test of kiln -cnv (tests/cli/kiln_chat_terminal.py):
#    Python execs the binary itself.
excluded_names='C API: the Python|cmake --install gives|on a terminal, Ctrl-C'
start=$SECONDS
ctest_args=(--test-dir build-aarch64 --output-on-failure -j"$jobs" --label-exclude 'long|server' -E "$excluded_names")
[ -n "${KILN_AARCH64_TESTS:-}" ] && ctest_args+=(-R "$KILN_AARCH64_TESTS")
status=0
if [ -n "${KILN_AARCH64_TAGS:-}" ]; then
  targets=$(qemu-aarch64 -L / build-aarch64/tools/kiln --version |
            sed -n 's/^kernel targets: \(.*\) (runnable on this CPU;.*/\1/p' | tr -d ',')
  for target in $targets; do
    echo "== KILN_KERNELS=$target kiln-tests \"$KILN_AARCH64_TAGS\"" >&2
    KILN_KERNELS=$target qemu-aarch64 -L / build-aarch64/tests/kiln-tests "$KILN_AARCH64_TAGS" | tail -2 || status=1
  done
  echo "tests $KILN_AARCH64_TAGS under qemu (${QEMU_CPU:-default CPU}), targets $targets: $((SECONDS - start)) s" >&2
else
  ctest "${ctest_args[@]}" || status=$?
  echo "suite under qemu (${QEMU_CPU:-default CPU}): $((SECONDS - start)) s" >&2
fi

# ---- greedy text on stories260K: the aarch64 kiln (under qemu) against the x86 build's.
model="$shared/models/stories260K.gguf"
if [ ! -x "$x86_build/tools/kiln" ]; then
  cmake -S . -B "$x86_build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$x86_build" -j"$jobs" --target kiln
fi
args=(-m "$model" -p "Once upon a time" -n 120 --temp 0 -t 2)
x86_text=$("$x86_build/tools/kiln" "${args[@]}" 2>/dev/null)
# -L /: the multiarch loader and libc (see cmake/toolchains/aarch64-linux-gnu.cmake).
arm_text=$(qemu-aarch64 -L / build-aarch64/tools/kiln "${args[@]}" 2>/dev/null)
if [ "$x86_text" != "$arm_text" ]; then
  echo "greedy text differs between x86 and aarch64:" >&2
  diff <(echo "$x86_text") <(echo "$arm_text") >&2 || true
  status=1
else
  echo "greedy text on stories260K: aarch64 equals x86 (${#arm_text} characters)" >&2
fi
exit $status
