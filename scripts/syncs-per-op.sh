#!/usr/bin/env bash
# Syncs and writes at one replica during a workload on a `byzfs up --mount` cluster (issue #27
# item 3; docs/BENCHMARKS.md "Syncs and messages per operation").
#
#   bash scripts/syncs-per-op.sh andrew|postmark [extra `byzfs up` flags, e.g. --no-dir-delegations]
#
# Counts fsync/fdatasync/write/send calls of replica 1 (a backup) with `strace -f -c`, which
# slows the run: the times it prints mean nothing, the counts do. Needs root (FUSE), strace,
# postmark (postmark only) and the Andrew tree (`byzfs bench andrew --fetch-source` once).
# BYZFS_BIN picks the binary (default target/debug/byzfs, built if absent).
set -euo pipefail
work=${1:?andrew or postmark}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BYZFS_BIN:-$root/target/debug/byzfs}
[ -x "$bin" ] || cargo build --quiet -p byzfs --manifest-path "$root/Cargo.toml"
command -v strace >/dev/null || { echo "needs strace (apt-get install strace)" >&2; exit 1; }
d=$(mktemp -d /tmp/byzfs-syncs.XXXX)
cleanup() { fusermount3 -u "$d/mnt" 2>/dev/null || true; sleep 1; pkill -f "$d/c/cluster.toml" 2>/dev/null || true; rm -rf "$d"; }
trap cleanup EXIT
timeout 900 "$bin" up --base-port 0 --dir "$d/c" --durability disk --mount "$d/mnt" "$@" >"$d/up.log" 2>&1 &
for _ in $(seq 1 300); do grep -q "Press Ctrl-C" "$d/up.log" 2>/dev/null && break; sleep 0.1; done
grep -q "Press Ctrl-C" "$d/up.log" || { cat "$d/up.log" >&2; exit 1; }
r=$(pgrep -f "replica --config $d/c/cluster.toml --id 1 " | head -1)
strace -f -c -e trace=fsync,fdatasync,sendto,sendmsg,write -p "$r" -o "$d/strace.txt" &
s=$!
sleep 0.5
case "$work" in
andrew)
    src=$(ls -d "${XDG_CACHE_HOME:-$HOME/.cache}"/byzfs/andrew/tree/*/ | head -1)
    (cd "$src" && find . -type d) | while read -r x; do mkdir -p "$d/mnt/a/$x"; done
    cp -a "$src/." "$d/mnt/a/"
    find "$d/mnt/a" -ls >/dev/null
    find "$d/mnt/a" -type f -exec cat {} + >/dev/null
    echo "andrew phases 1-4: $(find "$src" | wc -l) entries"
    ;;
postmark)
    mkdir "$d/mnt/pm"
    printf "set location %s\nset number 1000\nset size 512 16384\nset transactions 5000\nrun\nquit\n" "$d/mnt/pm" >"$d/pm.cfg"
    (cd "$d" && postmark pm.cfg | grep -E "Total|per second" | head -2)
    ;;
*) echo "unknown workload $work" >&2; exit 2 ;;
esac
kill -INT "$s"; wait "$s" 2>/dev/null || true
fusermount3 -u "$d/mnt"; sleep 2
echo "operations the mount sent: $(grep "operations sent" "$d/up.log" | grep -oE "total=[0-9]+" | tail -1)"
grep -E "fsync|fdatasync|sendto|sendmsg|write|total" "$d/strace.txt"
