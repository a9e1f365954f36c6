#!/usr/bin/env python3
"""Fits the GPU selector's threads per B row from a timing sweep, and
evaluates it on matrices the fit never saw.

The sweep is `scripts/gpu-check.sh`'s step selector_sweep: `rusparse-bench
--backend cuda --gpu-threads-per-b-row G ... --gpu-bin-scale F ...` over
the generated suite and the real matrices, one CSV row per (matrix, G, F)
with its median time. The committed run is
bench/gpu-runs/2026-12-01-h200/selector_sweep.csv (an H200).

The rule fitted is the planner's (`gpu_bins::threads_per_b_row`):

    G = clamp(next_pow2(ceil(ceil(nprod / nnz(A)) / d)), 2, warp)

nprod / nnz(A) is the mean length of the B rows the product reads (each
entry of A reads one); d is the entries of such a row per thread, chosen by
the least geomean of time(rule's G) / time(best G) over the matrices (then
the least worst case). The evaluation is the CPU selector's (docs/
benchmarks.md, "Algorithm selection"): that geomean on matrices the fit
never saw, here by leaving each matrix out in turn (d fitted on the other
18, scored on the one left out), and, as a second split, d fitted on the
generated matrices alone and scored on the real ones. The bin scales are
compared at the chosen rule's G. Exit status 1 when the leave-one-out
geomean misses 1.05.

    python3 bench/fit_gpu_selector.py [SWEEP.csv]

Pure Python; no packages.
"""

import csv
import math
import os
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT = os.path.join(HERE, "gpu-runs", "2026-12-01-h200", "selector_sweep.csv")
GENERATED = ("uniform_", "stencil", "fem27_", "rmat_", "delaunay_", "band_")
DIVISORS = (1, 2, 3, 4, 6, 8, 12, 16)
WARP = 32


def parse_config(algorithm):
    """('cuda-hash tpr=8 scale=0.5') -> (8, 0.5)."""
    g, f = None, 1.0
    for part in algorithm.split():
        if part.startswith("tpr="):
            g = int(part[4:])
        elif part.startswith("scale="):
            f = float(part[6:])
    return g, f


def load(path):
    times = defaultdict(dict)  # matrix -> (G, scale) -> seconds
    shape = {}
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            g, f = parse_config(r["algorithm"])
            if g is None:
                continue
            times[r["matrix"]][(g, f)] = float(r["median_s"])
            shape[r["matrix"]] = (int(r["nprod"]), int(r["nnz_a"]))
    return times, shape


def rule(nprod, nnz_a, d):
    mean = -(-nprod // nnz_a) if nnz_a > 0 else 0
    want = max(-(-mean // d), 1)
    return min(max(1 << (want - 1).bit_length(), 2), WARP)


def regrets(times, shape, matrices, pick):
    """time(pick) / time(best G at scale 1) per matrix."""
    out = []
    for m in matrices:
        at1 = {g: t for (g, f), t in times[m].items() if f == 1.0}
        out.append(at1[pick(m)] / min(at1.values()))
    return out


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else DEFAULT
    times, shape = load(path)
    gen = sorted(m for m in times if m.startswith(GENERATED))
    real = sorted(m for m in times if not m.startswith(GENERATED))
    everything = gen + real

    def scored(matrices, pick):
        r = regrets(times, shape, matrices, pick)
        return geomean(r), max(r)

    def by_rule(d):
        return lambda m: rule(*shape[m], d)

    def fit(matrices):
        return min(DIVISORS, key=lambda d: scored(matrices, by_rule(d)))

    print(f"{path}: {len(gen)} generated matrices, {len(real)} real ones; "
          f"time(G picked) / time(best G), bin scale 1")
    print()
    print("| rule | generated geomean | generated worst | real geomean | real worst |")
    print("|---|--:|--:|--:|--:|")
    for d in DIVISORS:
        g1, g2 = scored(gen, by_rule(d))
        r1, r2 = scored(real, by_rule(d))
        print(f"| G ≈ (nprod/nnz(A)) / {d} | {g1:.3f} | {g2:.3f} | {r1:.3f} | {r2:.3f} |")
    for g in sorted({g for m in times for (g, _) in times[m]}):
        g1, g2 = scored(gen, lambda m, g=g: g)
        r1, r2 = scored(real, lambda m, g=g: g)
        print(f"| G = {g} always | {g1:.3f} | {g2:.3f} | {r1:.3f} | {r2:.3f} |")

    loo, folds = [], []
    for m in everything:
        d = fit([x for x in everything if x != m])
        folds.append(d)
        loo.extend(regrets(times, shape, [m], by_rule(d)))
    split_d = fit(gen)
    split = regrets(times, shape, real, by_rule(split_d))
    best_d = fit(everything)
    print()
    print(f"leave one out: d chosen {', '.join(str(d) for d in folds)}; geomean time / best on "
          f"the matrix left out {geomean(loo):.3f}, worst {max(loo):.3f} (target: within 1.05)")
    print(f"generated -> real: d = {split_d} fitted on the generated matrices scores "
          f"{geomean(split):.3f} on the real ones, worst {max(split):.3f}")
    print(f"fitted on all {len(everything)} matrices: d = {best_d}")
    pick = by_rule(best_d)
    print()
    print("| matrix | set | nprod/nnz(A) | rule's G | its time ms | best G | best ms | ratio |")
    print("|---|---|--:|--:|--:|--:|--:|--:|")
    for m in everything:
        at1 = {g: t for (g, f), t in times[m].items() if f == 1.0}
        best = min(at1, key=at1.get)
        g = pick(m)
        nprod, nnz_a = shape[m]
        print(f"| {m} | {'generated' if m in gen else 'real'} | {nprod / max(nnz_a, 1):.1f} | "
              f"{g} | {at1[g] * 1e3:.3f} | {best} | {at1[best] * 1e3:.3f} | "
              f"{at1[g] / at1[best]:.3f} |")

    # Bin scales: each scale at the rule's G against scale 1.
    scales = sorted({f for m in times for (_, f) in times[m]})
    if len(scales) > 1:
        print()
        print("| bin scale | geomean time / scale 1 (rule's G) | matrices faster |")
        print("|--:|--:|--:|")
        for f in scales:
            ratios = [times[m][(pick(m), f)] / times[m][(pick(m), 1.0)] for m in everything
                      if (pick(m), f) in times[m]]
            faster = sum(r < 1.0 for r in ratios)
            print(f"| {f} | {geomean(ratios):.3f} | {faster} of {len(ratios)} |")
    return 0 if geomean(loo) <= 1.05 else 1


if __name__ == "__main__":
    sys.exit(main())
