#!/usr/bin/env bash
# The workloads of issue #27's table, side by side on a ByzFS mount and on local disk, one
# run each, with the ratio: `cp -a /usr/include`, `git clone` of a local repository,
# 50,000 files created in one directory then `rm -rf`, SQLite (20,000 rows in 200
# transactions, rollback journal and WAL), `rsync -a /usr/share/doc`.
#
#   bash scripts/workloads.sh [--quick] [--no-dir-delegations] [--durability disk|memory]
#
# Starts its own cluster (`byzfs up --mount`, 4 replicas on loopback) in a temporary
# directory and removes everything at the end. BYZFS_BIN picks the binary (default:
# target/release/byzfs, built if missing); REPO the repository to clone (default: this
# one). --quick runs a tenth of each (for a smoke check). Prints a Markdown table.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
quick=0
up_flags=()
durability=disk
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1 ;;
        --no-dir-delegations) up_flags+=(--no-dir-delegations) ;;
        --durability) durability="$2"; shift ;;
        *) echo "unknown argument $1 (see the comment at the top of $0)" >&2; exit 2 ;;
    esac
    shift
done
bin="${BYZFS_BIN:-$root/target/release/byzfs}"
if [ ! -x "$bin" ]; then
    (cd "$root" && cargo build --release -p byzfs)
fi
bin="$(realpath "$bin")"
repo="${REPO:-$root}"
bash "$root/scripts/deps.sh" mount >/dev/null
if ! command -v rsync >/dev/null; then
    if [ "$(id -u)" = 0 ]; then
        apt-get install -y -qq rsync >/dev/null 2>&1 || true
    fi
fi

w="$(mktemp -d "${TMPDIR:-/tmp}/byzfs-workloads.XXXXXX")"
mnt="$w/mnt"
up_pid=
cleanup() {
    fusermount3 -u "$mnt" 2>/dev/null || true
    [ -n "$up_pid" ] && kill "$up_pid" 2>/dev/null && wait "$up_pid" 2>/dev/null || true
    rm -rf "$w"
}
trap cleanup EXIT

"$bin" up --base-port 0 --dir "$w/cluster" --durability "$durability" --mount "$mnt" \
    "${up_flags[@]}" >"$w/up.log" 2>&1 &
up_pid=$!
for _ in $(seq 600); do
    grep -q "Press Ctrl-C" "$w/up.log" 2>/dev/null && break
    kill -0 "$up_pid" 2>/dev/null || { cat "$w/up.log" >&2; exit 1; }
    sleep 0.1
done
mkdir -p "$w/local"

files=50000 rows=20000 tx=200 include=/usr/include doc=/usr/share/doc
if [ "$quick" = 1 ]; then
    files=5000 rows=2000 tx=20 include=/usr/include/linux doc=/usr/share/doc/git
fi
py="$root/scripts/workloads.py"

# seconds COMMAND...: runs it, prints its wall time in seconds.
seconds() {
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
}

row() { # NAME BYZFS LOCAL
    local ratio
    ratio=$(echo "scale=1; $2 / $3" | bc 2>/dev/null || echo "-")
    printf '| %s | %.2f | %.2f | %s× |\n' "$1" "$2" "$3" "$ratio"
}

echo "| workload ($(nproc) cores, durability $durability${up_flags:+, ${up_flags[*]}}) | ByzFS (s) | local disk (s) | ratio |"
echo "|---|---:|---:|---:|"
b=$(seconds cp -a "$include" "$mnt/include"); l=$(seconds cp -a "$include" "$w/local/include")
row "\`cp -a $include\` ($(find "$include" | wc -l) entries)" "$b" "$l"
b=$(seconds git clone -q "$repo" "$mnt/clone"); l=$(seconds git clone -q "$repo" "$w/local/clone")
row "\`git clone\` ($(git -C "$repo" rev-list --count HEAD) commits)" "$b" "$l"
b=$(seconds python3 "$py" files "$mnt/many" "$files"); l=$(seconds python3 "$py" files "$w/local/many" "$files")
row "create $files files in one directory" "$b" "$l"
b=$(seconds rm -rf "$mnt/many"); l=$(seconds rm -rf "$w/local/many")
row "\`rm -rf\` them" "$b" "$l"
for mode in delete wal; do
    b=$(seconds python3 "$py" sqlite "$mnt/$mode.db" "$rows" "$tx" "$mode")
    l=$(seconds python3 "$py" sqlite "$w/local/$mode.db" "$rows" "$tx" "$mode")
    row "SQLite $rows rows in $tx transactions, journal $mode" "$b" "$l"
done
if command -v rsync >/dev/null; then
    b=$(seconds rsync -a "$doc" "$mnt/doc"); l=$(seconds rsync -a "$doc" "$w/local/doc")
    row "\`rsync -a $doc\`" "$b" "$l"
else
    echo "| \`rsync -a $doc\` | — | — | rsync not installed |"
fi
