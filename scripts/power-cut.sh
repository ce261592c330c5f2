#!/usr/bin/env bash
# Times a local cluster's recovery from a power cut during a view change (by hand; the fault
# test `disk_mode_kill_all_after_a_view_change_serves_again` checks the same without timing):
#   1. `byzfs up --service kv --durability disk` in a fresh directory, one put;
#   2. SIGKILL replica 0 (the primary); the next put waits for the view change to view 1;
#   3. start replica 0 again (same command line) and let it vote in view 1 (a few puts);
#   4. SIGKILL every process, `byzfs up` again on the same directory; time the next put;
#   5. a last put once the cluster has settled, and `byzfs status`.
#
#   bash scripts/power-cut.sh [BIN]      (default: target/release/byzfs, built if missing)
#
# Prints one line per put with its time. Leaves its files in $TMPDIR/byzfs-power-cut.
set -euo pipefail

bin=${1:-target/release/byzfs}
if [ ! -x "$bin" ]; then
    cargo build --release -p byzfs
fi
bin=$(realpath "$bin")
dir=${TMPDIR:-/tmp}/byzfs-power-cut
rm -rf "$dir"
mkdir -p "$dir"
cfg=$dir/c/cluster.toml

kill_all() {
    pkill -9 -f -- "$bin replica .*$dir/" || true
    pkill -9 -f -- "$bin up --dir $dir/c" || true
    sleep 1
}
trap kill_all EXIT

start() {
    (setsid "$bin" up --dir "$dir/c" --durability disk --base-port 0 --service kv \
        >"$dir/up$1.log" 2>&1 &)
    for _ in $(seq 240); do
        grep -q "Ctrl-C" "$dir/up$1.log" 2>/dev/null && return 0
        sleep 0.25
    done
    echo "byzfs up did not start; its log:" >&2
    cat "$dir/up$1.log" >&2
    exit 1
}

timed_put() {
    local t0 t1
    t0=$(date +%s.%N)
    "$bin" kv --config "$cfg" --timeout-ms 60000 put "$1" "$2" >/dev/null
    t1=$(date +%s.%N)
    printf '%s: put %s ok after %.2f s\n' "$3" "$1" "$(echo "$t1 - $t0" | bc)"
}

start 1
timed_put a 1 "fresh cluster"
r0=$(pgrep -f -- "--id 0 --key $dir/")
r0_args=$(ps -o args= -p "$r0")
kill -9 "$r0"
sleep 0.5
timed_put b 2 "primary killed"
# A replica exits when its stdin closes (its parent, `up`, is gone): give it a FIFO it holds
# open itself.
mkfifo "$dir/replica0.stdin"
(setsid $r0_args <>"$dir/replica0.stdin" >"$dir/replica0.log" 2>&1 &)
sleep 2
for i in 1 2 3 4 5; do timed_put "e$i" "$i" "replica 0 back"; done
"$bin" status --config "$cfg" | tail -8
kill_all
start 2
timed_put c 3 "after the power cut"
sleep 3
timed_put d 4 "settled"
"$bin" status --config "$cfg" | tail -2
