#!/usr/bin/env bash
# Installs the Debian packages ByzFS's commands and tests need, only those missing:
#   gcc, libc6-dev   the linker rustc calls
#   git              tests run git on a mount
#   fuse3            FUSE mounts (fusermount3); /dev/fuse must exist too
#   bindfs, postmark the file-system benchmarks' passthrough target and PostMark
#   iproute2         ip and tc: the sites harness's namespaces, links and shaping (#30)
#   golang-go        builds go-fuse's POSIX conformance suite (tests/posix.rs), unless a Go
#                    toolchain is already there (/usr/local/go counts)
#
#   bash scripts/deps.sh [all|mount]    (default: all; `mount` = what `byzfs up --mount` needs)
#
# As root it runs apt-get directly, otherwise through sudo. Without apt-get, or without root
# and sudo, it names the packages to install and exits non-zero.
set -euo pipefail

want=()
need() { command -v "$1" >/dev/null 2>&1 || want+=("${@:2}"); }
need fusermount3 fuse3
if [ "${1:-all}" = all ]; then
    need cc gcc libc6-dev
    need git git
    need bindfs bindfs
    need postmark postmark
    need ip iproute2
    need tc iproute2
    [ -x /usr/local/go/bin/go ] || need go golang-go
fi
[ "${#want[@]}" -eq 0 ] && exit 0

echo "installing missing packages: ${want[*]}" >&2
if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: no apt-get here: install ${want[*]} with your package manager" >&2
    exit 1
fi
if [ "$(id -u)" = 0 ]; then
    sudo=()
elif command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
else
    echo "error: not root and no sudo: install ${want[*]} (apt-get install ${want[*]})" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${want[@]}"
