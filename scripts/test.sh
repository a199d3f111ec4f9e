#!/usr/bin/env bash
# Runs kiln's whole test suite: installs what is missing, builds, runs CTest.
#   bash scripts/test.sh              Release build in build/
#   bash scripts/test.sh --sanitize   the same tests under ASan+UBSan in build-asan/
#   bash scripts/test.sh --tsan       the multithreaded tests under TSan in build-tsan/
# Exits non-zero when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
if [ "${1:-}" = "--tsan" ]; then
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE=thread >/dev/null
  # kiln-thread-tests holds the test files with [threads] or [thread_pool] cases
  # (tests/CMakeLists.txt), so this build leaves out the tools and the rest.
  cmake --build build-tsan -j"$(nproc)" --target kiln-thread-tests
  # Tests tagged [threads] run work on the pool; TSan checks every access they make.
  TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/kiln-thread-tests "[thread_pool],[threads]"
  exit 0
elif [ "${1:-}" = "--sanitize" ]; then
  dir=build-asan
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE=address,undefined >/dev/null
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  export LSAN_OPTIONS=suppressions=$PWD/tests/sanitizers/lsan.supp
  # The "client" tests (the openai npm package, the chat page in Chromium) test
  # JavaScript against the server; the Release run has them. Under the
  # sanitizers the server's own code runs through server_http and [server].
  excluded="long|client"
else
  dir=build
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$dir" -j"$(nproc)"
# CTest must see every Catch2 test case on its own: a name that CMake cannot
# split cleanly (a ';' or an unbalanced '[') would silently merge or drop tests.
# (Catch2 v2's listing exits with the number of tests it listed, hence the || true.)
catch_count=$( ("$dir/tests/kiln-tests" --list-test-names-only || true) | grep -c .)
# (Script tests, labelled "script", are not Catch2 cases.)
ctest_count=$(ctest --test-dir "$dir" -N --label-exclude script | sed -n 's/^Total Tests: //p')
# A name starting with '-' reads as a flag when CTest passes it back: Catch2
# would then run every test under that one name.
if ("$dir/tests/kiln-tests" --list-test-names-only || true) | grep -q '^-'; then
  echo "a test name starts with '-': rename it" >&2
  exit 1
fi
if [ "$catch_count" != "$ctest_count" ]; then
  echo "CTest sees $ctest_count tests but kiln-tests has $catch_count: check test names for ';' or '['" >&2
  exit 1
fi
ctest --test-dir "$dir" --output-on-failure -j"$(nproc)" --label-exclude "${excluded:-long}"
