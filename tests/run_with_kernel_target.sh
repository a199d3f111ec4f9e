#!/bin/sh
# Runs a command with KILN_KERNELS=TARGET, or skips it (exit 77) when this CPU
# cannot run TARGET; PROBE is a kiln tool whose --version makes the choice.
# Usage: run_with_kernel_target.sh TARGET PROBE COMMAND...
# KILN_TEST_LAUNCHER, when set, starts PROBE and COMMAND (the emulator of a
# cross-compiled build, e.g. "qemu-aarch64 -L /").
target=$1 probe=$2
shift 2
launcher=${KILN_TEST_LAUNCHER:-}
if ! err=$(KILN_KERNELS=$target $launcher "$probe" --version 2>&1 >/dev/null); then
    case $err in
        *"cannot run"*) echo "skipped: $err"; exit 77 ;;
        *) echo "$err" >&2; exit 1 ;;
    esac
fi
default=$(env -u KILN_KERNELS $launcher "$probe" --version | sed -n 's/.*; in use: \([^ ]*\) .*/\1/p')
if [ "$default" = "$target" ]; then
    echo "skipped: $target is this CPU's default target, which the rest of the suite runs"
    exit 77
fi
KILN_KERNELS=$target exec $launcher "$@"
