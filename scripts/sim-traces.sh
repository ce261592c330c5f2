#!/usr/bin/env bash
# Fingerprints the simulator's traces, for refactors that must not change behaviour (issue
# #44 "Done when"): run it before and after on the same seeds and compare with `diff -r`.
# For every scenario family it runs seeds 0..SEEDS (half-open; default 53) with --trace and
# writes OUTDIR/FAMILY.sha256 (hash of stdout, then the exit code) and the trace itself,
# gzip'd, as OUTDIR/traces/FAMILY.trace.gz (gzip -n, so equal traces give equal files).
# Only stdout is kept: the "wall time" line goes to stderr and is the one line that varies.
# On a shared machine, CARGO_LOCK=FILE runs the build under `flock FILE`.
#
#   bash scripts/sim-traces.sh OUTDIR [SEEDS]
#   bash scripts/sim-traces.sh /tmp/traces-before && ...refactor... &&
#   bash scripts/sim-traces.sh /tmp/traces-after && diff -r /tmp/traces-before /tmp/traces-after
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
    echo "usage: $0 OUTDIR [SEEDS]" >&2
    exit 2
fi
out="$1"
seeds="${2:-53}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

lock=()
[[ -n "${CARGO_LOCK:-}" ]] && lock=(flock "$CARGO_LOCK")
"${lock[@]}" cargo build --release --quiet -p byzfs-sim
sim="$root/target/release/byzfs-sim"

# The family names, from the error the simulator prints for an unknown one (so a new family
# is covered without editing this script).
families="$({ "$sim" --scenario nonsense --seeds 0..1 2>&1 >/dev/null || true; } |
    sed -n 's/.*one of: //p' | tr -d ',')"
if [[ -z "$families" ]]; then
    echo "sim-traces: could not read the family names from byzfs-sim" >&2
    exit 2
fi

mkdir -p "$out/traces"
for family in $families; do
    trace="$(mktemp)"
    code=0
    "$sim" --seeds "0..$seeds" --scenario "$family" --trace --threads 2 >"$trace" 2>/dev/null || code=$?
    {
        sha256sum <"$trace" | cut -d' ' -f1
        echo "exit $code"
    } >"$out/$family.sha256"
    gzip -n -c <"$trace" >"$out/traces/$family.trace.gz"
    echo "$family: $(tail -n 1 "$trace") (exit $code)"
    rm -f "$trace"
done
