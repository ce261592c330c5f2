#!/usr/bin/env bash
# Times fresh `byzfs kv` clients (one process per put) against a local kv cluster whose
# view-0 primary is down (by hand; ARCHITECTURE.md "Deviations from PROTOCOL.md" 19):
#   1. `byzfs up --service kv` (durability `memory`) with the first binary; one put;
#   2. SIGKILL replica 0 (the primary); one put through the view change to view 1;
#   3. five rounds of one put per binary given, alternating, each timed.
# With `--primary-up`, step 2 is skipped (the primary stays up).
#
#   bash scripts/fresh-client.sh [--primary-up] BIN [BIN...]
set -euo pipefail

kill_primary=1
if [ "${1:-}" = "--primary-up" ]; then
    kill_primary=0
    shift
fi
if [ $# -lt 1 ]; then
    echo "usage: $0 [--primary-up] BIN [BIN...]" >&2
    exit 2
fi
up=$(realpath "$1")
dir=${TMPDIR:-/tmp}/byzfs-fresh-client
rm -rf "$dir"
mkdir -p "$dir"
cfg=$dir/c/cluster.toml
kill_all() {
    pkill -9 -f -- "replica .*$dir/" || true
    pkill -9 -f -- "up --dir $dir/c" || true
}
trap kill_all EXIT
(setsid "$up" up --dir "$dir/c" --base-port 0 --service kv >"$dir/up.log" 2>&1 &)
for _ in $(seq 240); do
    grep -q "Ctrl-C" "$dir/up.log" 2>/dev/null && break
    sleep 0.25
done
"$up" kv --config "$cfg" put a 1 >/dev/null
if [ $kill_primary = 1 ]; then
    kill -9 "$(pgrep -f -- "--id 0 --key $dir/")"
    "$up" kv --config "$cfg" --timeout-ms 60000 put b 2 >/dev/null
fi
for round in 1 2 3 4 5; do
    for bin in "$@"; do
        t0=$(date +%s.%N)
        "$bin" kv --config "$cfg" --timeout-ms 60000 put "k$round" v >/dev/null
        t1=$(date +%s.%N)
        printf '%s round %d: %.3f s\n' "$(basename "$bin")" "$round" "$(echo "$t1 - $t0" | bc)"
    done
done
