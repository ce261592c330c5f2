#!/usr/bin/env bash
# The README's main command: a local 4-replica ByzFS cluster, mounted on MOUNTPOINT
# (default /tmp/byzfs). Ctrl-C unmounts, then stops the replicas.
#
#   bash scripts/up.sh [MOUNTPOINT] [more `byzfs up` flags]
#
# FUSE needs /dev/fuse and fusermount3 (Debian/Ubuntu package fuse3). If fusermount3 is
# missing this script installs fuse3 with apt-get (as root, or through sudo), then runs
# `cargo run --release -p byzfs -- up --mount MOUNTPOINT`. The cluster (keys, logs, data)
# lives in ./byzfs-cluster of the repository. The command line is then at
# target/release/byzfs, which `up` prints in its "try:" lines (README "Quick start").
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mnt="${1:-/tmp/byzfs}"
[ $# -gt 0 ] && shift

bash scripts/deps.sh mount

# `byzfs up --mount` itself says what is missing if /dev/fuse is not there.
exec cargo run --release -p byzfs -- up --mount "$mnt" "$@"
