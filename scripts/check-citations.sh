#!/usr/bin/env bash
# Every section the code cites must exist (STYLE.md §14): for each line under crates/ that
# names PROTOCOL.md (or STYLE.md), every `§N.M` on it must be the number of a heading in
# docs/PROTOCOL.md (or docs/STYLE.md). A `§` right after "STYLE.md " counts for STYLE.md,
# any other on a PROTOCOL.md line for PROTOCOL.md. Prints what it checked; on a miss, names
# file:line and exits 1.
#
#   bash scripts/check-citations.sh [--list]     (--list also prints every citation)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# Heading numbers of a document: "## 1. Title", "### 1.6 Title" → 1, 1.6.
headings() {
    grep -oE '^#+ +[0-9]+(\.[0-9]+)*' "$1" | awk '{print $2}' | sort -u
}

# "file:line<TAB>number" for every citation of document $1 (PROTOCOL or STYLE): grep -o
# prints each line's "file:line:" prefix, then each `§` token on it, one per output line.
citations() {
    grep -rnE "$1\\.md" crates |
        grep -oE '^[^:]+:[0-9]+:|(STYLE\.md[^§]{0,12})?§ ?[0-9]+(\.[0-9]+)*' |
        awk -v doc="$1" '
            /:$/ { where = substr($0, 1, length($0) - 1); next }
            {
                style = ($0 ~ /^STYLE\.md/)
                num = $0; sub(/.*§ ?/, "", num)
                if ((doc == "STYLE") == style) print where "\t" num
            }' || true
}

list=0
[[ "${1:-}" == "--list" ]] && list=1

status=0
for doc in PROTOCOL STYLE; do
    file="docs/$doc.md"
    if [[ ! -f "$file" ]]; then
        echo "FAIL: $file is missing" >&2
        exit 1
    fi
    known="$(headings "$file")"
    cited="$(citations "$doc")"
    count="$(grep -c . <<<"$cited" || true)"
    distinct="$(cut -f2 <<<"$cited" | sort -uV | tr '\n' ' ')"
    missing=0
    while IFS=$'\t' read -r where num; do
        [[ -z "$num" ]] && continue
        ((list)) && printf '%s\t%s.md §%s\n' "$where" "$doc" "$num"
        if ! grep -qxF "$num" <<<"$known"; then
            echo "FAIL: $where cites $doc.md §$num, which has no heading in $file" >&2
            missing=$((missing + 1))
        fi
    done <<<"$cited"
    if ((missing > 0)); then
        status=1
    else
        echo "ok: $count citation(s) of $doc.md in crates/ resolve in $file (§ $distinct)"
    fi
done
exit "$status"
