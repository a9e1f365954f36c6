#!/usr/bin/env python3
"""The per-matrix median of several `bench/peers.py` runs, as one table.

A shared VM moves single matrices by 5-50 % between runs of the same
command (a neighbour's burst lands on one tool's timing of one matrix).
Every tool's median time of a matrix is taken over the runs, then the ratios
and geomeans are computed from those medians exactly as peers.py computes
them from one run:

    python3 bench/median_of_runs.py RUN_DIR RUN_DIR [RUN_DIR ...]

where each RUN_DIR is a peers.py --out folder (its table.md is read). Only
matrices present in every run are kept. Prints a Markdown table.
"""

import math
import os
import statistics
import sys

UNITS = {"m": 1e-3, "µ": 1e-6, "u": 1e-6, "n": 1e-9}


def seconds(cell):
    """'35.74m (brmerge-upper)' / '1.387' / '7.76m ⁿ' -> seconds, or None."""
    word = cell.strip().split(" ")[0]
    if not word or word in ("–", "ERROR", "timeout"):
        return None
    scale = UNITS.get(word[-1], 1.0)
    try:
        return float(word[:-1] if word[-1] in UNITS else word) * scale
    except ValueError:
        return None


def read_table(path):
    """{matrix: {column header: cell}} of the per-matrix rows of a table.md."""
    rows, header = {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("| "):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] == "matrix":
                header = cells
            elif header and not cells[0].startswith("**"):
                rows[cells[0]] = dict(zip(header, cells))
    return rows


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    runs = [read_table(os.path.join(d, "table.md")) for d in argv]
    matrices = [m for m in runs[0] if all(m in r for r in runs)]
    tools = [h for h in next(iter(runs[0].values())) if h.endswith(" s") or h.startswith("rusparse s")]
    rs, any_order = "rusparse s (algorithm)", "rusparse any order s"
    peers = [t for t in tools if t not in (rs, any_order)]
    ratio_peers = [p for p in peers if p != "scipy s"]
    out = ["| matrix | " + " | ".join(tools)
           + " | " + " | ".join(f"vs {p[:-2]}" for p in ratio_peers)
           + " | vs best peer | any order vs MKL |",
           "|---|" + "--:|" * (len(tools) + len(ratio_peers) + 2)]
    cols = {k: [] for k in ratio_peers + ["best", "any"]}
    worst = None
    for m in matrices:
        med = {}
        for t in tools:
            ts = [seconds(r[m].get(t, "")) for r in runs]
            ts = [x for x in ts if x]
            med[t] = statistics.median(ts) if ts else None
        r = med[rs]
        ratios = {p: (med[p] / r if med[p] and r else None) for p in ratio_peers}
        peer_ts = [med[p] for p in peers if med[p]]
        ratios["best"] = min(peer_ts) / r if peer_ts and r else None
        ratios["any"] = (med.get("MKL s") / med[any_order]
                         if med.get("MKL s") and med.get(any_order) else None)
        for k, v in ratios.items():
            cols[k].append(v)
        if ratios["best"] and (worst is None or ratios["best"] < worst[1]):
            worst = (m, ratios["best"])
        fmt = lambda x: f"{x * 1e3:.2f} ms" if x else "–"
        fx = lambda x: f"{x:.2f}×" if x else "–"
        out.append(f"| {m} | " + " | ".join(fmt(med[t]) for t in tools) + " | "
                   + " | ".join(fx(ratios[p]) for p in ratio_peers)
                   + f" | {fx(ratios['best'])} | {fx(ratios['any'])} |")
    out.append(f"| **geomean ({len(matrices)})** | " + " | " * (len(tools) - 1) + " | "
               + " | ".join(f"**{geomean(cols[p]):.2f}×**" for p in ratio_peers)
               + f" | **{geomean(cols['best']):.2f}×** | **{geomean(cols['any']):.2f}×** |")
    print("\n".join(out))
    if worst:
        print(f"\nWorst matrix against the best peer: **{worst[0]}** at {worst[1]:.2f}×")


if __name__ == "__main__":
    main(sys.argv[1:])
