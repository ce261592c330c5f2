#!/usr/bin/env python3
"""Draws Andrew-Tcl across sites (BENCHMARKS.md "Andrew-Tcl across sites") as one SVG from
the JSON files `byzfs bench andrew --sites P --json F` wrote: a group per phase, a bar per
(profile, target), each group scaled to its own largest bar (phases differ by orders of
magnitude, as in `byzfs bench`'s own charts), seconds printed on the bars. Standard library
only. `FILE.json:KEY` takes the report under KEY of a file holding several; `!NAME` adds a
series NAME drawn as "did not finish".

Usage: python3 scripts/plot_andrew_sites.py OUT.svg PROFILE=FILE.json[:KEY] [!NAME] ...
"""

import json
import sys
from html import escape

PHASES = ["mkdir", "copy", "stat", "read", "total"]
COLOURS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"]
LABELS = {"byzfs-ro": "ByzFS", "norep": "NO-REP"}


def series_of(args):
    """[(name, {phase: seconds})] in the order given, targets in file order."""
    out = []
    for arg in args:
        if arg.startswith("!"):
            out.append((arg[1:], {}))
            continue
        profile, _, path = arg.partition("=")
        if not path:
            sys.exit(f"expected PROFILE=FILE.json[:KEY] or !NAME, got {arg!r}")
        path, _, key = path.partition(":")
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
        rows = (report[key] if key else report)["rows"]
        targets = []
        for r in rows:
            t = r["target"]
            if t in LABELS and t not in targets:
                targets.append(t)
        for t in targets:
            phases = {r["metric"]: r["median"] for r in rows if r["target"] == t}
            out.append((f"{LABELS[t]} {profile}", phases))
    return out


def svg(series, title):
    bar, gap, top, height = 22, 34, 50, 300
    group_w = len(series) * bar + gap
    legend_w = 190
    width = 60 + len(PHASES) * group_w + legend_w
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + height + 60}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="100%" height="100%" fill="white"/>',
        f'<text x="{width / 2}" y="24" text-anchor="middle" font-size="16">{escape(title)}</text>',
    ]
    base = top + height
    for g, phase in enumerate(PHASES):
        x0 = 50 + g * group_w
        values = [s[1].get(phase) for s in series]
        largest = max([v for v in values if v is not None] or [1.0])
        for i, v in enumerate(values):
            x = x0 + i * bar
            if v is None:
                parts.append(
                    f'<text x="{x + bar / 2}" y="{base - 4}" transform="rotate(-90 {x + bar / 2} {base - 4})" '
                    f'fill="{COLOURS[i % len(COLOURS)]}">did not finish</text>'
                )
                continue
            h = max(1.0, height * v / largest)
            parts.append(
                f'<rect x="{x}" y="{base - h:.1f}" width="{bar - 3}" height="{h:.1f}" '
                f'fill="{COLOURS[i % len(COLOURS)]}"/>'
            )
            label = f"{v:.3g}" if v < 10 else f"{v:.0f}"
            parts.append(
                f'<text x="{x + bar / 2 - 1}" y="{base - h - 3:.1f}" text-anchor="middle" '
                f'font-size="9">{label}</text>'
            )
        parts.append(
            f'<text x="{x0 + len(series) * bar / 2}" y="{base + 18}" text-anchor="middle" '
            f'font-size="12">{phase}</text>'
        )
    parts.append(f'<line x1="45" y1="{base}" x2="{width - legend_w}" y2="{base}" stroke="black"/>')
    lx = width - legend_w + 10
    for i, (name, _) in enumerate(series):
        y = top + 10 + i * 18
        parts.append(f'<rect x="{lx}" y="{y - 10}" width="12" height="12" fill="{COLOURS[i % len(COLOURS)]}"/>')
        parts.append(f'<text x="{lx + 18}" y="{y}">{escape(name)}</text>')
    parts.append(
        f'<text x="{width / 2}" y="{base + 42}" text-anchor="middle" fill="#555">'
        "seconds; each phase scaled to its own largest bar</text>"
    )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    series = series_of(sys.argv[2:])
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        f.write(svg(series, "Andrew-Tcl across sites (no compile), seconds"))


if __name__ == "__main__":
    main()
