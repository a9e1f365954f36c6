#!/usr/bin/env python3
"""Trains rusparse's CPU algorithm selector (after the pattern-based selector
paper, docs/bibliography.md) and evaluates it.

Reproduce the committed model (from the repository root, release build):

    cargo build --release -p rusparse-bench
    python3 bench/train_selector.py collect   # times every algorithm (~15 min on 2 cores)
    python3 bench/train_selector.py fit --max-depth 2 --min-leaf 8
                                              # writes src/plan/selector_model.rs (see
                                              # docs/benchmarks.md for why not the
                                              # cross-validated depth 1)
    cargo build --release -p rusparse-bench
    python3 bench/train_selector.py evaluate  # re-times the held-out cases with the new model

`collect` runs `rusparse-bench selector-data` on the training cases (the
generator families over a range of sizes and parameters, A·Aᵀ products and
A·B pairs of different families) and on the held-out cases (the real
matrices of shared/matrices and generator parameters and a seed the training
never saw), writing bench/selector/train.csv and bench/selector/heldout.csv.

`fit` grows a small decision tree on the training rows. The tree is
cost-sensitive: a leaf picks the algorithm with the least total log time
over its rows, and a split is the one that most lowers the summed regret
log(t_pick / t_best); this minimises the geomean slowdown against the
per-matrix best algorithm (the oracle) directly, where a classifier would
treat a 1 % miss like a 3x miss. Pure Python, no packages: the model is a
few dozen nodes and the data a few hundred rows.

`evaluate` re-times the held-out cases (the automatic choice now runs the
new model, its planning cost included) and prints accuracy, the geomean
ratio to the oracle, the worst loss and every fixed algorithm's geomean, as
a Markdown table for docs/benchmarks.md.
"""

import argparse
import csv
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "bench", "selector")
MATRICES = os.path.join(os.path.dirname(ROOT), "shared", "matrices")
MODEL = os.path.join(ROOT, "src", "plan", "selector_model.rs")
# RUSPARSE_BENCH: a copy of the binary, so that a rebuild during a long
# `collect` does not change the code being timed halfway through.
BENCH = os.environ.get("RUSPARSE_BENCH") or os.path.join(ROOT, "target", "release", "rusparse-bench")

ALGORITHMS = ["hash", "dense", "brmerge_precise", "brmerge_upper"]
RUST_NAMES = {
    "hash": "Algorithm::Hash",
    "dense": "Algorithm::Dense",
    "brmerge_precise": "Algorithm::BrmergePrecise",
    "brmerge_upper": "Algorithm::BrmergeUpper",
}

# Training: every family over a range of sizes and parameters (seed 42).
TRAIN = [
    "uniform_r4:2000", "uniform_r4:10000", "uniform_r4:50000",
    "uniform_r4:200000", "uniform_r4:800000",
    "stencil2d_5pt:40", "stencil2d_5pt:150", "stencil2d_5pt:400",
    "stencil2d_5pt:900",
    "stencil3d_7pt:12", "stencil3d_7pt:35", "stencil3d_7pt:70",
    "fem27_3dof:5", "fem27_3dof:9", "fem27_3dof:13",
    "rmat:10:4", "rmat:12:8", "rmat:13:2", "rmat:14:16", "rmat:16:4",
    "rmat:17:2",
    "delaunay:3000", "delaunay:40000", "delaunay:300000",
    "band_r2:100000", "band_r8:50000", "band_r40:20000", "band_r120:8000",
    "band_r300:3000", "band_r60:150000", "band_r5:1000000",
    # A·Aᵀ (--aat matches these specs only).
    "rmat:15:6", "band_r33:40000", "uniform_r4:300000",
    # A·B of different families, equal inner dimensions.
    "stencil2d_5pt:256@rmat:16:4", "rmat:16:4@stencil2d_5pt:256",
    "uniform_r4:65536@band_r30:65536", "delaunay:65536@uniform_r4:65536",
    "band_r10:65536@rmat:16:8", "stencil3d_7pt:40@uniform_r4:64000",
    "band_r50:5184@fem27_3dof:12", "fem27_3dof:12@band_r50:5184",
    "rmat:12:16@delaunay:4096", "uniform_r4:250000@stencil2d_5pt:500",
    # Added after the first held-out run, which found too few small
    # products with scattered columns (few rows, A·Aᵀ, random B).
    "uniform_r4:5000", "uniform_r4:20000", "uniform_r4:100000",
    "delaunay:10000", "delaunay:100000", "rmat:11:16",
    "uniform_r4:24000", "rmat:13:8", "delaunay:20000",
    "uniform_r4:16384@rmat:14:4", "rmat:14:4@uniform_r4:16384",
    "delaunay:16384@band_r100:16384", "band_r4:8192@uniform_r4:8192",
    # Scattered columns with long rows (uniform_rK, K > 4).
    "uniform_r8:50000", "uniform_r12:100000", "uniform_r16:20000",
    "uniform_r32:8000", "uniform_r64:3000", "uniform_r20:5000",
    "uniform_r24:16384@rmat:14:4", "band_r20:16384@uniform_r16:16384",
    # Added after the second held-out run: large local products with
    # little work per row (the first ones had only scattered examples).
    "band_r2:300000", "stencil2d_5pt:500", "stencil3d_7pt:60",
    # More sizes and mixtures of each family.
    "rmat:12:4", "rmat:14:8", "rmat:15:2", "delaunay:200000",
    "band_r25:60000", "band_r80:30000", "stencil2d_5pt:250", "fem27_3dof:7",
    "uniform_r6:150000", "uniform_r3:400000",
    "rmat:15:8@uniform_r6:32768", "uniform_r6:32768@rmat:15:8",
    # Added on 2026-11-28, when the dense accumulator's faster sort moved
    # the choice for scattered rows: the training had no scattered product
    # wider than 2^19.6 columns, and the depth-1 tree it gave sent
    # delaunay_1048576 to the dense accumulator at 1.8x BRMerge-Upper's time.
    "delaunay:700000", "uniform_r4:1200000", "delaunay:450000@uniform_r4:450000",
]
TRAIN_AAT = ["rmat:15:6", "band_r33:40000", "uniform_r4:300000",
             "uniform_r4:24000", "rmat:13:8", "delaunay:20000",
             "uniform_r20:5000"]
TRAIN_SEED = 42

# Held out: the real matrices, and generator parameters the training never
# saw, with another seed.
HELDOUT_GENERATED = [
    "uniform_r4:120000", "uniform_r4:500000", "stencil2d_5pt:600",
    "stencil3d_7pt:55", "fem27_3dof:11", "rmat:15:4", "rmat:13:16",
    "rmat:18:2", "delaunay:150000", "band_r15:80000", "band_r200:6000",
    "band_r3:400000",
    "stencil2d_5pt:181@delaunay:32761", "rmat:15:4@band_r25:32768",
    "band_r12:100000@uniform_r4:100000", "uniform_r10:60000",
    "uniform_r40:4000",
]
HELDOUT_SEED = 7
REAL = [
    "bcsstk15.mtx.gz", "ex31.mtx.gz", "memplus.mtx.gz", "1138_bus.mtx",
    "lp_maros_r7.mtx.gz", "lp_fit2p.mtx.gz", "qc324.mtx.gz",
    "orani678.mtx.gz", "luxembourg_osm.mtx.gz", "ego-Facebook.mtx.gz",
    "wiki-Vote.mtx.gz", "as20000102.mtx.gz", "HEP-th-new.mtx.gz",
    "ca-CondMat.mtx.gz",
]
RUNS = 5
# One thread: the algorithms' relative costs per core are what the tree
# learns, and a second core stays free so the machine's other work does not
# fall on the timed threads.
THREADS = 1


def selector_data(csv_path, specs, seed, aat, extra=()):
    """Appends one row per spec to csv_path (rusparse-bench selector-data)."""
    for spec in specs:
        cmd = [BENCH, "selector-data", "--runs", str(RUNS), "--seed", str(seed),
               "--threads", str(THREADS), "--csv", csv_path, *extra]
        for s in aat:
            cmd += ["--aat", s]
        cmd.append(spec)
        subprocess.run(cmd, check=True)


def collect_heldout(path, extra=()):
    if os.path.exists(path):
        os.remove(path)
    selector_data(path, HELDOUT_GENERATED, HELDOUT_SEED, [], extra)
    selector_data(path, [os.path.join(MATRICES, m) for m in REAL], 0, ["lp_"], extra)


def refeature(_args):
    """Recomputes the features of the rows of train.csv and heldout.csv
    (after a feature was added or changed) and keeps their times: the
    algorithms' times do not depend on the features, and re-timing costs
    a quiet quarter of an hour. The automatic choice's columns keep the old
    model's pick until `evaluate` re-times it."""
    for name, collect_rows in (
            ("train.csv", lambda p: selector_data(p, TRAIN, TRAIN_SEED, TRAIN_AAT,
                                                   ["--features-only"])),
            ("heldout.csv", lambda p: collect_heldout(p, ["--features-only"]))):
        path = os.path.join(DATA, name)
        fresh = path + ".features"
        if os.path.exists(fresh):
            os.remove(fresh)
        collect_rows(fresh)
        with open(fresh, newline="") as f:
            reader = csv.DictReader(f)
            feature_names = [c for c in reader.fieldnames if c not in ("matrix", "product")]
            features = list(reader)
        os.remove(fresh)
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            timed = [c for c in reader.fieldnames
                     if c.startswith("seconds_") or c in ("auto_choice", "best")]
            old = list(reader)
        if [(r["matrix"], r["product"]) for r in old] != \
                [(r["matrix"], r["product"]) for r in features]:
            sys.exit(f"{name}: the cases differ from the lists in this script; run `collect`")
        with open(path, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["matrix", "product", *feature_names, *timed])
            for o, n in zip(old, features):
                w.writerow([o["matrix"], o["product"], *(n[c] for c in feature_names),
                            *(o[c] for c in timed)])
        print(f"{name}: {len(old)} rows, {len(feature_names)} features")


def collect(_args):
    os.makedirs(DATA, exist_ok=True)
    train = os.path.join(DATA, "train.csv")
    if os.path.exists(train):
        os.remove(train)
    selector_data(train, TRAIN, TRAIN_SEED, TRAIN_AAT)
    collect_heldout(os.path.join(DATA, "heldout.csv"))


def read_rows(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        names = [c for c in reader.fieldnames
                 if c not in ("matrix", "product", "auto_choice", "best")
                 and not c.startswith("seconds_")]
        ALLOWED[:] = [names.index(n) for n in SPLIT_FEATURES if n in names]
        rows = []
        for r in reader:
            rows.append({
                "matrix": r["matrix"],
                "product": r["product"],
                "x": [float(r[n]) for n in names],
                "t": {a: float(r["seconds_" + a]) for a in ALGORITHMS},
                "auto": float(r["seconds_auto"]),
                "auto_choice": r["auto_choice"],
            })
    return names, rows


def log_times(row):
    best = min(row["t"].values())
    return {a: math.log(t / best) for a, t in row["t"].items()}


def leaf(rows):
    """The algorithm with the least summed regret over rows, and that sum."""
    totals = {a: 0.0 for a in ALGORITHMS}
    for r in rows:
        for a, v in r["regret"].items():
            totals[a] += v
    pick = min(ALGORITHMS, key=lambda a: (totals[a], ALGORITHMS.index(a)))
    return pick, totals[pick]


# The features the tree may split on: sizes, row lengths, work, the
# predicted compression, the distance of A's entries from the diagonal, how
# often a dense accumulator's adds land on cache lines not touched before
# (in a window of rows, and over the whole sample: what decides between a
# dense accumulator's scattered adds and a merge's sequential passes) and
# the merge passes per row. The 4x4 density image is left out: with a few
# dozen training products its 16 cells mostly offer splits that fit noise.
SPLIT_FEATURES = [
    "log2_rows_a", "log2_inner", "log2_cols_b", "log2_nnz_a", "log2_nnz_b",
    "mean_row_a", "max_row_a", "cv_row_a", "empty_rows_a", "mean_row_b",
    "max_row_b", "cv_row_b", "log2_nprod", "nprod_per_row",
    "max_nprod_over_mean", "top_strata_product_share",
    "single_entry_row_product_share", "predicted_compression",
    "diagonal_distance", "near_diagonal_share",
    "window_new_line_share", "sample_new_line_share", "merge_depth",
]
ALLOWED = []  # feature indices, set by read_rows from SPLIT_FEATURES


def grow(rows, depth, max_depth, min_leaf):
    pick, cost = leaf(rows)
    node = {"leaf": pick, "cost": cost, "n": len(rows)}
    if depth == max_depth or len(rows) < 2 * min_leaf or cost == 0.0:
        return node
    best = None
    nfeat = len(rows[0]["x"])
    span = [max(r["x"][f] for r in rows) - min(r["x"][f] for r in rows) or 1.0
            for f in range(nfeat)]
    for f in range(nfeat):
        if ALLOWED and f not in ALLOWED:
            continue
        order = sorted(rows, key=lambda r: r["x"][f])
        # Running per-algorithm sums of regret left of the cut.
        left = {a: 0.0 for a in ALGORITHMS}
        total = {a: sum(r["regret"][a] for r in rows) for a in ALGORITHMS}
        for i in range(len(order) - 1):
            for a in ALGORITHMS:
                left[a] += order[i]["regret"][a]
            lo, hi = order[i]["x"][f], order[i + 1]["x"][f]
            if lo == hi or i + 1 < min_leaf or len(order) - i - 1 < min_leaf:
                continue
            c = min(left.values()) + min(total[a] - left[a] for a in ALGORITHMS)
            # Equal regret: the split with the widest gap, relative to the
            # feature's range here, generalises best (a max-margin cut).
            margin = (hi - lo) / span[f]
            if best is None or c < best[0] - 1e-12 or (
                    c < best[0] + 1e-12 and margin > best[3]):
                best = (c, f, (lo + hi) / 2, margin)
    if best is None or best[0] >= cost - 1e-9:
        return node
    _, f, thr, _ = best
    below = [r for r in rows if r["x"][f] <= thr]
    above = [r for r in rows if r["x"][f] > thr]
    node.update({
        "feature": f,
        "threshold": thr,
        "below": grow(below, depth + 1, max_depth, min_leaf),
        "above": grow(above, depth + 1, max_depth, min_leaf),
    })
    return node


def predict(node, x):
    while "feature" in node:
        node = node["below"] if x[node["feature"]] <= node["threshold"] else node["above"]
    return node["leaf"]


def flatten(node, out):
    """Pre-order node list; children referenced by index."""
    i = len(out)
    out.append(None)
    if "feature" in node:
        b = flatten(node["below"], out)
        a = flatten(node["above"], out)
        out[i] = ("split", node["feature"], node["threshold"], b, a)
    else:
        out[i] = ("leaf", node["leaf"])
    return i


def describe(node, names, indent=""):
    if "feature" not in node:
        return f"{indent}{node['leaf']} ({node['n']} cases)\n"
    s = f"{indent}{names[node['feature']]} <= {node['threshold']:.6g}:\n"
    s += describe(node["below"], names, indent + "  ")
    s += f"{indent}else:\n"
    s += describe(node["above"], names, indent + "  ")
    return s


def write_model(tree, names, ntrain, args):
    nodes = []
    flatten(tree, nodes)
    lines = []
    for n in nodes:
        if n[0] == "leaf":
            lines.append(f"    SelectorNode::Leaf({RUST_NAMES[n[1]]}),")
        else:
            _, f, thr, b, a = n
            # rustfmt's layout, so `cargo fmt --check` passes unchanged.
            lines.append(
                f"    SelectorNode::Split {{\n        feature: {f},\n"
                f"        threshold: {thr!r},\n        below: {b},\n"
                f"        above: {a},\n    }}, // {names[f]}")
    tree_text = "".join("//! " + l + "\n" if l else "//!\n"
                        for l in describe(tree, names).rstrip().split("\n"))
    text = f"""//! The trained CPU algorithm selector: a decision tree over
//! [`super::features::FEATURE_NAMES`], generated by `bench/train_selector.py fit`
//! (max depth {args.max_depth}, at least {args.min_leaf} cases per leaf, {args.how_chosen}) from {ntrain} timed
//! training cases in `bench/selector/train.csv`. Do not edit by hand: rerun
//! the script (its docstring has the commands).
//!
//! The tree, as read by [`super::select`]:
//!
//! ```text
{tree_text.replace("//! ", "//! ", -1)}//! ```

// @generated by bench/train_selector.py
#![allow(clippy::unreadable_literal, clippy::excessive_precision)]

use super::select::SelectorNode;
use crate::types::Algorithm;

/// The tree's nodes; node 0 is the root.
pub const SELECTOR_TREE: [SelectorNode; {len(nodes)}] = [
{chr(10).join(lines)}
];
"""
    with open(MODEL, "w") as f:
        f.write(text)
    print(f"wrote {MODEL} ({len(nodes)} nodes)")


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def report(rows, pick_of, title):
    """Markdown evaluation of picks against the oracle and fixed algorithms."""
    ratios, hits, worst = [], 0, (1.0, "")
    for r in rows:
        best = min(r["t"], key=r["t"].get)
        t_best = r["t"][best]
        pick, t_pick = pick_of(r)
        hits += pick == best
        ratios.append(t_pick / t_best)
        if t_pick / t_best > worst[0]:
            worst = (t_pick / t_best, r["matrix"])
    out = [f"**{title}** ({len(rows)} cases)", "",
           "| selector | accuracy | geomean time / oracle | worst |",
           "|---|--:|--:|--:|"]
    out.append(f"| automatic | {100 * hits / len(rows):.0f} % | {geomean(ratios):.3f} "
               f"| {worst[0]:.2f} ({worst[1]}) |")
    for a in ALGORITHMS:
        rs = [r["t"][a] / min(r["t"].values()) for r in rows]
        acc = sum(min(r["t"], key=r["t"].get) == a for r in rows)
        w = max(range(len(rows)), key=lambda i: rs[i])
        out.append(f"| always {a} | {100 * acc / len(rows):.0f} % | {geomean(rs):.3f} "
                   f"| {rs[w]:.2f} ({rows[w]['matrix']}) |")
    return "\n".join(out) + "\n"


# src/plan/select.rs: products of at most this many scalar products take
# the dense accumulator without the tree (or its features).
SMALL_PRODUCTS = 1 << 16


def small(row, names):
    nprod = 2.0 ** row["x"][names.index("log2_nprod")] - 1.0
    return nprod <= SMALL_PRODUCTS + 0.5


def choice(tree, names, row):
    """The automatic choice as src/plan/select.rs makes it (the runnable
    fallbacks aside: every case here can run every algorithm)."""
    pick = "dense" if small(row, names) else predict(tree, row["x"])
    return pick, row["t"][pick]


def cross_validated(train):
    """(max_depth, min_leaf) by leave-one-out cross-validation on the
    training rows (each row picked by a tree grown without it), with CART's
    one-standard-error rule: the smallest tree (shallowest, then largest
    leaves) whose mean regret is within one standard error of the best.
    The timings are noisy and the products few, so the best score alone
    favours trees that fit noise."""
    results = []
    for depth in (1, 2, 3, 4):
        for min_leaf in (8, 6, 4, 3, 2):
            regrets = []
            for k, held in enumerate(train):
                rest = train[:k] + train[k + 1:]
                tree = grow(rest, 0, depth, min_leaf)
                regrets.append(held["regret"][predict(tree, held["x"])])
            n = len(regrets)
            mean = sum(regrets) / n
            se = math.sqrt(sum((r - mean) ** 2 for r in regrets) / (n - 1) / n)
            results.append((depth, min_leaf, mean, se))
            print(f"  depth {depth}, min leaf {min_leaf}: leave-one-out geomean "
                  f"time / oracle {math.exp(mean):.4f} (se {se:.4f})")
    best = min(results, key=lambda r: r[2])
    limit = best[2] + best[3]
    depth, min_leaf, _, _ = min((r for r in results if r[2] <= limit),
                                key=lambda r: (r[0], -r[1]))
    return depth, min_leaf


def fit(args):
    names, every = read_rows(os.path.join(DATA, "train.csv"))
    # Small products never reach the tree.
    train = [r for r in every if not small(r, names)]
    for r in train:
        r["regret"] = log_times(r)
    args.how_chosen = ("given on the command line (--max-depth, --min-leaf)"
                       if args.max_depth is not None and args.min_leaf is not None else
                       "chosen by leave-one-out\n//! cross-validation with the one-standard-error rule")
    if args.max_depth is None or args.min_leaf is None:
        print("leave-one-out cross-validation on the training cases:")
        args.max_depth, args.min_leaf = cross_validated(train)
        print(f"chosen: depth {args.max_depth}, min leaf {args.min_leaf}")
    tree = grow(train, 0, args.max_depth, args.min_leaf)
    print(describe(tree, names))
    write_model(tree, names, len(train), args)
    print(report(every, lambda r: choice(tree, names, r),
                 "Training cases, automatic choice (timed with the fixed algorithms)"))
    hpath = os.path.join(DATA, "heldout.csv")
    if os.path.exists(hpath):
        _, held = read_rows(hpath)
        print(report(held, lambda r: choice(tree, names, r),
                     "Held-out cases, automatic choice (from the fixed algorithms' times)"))


def evaluate(_args):
    path = os.path.join(DATA, "heldout.csv")
    collect_heldout(path)
    _, held = read_rows(path)
    print(report(held, lambda r: (r["auto_choice"], r["auto"]),
                 "Held-out cases, automatic choice timed as it runs"))
    for r in held:
        print(f"{r['matrix']},{r['auto_choice']},{r['auto']:.4g},"
              + ",".join(f"{a}={r['t'][a]:.4g}" for a in ALGORITHMS))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("collect").set_defaults(run=collect)
    sub.add_parser("refeature").set_defaults(run=refeature)
    f = sub.add_parser("fit")
    f.add_argument("--max-depth", type=int, help="default: by cross-validation")
    f.add_argument("--min-leaf", type=int, help="default: by cross-validation")
    f.set_defaults(run=fit)
    sub.add_parser("evaluate").set_defaults(run=evaluate)
    args = p.parse_args()
    if not os.path.exists(BENCH):
        sys.exit(f"{BENCH} not found: run `cargo build --release -p rusparse-bench` first")
    args.run(args)


if __name__ == "__main__":
    main()
