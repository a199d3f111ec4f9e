#!/bin/sh
# Links one kernel target's objects into one object whose only global symbol
# is the target's table function (see targets.cmake), and checks that the
# object runs nothing at start-up.
# Usage: target_object.sh CXX OBJCOPY READELF NM ENTRY CHECK_INIT(yes|no) OUT OBJECT...
set -eu
cxx=$1 objcopy=$2 readelf=$3 nm=$4 entry=$5 check_init=$6 out=$7
shift 7
partial="$out.partial.o"
# -r: a relocatable link. Section groups (the COMDAT copies of inline functions
# and templates) are dissolved into plain sections, so that the final link
# cannot swap them for another object's copies of the same name.
"$cxx" -r -nostdlib -Wl,--force-group-allocation -o "$partial" "$@"
"$objcopy" --keep-global-symbol="$entry" "$partial" "$out.tmp.o"
rm -f "$partial"
others=$("$nm" -g --defined-only "$out.tmp.o" | awk -v e="$entry" '$3 != e' | head -3)
if [ -n "$others" ]; then
    echo "error: kernel target object $out defines global symbols besides $entry:" >&2
    echo "$others" >&2
    rm -f "$out.tmp.o"
    exit 1
fi
if [ "$check_init" = yes ] && "$readelf" -SW "$out.tmp.o" | grep -Eq ' \.(init_array|ctors|preinit_array)'; then
    echo "error: kernel target object $out has start-up code (a dynamic initializer): it would run on every CPU" >&2
    rm -f "$out.tmp.o"
    exit 1
fi
mv "$out.tmp.o" "$out"
