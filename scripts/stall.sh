#!/usr/bin/env bash
# How long a replica's event loop stalls under a large write (docs/BENCHMARKS.md "A stable
# checkpoint's sync off the event loop"). Usage: scripts/stall.sh BYZFS_BINARY [MIB]
#
# Starts a four-replica cluster mounted at a fresh directory (`byzfs up --mount`), writes
# MIB (default 1024) MiB with `dd … conv=fsync` while a probe writes and fsyncs 4 KiB
# through the same mount every 20 ms, then prints the dd's time, the probe's longest
# operation, and per replica the event-loop steps of 50 ms or more ("long step reported as
# busy time", logged at debug level): how many, their sum and the longest. Needs FUSE,
# python3 and bc; stops the cluster and removes its directories at the end.
set -euo pipefail
bin=$(realpath "$1")
mib=${2:-1024}
work=$(mktemp -d /var/tmp/byzfs-stall.XXXXXX)
mnt="$work/mnt"
mkdir -p "$mnt"
RUST_LOG=byzfs_net=debug,info "$bin" up --dir "$work/up" --mount "$mnt" >"$work/up.log" 2>&1 &
up=$!
cleanup() {
    kill -INT "$up" 2>/dev/null || true
    wait "$up" 2>/dev/null || true
    fusermount3 -u "$mnt" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 1 120); do
    mountpoint -q "$mnt" && break
    sleep 0.5
done
mountpoint -q "$mnt" || { echo "FAIL: the cluster did not mount (see $work/up.log)" >&2; exit 1; }
sleep 2
python3 - "$mnt" >"$work/probe.txt" <<'PY' &
import os, sys, time
mnt = sys.argv[1]
worst, n, end = 0.0, 0, time.time() + 600
while time.time() < end and not os.path.exists(os.path.join(mnt, "done")):
    t = time.time()
    with open(os.path.join(mnt, "probe"), "w") as f:
        f.write("x" * 4096)
        f.flush()
        os.fsync(f.fileno())
    worst, n = max(worst, time.time() - t), n + 1
    time.sleep(0.02)
print(f"probe ops {n}, longest {worst * 1000:.0f} ms")
PY
probe=$!
start=$(date +%s.%N)
dd if=/dev/urandom of="$mnt/big" bs=1M count="$mib" conv=fsync 2>/dev/null
end=$(date +%s.%N)
touch "$mnt/done"
wait "$probe"
echo "dd $mib MiB $(echo "$end - $start" | bc) s; $(cat "$work/probe.txt")"
for r in 0 1 2 3; do
    log="$work/up/logs/replica-$r.log"
    steps=$(grep -o 'long step reported as busy time.*busy_ms=[0-9]*' "$log" | grep -o '[0-9]*$' || true)
    count=$(printf '%s\n' "$steps" | grep -c . || true)
    sum=$(printf '%s\n' "$steps" | grep . | paste -sd+ | bc 2>/dev/null || echo 0)
    max=$(printf '%s\n' "$steps" | grep . | sort -n | tail -1 || true)
    echo "  replica $r: $count long steps, sum ${sum:-0} ms, longest ${max:-0} ms"
done
