#!/usr/bin/env bash
# A 20 MiB file written and read back through a mount of `byzfs up`, with four replicas up
# and then with one down (issue #47; BENCHMARKS.md "A replica down"):
#
#   bash scripts/bench-replica-down.sh [BYZFS_BINARY ...]
#
# Default binary: target/release/byzfs. With several binaries (say an older build and this
# one), each runs the same steps in turn, so their figures come from one run on one machine.
# For each binary: `up --mount` on a fresh cluster; write (dd, conv=fsync) and read back
# (page cache dropped) with four up; then replica 2 (a backup) SIGKILLed, the same; then
# replica 1 stopped (SIGSTOP), the same; then the primary (replica 0) SIGKILLed, the same
# twice (the first includes the view change).
# PostMark (`bench postmark --preset quick`'s configuration: 1,000 files of 512 B–16 KiB,
# 5,000 transactions) runs with four up and with the backup killed; its column is seconds.
# Root only (drop_caches). Every step has a time limit; everything started is stopped.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bins=("$@")
[ ${#bins[@]} -eq 0 ] && bins=("$root/target/release/byzfs")
[ "$(id -u)" = 0 ] || { echo "needs root (drops the page cache)" >&2; exit 1; }

work="$(mktemp -d)"
up_pid=""
cleanup() {
    if [ -n "$up_pid" ]; then
        pkill -CONT -f "$work" 2>/dev/null || true
        kill -TERM "$up_pid" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$up_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$up_pid" 2>/dev/null || true
        pkill -KILL -f "$work/" 2>/dev/null || true
        fusermount3 -uz "$work/mnt" 2>/dev/null || true
        up_pid=""
    fi
}
trap 'cleanup; rm -rf "$work"' EXIT

now() { date +%s.%N; }

# Seconds to write 20 MiB, then seconds to read it back from the replicas.
write_read() {
    local f="$work/mnt/f-$1"
    local t0 t1 t2
    t0=$(now)
    timeout 120 dd if=/dev/zero of="$f" bs=1M count=20 conv=fsync status=none
    t1=$(now)
    sync
    echo 3 >/proc/sys/vm/drop_caches
    t2=$(now)
    timeout 120 dd if="$f" of=/dev/null bs=1M status=none
    awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$(now)" 'BEGIN { printf "%.3f %.3f\n", b - a, d - c }'
}

# Seconds PostMark (the quick preset) takes in a fresh directory of the mount.
postmark_secs() {
    local d="$work/mnt/pm-$1" t0
    mkdir -p "$d"
    t0=$(now)
    printf 'set location %s\nset number 1000\nset transactions 5000\nset size 512 16384\nset seed 42\nrun\nquit\n' "$d" \
        | timeout 300 postmark >/dev/null
    awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.3f\n", b - a }'
}

replica_pid() {
    pgrep -f -- "replica --config $work/c/cluster.toml --id $1 " | head -1
}

printf '%-40s %-18s %8s %8s %10s\n' binary case "write s" "read s" "postmark s"
for bin in "${bins[@]}"; do
    cleanup
    rm -rf "$work/c" "$work/mnt"
    "$bin" up --replicas 4 --base-port 0 --dir "$work/c" --mount "$work/mnt" \
        --service fs >"$work/up.log" 2>&1 &
    up_pid=$!
    for _ in $(seq 600); do
        grep -q "Press Ctrl-C" "$work/up.log" && break
        kill -0 "$up_pid" 2>/dev/null || { cat "$work/up.log" >&2; exit 1; }
        sleep 0.1
    done
    run() {
        local r p="-"
        r=$(write_read "$1")
        [ "${2:-}" = postmark ] && p=$(postmark_secs "$1")
        printf '%-40s %-18s %8s %8s %10s\n' "$bin" "$1" ${r} "$p"
    }
    run four-up postmark
    run four-up-again
    r2="$(replica_pid 2)"
    r2_args="$(ps -o args= -p "$r2")"
    kill -KILL "$r2"
    run backup-killed postmark
    run backup-killed-again
    # A second replica down would be one too many: replica 2 comes back first (restarted
    # here as `up` ran it, unless `up` already did), and catches up before replica 1 stops.
    if [ -z "$(replica_pid 2)" ]; then
        # shellcheck disable=SC2086 # the arguments as `ps` printed them (no spaces in paths)
        setsid $r2_args >>"$work/replica-2-again.log" 2>&1 &
    fi
    sleep 5
    kill -STOP "$(replica_pid 1)"
    run backup-stopped
    kill -CONT "$(replica_pid 1)"
    sleep 5
    kill -KILL "$(replica_pid 0)"
    run primary-killed
    run primary-killed-again
done
