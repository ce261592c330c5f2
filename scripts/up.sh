#!/usr/bin/env bash
# The README's main command: a local 4-replica ByzFS cluster, mounted on MOUNTPOINT
# (default /tmp/byzfs). Ctrl-C unmounts, then stops the replicas.
#
#   bash scripts/up.sh [MOUNTPOINT] [more `byzfs up` flags]
#
# FUSE needs /dev/fuse and fusermount3 (Debian/Ubuntu package fuse3). If fusermount3 is
# missing this script installs fuse3 with apt-get (as root, or through sudo), then runs
# `cargo run --release -p byzfs -- up --mount MOUNTPOINT`. The cluster (keys, logs, data)
# lives in ./byzfs-cluster of the repository.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mnt="${1:-/tmp/byzfs}"
[ $# -gt 0 ] && shift

if ! command -v fusermount3 >/dev/null 2>&1; then
    echo "fusermount3 not found: installing fuse3 (apt-get install fuse3)" >&2
    if [ "$(id -u)" = 0 ]; then
        sudo=()
    elif command -v sudo >/dev/null 2>&1; then
        sudo=(sudo)
    else
        echo "error: not root and no sudo: install fuse3 yourself (apt-get install fuse3)" >&2
        exit 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "error: no apt-get: install your distribution's fuse3 package" >&2
        exit 1
    fi
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq fuse3
fi

# `byzfs up --mount` itself says what is missing if /dev/fuse is not there.
exec cargo run --release -p byzfs -- up --mount "$mnt" "$@"
