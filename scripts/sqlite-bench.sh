#!/usr/bin/env bash
# SQLite through mounts (by hand; docs/bench/HISTORY.md "locks between mounts, and what they cost SQLite" and "lock delegations and SQLite"): local disk,
# then ByzFS (`byzfs up --mount` plus a second `byzfs mount`) and NO-REP (`byzfs
# unreplicated` with two `byzfs mount --unreplicated`), all at durability `memory`.
#
#   bash scripts/sqlite-bench.sh [BIN]     (default: target/release/byzfs, built if missing)
#
# Each line: one writer's tx/s, then two writers' (one per mount, one database), with the
# row count and SQLite's integrity check. Leaves its files in $TMPDIR/byzfs-sqlite-bench.
set -euo pipefail

bin=${1:-target/release/byzfs}
if [ ! -x "$bin" ]; then
    cargo build --release -p byzfs
fi
bin=$(realpath "$bin")
here=$(dirname "$(realpath "$0")")
w=${TMPDIR:-/tmp}/byzfs-sqlite-bench
rm -rf "$w"
mkdir -p "$w/local" "$w/m1" "$w/m2"

cleanup() {
    fusermount3 -u "$w/m2" 2>/dev/null || true
    fusermount3 -u "$w/m1" 2>/dev/null || true
    pkill -INT -f -- "$bin up --dir $w/c" || true
    pkill -f -- "$bin unreplicated --config $w/c" || true
}
trap cleanup EXIT

wait_for() {
    for _ in $(seq 120); do
        "$@" && return 0
        sleep 0.5
    done
    echo "timed out waiting for: $*" >&2
    exit 1
}

echo "local: $(python3 "$here/sqlite_bench.py" "$w/local")"

(setsid "$bin" up --dir "$w/c" --mount "$w/m1" --durability memory --base-port 0 \
    >"$w/up.log" 2>&1 &)
wait_for grep -q "Ctrl-C" "$w/up.log"
(setsid "$bin" mount --config "$w/c/cluster.toml" "$w/m2" >"$w/m2.log" 2>&1 &)
wait_for mountpoint -q "$w/m2"
echo "byzfs: $(timeout 600 python3 "$here/sqlite_bench.py" "$w/m1" "$w/m2" || echo "failed or timed out")"
fusermount3 -u "$w/m2"
pkill -INT -f -- "$bin up --dir $w/c"
for _ in $(seq 60); do mountpoint -q "$w/m1" || break; sleep 0.5; done
sleep 1

(setsid "$bin" unreplicated --config "$w/c/cluster.toml" --service fs --durability memory \
    >"$w/nr.log" 2>&1 &)
sleep 2
(setsid "$bin" mount --config "$w/c/cluster.toml" --unreplicated "$w/m1" >"$w/n1.log" 2>&1 &)
(setsid "$bin" mount --config "$w/c/cluster.toml" --unreplicated "$w/m2" >"$w/n2.log" 2>&1 &)
wait_for mountpoint -q "$w/m1"
wait_for mountpoint -q "$w/m2"
echo "norep: $(timeout 600 python3 "$here/sqlite_bench.py" "$w/m1" "$w/m2" || echo "failed or timed out")"
