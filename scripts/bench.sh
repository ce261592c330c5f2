#!/usr/bin/env bash
# Redraws the loopback benchmarks of docs/BENCHMARKS.md (release build, about 4 minutes on 2
# cores); with BYZFS_BENCH_SITES=1 also those across sites (below).
# Usage: bash scripts/bench.sh [OUT_DIR]   (default docs/bench)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/bench}
mkdir -p "$out"
# With the test-only feature `byzantine`: `bench attack` starts a replica with `--attack`.
# The fault-free code paths are the release build's (the feature only adds the attacks).
cargo build --release -p byzfs --features byzfs/byzantine
bin=${CARGO_TARGET_DIR:-target}/release/byzfs
run() { echo "+ byzfs $*"; "$bin" "$@"; }

# PBFT OSDI'99 Table 1: latency of null operations, ByzFS vs unreplicated (with and without MACs).
run bench micro --ops 5000 --runs 3 --json "$out/micro.json" | tee "$out/micro.txt"
# BFT library Figure 6: throughput vs clients, 0/0, batching on and off.
run bench throughput --op 0/0 --mode rw --batching on,off --clients 1,5,10,25,50,100 \
    --duration 2 --warmup 1 --json "$out/fig6-batching.json" --svg "$out/fig6-batching.svg" \
    | tee "$out/fig6-batching.txt"
# BFT library Figure 7b: 4/0 throughput, separate request transmission on and off.
run bench throughput --op 4/0 --mode rw --srt on,off --clients 1,10,50,100 \
    --systems byzfs,unreplicated-mac --duration 2 --warmup 1 \
    --json "$out/fig7-srt.json" --svg "$out/fig7-srt.svg" | tee "$out/fig7-srt.txt"
# BFT library §4: tentative execution on and off; the read-only optimisation on and off.
run bench throughput --op 0/0 --mode rw --tentative on,off --clients 1,10,50 --systems byzfs \
    --duration 2 --warmup 1 --json "$out/tentative.json" | tee "$out/tentative.txt"
run bench throughput --op 0/0 --mode ro --read-only on,off --clients 1,10,50 \
    --duration 2 --warmup 1 --json "$out/read-only.json" | tee "$out/read-only.txt"
# Issue #3 item 9: SIGKILL the primary under load (default 5 s view-change timeout, then 1 s).
run bench throughput --op 0/0 --mode rw --clients 10 --systems byzfs --duration 14 --warmup 1 \
    --kill-primary-after 4 --json "$out/kill-primary.json" | tee "$out/kill-primary.txt"
run bench throughput --op 0/0 --mode rw --clients 10 --systems byzfs --duration 8 --warmup 1 \
    --kill-primary-after 4 --view-change-timeout-ms 1000 \
    --json "$out/kill-primary-1s.json" | tee "$out/kill-primary-1s.txt"
# Issue #29: 0/0 throughput at 50 clients, fault-free and under each of Aardvark's attacks.
run bench attack --json "$out/attack.json" --svg "$out/attack.svg" | tee "$out/attack.txt"

# Issue #30, across sites (BENCHMARKS.md "Across sites"), opt-in: needs root and over 20
# minutes (Andrew at `wan` alone took 608 s + 533 s): BYZFS_BENCH_SITES=1 bash scripts/bench.sh.
# Andrew at `slow-5` and `slow-1` takes 20 to 40 minutes a target: run by hand (commands in
# BENCHMARKS.md "Andrew-Tcl across sites").
if [[ ${BYZFS_BENCH_SITES:-0} == 1 ]]; then
    run bench sites --sites lan,wan,slow-5,slow-1-apart --seconds 2 --json "$out/sites.json" \
        | tee "$out/sites.txt"
    run bench bandwidth --runs 3 --json "$out/bandwidth.json" --svg "$out/bandwidth.svg" \
        | tee "$out/bandwidth.txt"
    for p in lan wan; do
        run bench andrew --targets byzfs,norep --no-compile --sites "$p" \
            --json "$out/andrew-sites-$p.json" --svg "$out/andrew-sites-$p.svg" \
            | tee "$out/andrew-sites-$p.txt"
    done
fi
