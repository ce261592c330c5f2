#!/usr/bin/env bash
# Runs every cargo-fuzz target of byzfs-bft (wire decoders) and byzfs-fs (requests and
# replies of the file service) for N seconds each (default 10; or $FUZZ_SECONDS).
#
#   bash scripts/fuzz-smoke.sh [seconds]
#
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). It never installs them:
# a missing tool is an error here, and .ci/run decides whether to call this at all.
# Corpora grow in crates/<crate>/fuzz/corpus/<target>/ (git-ignored); a crash leaves its
# input in fuzz/artifacts/<target>/ and the closing summary names the failed targets.
set -euo pipefail

secs="${1:-${FUZZ_SECONDS:-10}}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz-smoke: no nightly toolchain (rustup toolchain install nightly)" >&2
    exit 2
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz-smoke: cargo-fuzz is not installed (cargo install cargo-fuzz)" >&2
    exit 2
fi

failed=()
total=0
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
for project in byzfs-bft byzfs-fs; do
    cd "$root/crates/$project"
    # The build's line per crate goes to a file, shown only if the build fails (CI shows a
    # window of its log).
    if ! cargo +nightly fuzz build >"$log" 2>&1; then
        tail -60 "$log" >&2
        echo "fuzz-smoke: cargo +nightly fuzz build failed in crates/$project" >&2
        exit 1
    fi
    mapfile -t targets < <(cargo +nightly fuzz list)
    if [ "${#targets[@]}" -eq 0 ]; then
        echo "fuzz-smoke: no fuzz targets found in crates/$project" >&2
        exit 1
    fi
    for t in "${targets[@]}"; do
        total=$((total + 1))
        # -use_value_profile helps libFuzzer solve comparisons; a dictionary (decode_frame's
        # holds the magic and the empty body's digest) gets it past the header within seconds.
        args=(-max_total_time="$secs" -use_value_profile=1)
        [ -f "fuzz/$t.dict" ] && args+=(-dict="fuzz/$t.dict")
        if cargo +nightly fuzz run "$t" -- "${args[@]}" >"$log" 2>&1; then
            echo "fuzz-smoke: $t ok ($(grep -Eo 'Done [0-9]+ runs' "$log" | tail -1 | cut -d' ' -f2) runs," \
                "$(grep -Eo 'cov: [0-9]+' "$log" | tail -1))"
        else
            echo "fuzz-smoke: $t FAILED; last lines:" >&2
            tail -40 "$log" >&2
            failed+=("$t")
        fi
    done
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz-smoke: ${#failed[@]} of $total targets failed: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz-smoke: all $total targets ran ${secs}s each without a crash"
