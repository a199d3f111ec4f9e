#!/usr/bin/env bash
# The whole default test suite once per kernel target this machine runs
# (README "Building by hand"): KILN_KERNELS=<target> for the tests and for the
# tools they start. Usage: scripts/test-kernel-targets.sh [BUILD_DIR] (default build).
set -euo pipefail
build=${1:-build}
kiln="$build/tools/kiln"
[[ -x $kiln ]] || { echo "test-kernel-targets: no $kiln: build first" >&2; exit 1; }
targets=$("$kiln" --version | sed -n 's/^kernel targets: \(.*\) (runnable on this CPU;.*/\1/p' | tr -d ',')
[[ -n $targets ]] || { echo "test-kernel-targets: $kiln --version lists no kernel targets" >&2; exit 1; }
status=0
for target in $targets; do
    start=$(date +%s)
    echo "== KILN_KERNELS=$target"
    if KILN_KERNELS=$target ctest --test-dir "$build" -j2 --label-exclude "long|kernel_targets" --output-on-failure \
        > "$build/kernel-target-$target.log" 2>&1; then
        echo "   passed: $(grep -E 'tests passed' "$build/kernel-target-$target.log") ($(( $(date +%s) - start )) s)"
    else
        echo "   FAILED ($(( $(date +%s) - start )) s); see $build/kernel-target-$target.log"
        grep -E "^\s+[0-9]+ - " "$build/kernel-target-$target.log" | head -20 || true
        status=1
    fi
done
exit $status
