#!/usr/bin/env bash
# Installs the Debian packages kiln needs that are not installed yet (nothing
# else is ever downloaded). Extra package names may be given as arguments.
set -euo pipefail
packages=(g++ make cmake libxsimd-dev xtl-dev libfmt-dev catch2 nlohmann-json3-dev libcpp-httplib-dev libpcre2-dev libcairo2-dev python3-pil python3-numpy pkg-config libopenmpi-dev openmpi-bin "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update -o DPkg::Lock::Timeout=600 -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${missing[@]}" >/dev/null
