//! Deterministic generators for the benchmark's matrix families, and the
//! parser of matrix specs (`family:params` or a Matrix Market path).
//!
//! Every value is `sign * uniform(0.5, 1.0)` with a random sign, so values
//! lie in `(-1, -0.5] ∪ [0.5, 1)`: no tiny magnitudes and, in practice, no
//! cancellation to an exact zero in C. Every matrix depends only on its spec
//! and the seed (not on the thread count): rows are generated in blocks of
//! [`BLOCK_ROWS`], each block with its own ChaCha8 stream derived from
//! `(seed, family, block)`.
//!
//! # Sanity numbers
//!
//! C = A·A with seed 42, measured with rusparse (`rusparse-bench --runs 1
//! --warmup 0 SPEC`), against the design document's targets:
//!
//! | spec | rows | nnz(A) | nprod | nnz(C) | target nnz / nprod / nnz(C) |
//! |---|--:|--:|--:|--:|---|
//! | `uniform_r4:200200` | 200,200 | 800,800 | 3,203,200 | 3,203,104 | 0.80M / 3.2M / 3.2M |
//! | `stencil2d_5pt:725` | 525,625 | 2,625,225 | 13,114,533 | 6,818,629 | 2.6M / 13.1M / 6.8M |
//! | `stencil3d_7pt:100` | 1,000,000 | 6,940,000 | 48,222,400 | 24,581,200 | 6.9M / 48.2M / 24.6M |
//! | `fem27_3dof:28` | 65,856 | 4,962,312 | 382,657,176 | 21,654,936 | 5.0M / 382.7M / 21.7M |
//! | `delaunay:1048576` | 1,048,576 | 7,339,942 | 53,255,600 | 21,712,878 | 7.3M / 53.3M / 21.7M |
//! | `band_r120:36000` | 36,000 | 3,989,290 | 442,314,755 | 16,991,454 | 4.0M / 443.6M / 17.0M |
//! | `rmat:14:4` | 16,384 | 62,066 | 5,031,366 | 3,334,315 | |
//! | `rmat:16:4` | 65,536 | 253,026 | 35,749,261 | 24,477,749 | |
//! | `rmat:18:4` | 262,144 | 1,024,281 | 244,671,242 | 172,645,948 | nnz(C) ≈ 104M |
//!
//! All but R-MAT match. R-MAT as specified here (a = 0.57, b = c = 0.19,
//! d = 0.05, E·2^S edges, duplicates merged, directed, self loops kept)
//! gives nnz(C) ≈ 173M at scale 18, growing ×2.7 per scale from 14 to 18;
//! an independent numpy/scipy implementation of the same definition gives
//! the same counts (24.6M at scale 16). Dropping self loops, adding
//! per-level noise, or A·Aᵀ instead of A·A do not bring it near 104M, so the
//! design figure must come from a different R-MAT variant.
//!
//! `delaunay:N` is a true Delaunay triangulation of random points, so it
//! matches the statistics of the DIMACS `delaunay_n20` graph (a jittered
//! grid with random diagonals gives only 52.2M / 20.8M, as its degrees vary
//! less).

use crate::sparse::{SparseMatrix, Values};
use rand::seq::index::sample;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use std::path::PathBuf;

/// Rows generated per independent random stream.
pub const BLOCK_ROWS: usize = 4096;

/// Fraction of the (clipped) band `[i-R, i+R]` that each row of `band_rR:N`
/// fills, diagonal included: a row gets `round(BAND_FILL * width)` distinct
/// columns, so an interior row of `band_r120` has `round(0.46 * 241) = 111`.
pub const BAND_FILL: f64 = 0.46;

/// R-MAT quadrant probabilities (a, b, c; d = 1 - a - b - c = 0.05).
pub const RMAT_ABC: (f64, f64, f64) = (0.57, 0.19, 0.19);

/// A matrix to benchmark: a generated family or a Matrix Market file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Spec {
    /// `uniform_rK:N` (e.g. `uniform_r4:N`): N×N, K distinct uniformly
    /// random columns per row.
    Uniform { k: usize, n: usize },
    /// `stencil2d_5pt:S`: 5-point stencil on an S×S grid.
    Stencil2d { s: usize },
    /// `stencil3d_7pt:S`: 7-point stencil on an S×S×S grid.
    Stencil3d { s: usize },
    /// `fem27_3dof:S`: 27-point stencil on S³ nodes, dense 3×3 blocks.
    Fem27 { s: usize },
    /// `rmat:S:E`: R-MAT graph with 2^S vertices and E·2^S generated edges.
    Rmat { scale: u32, edge_factor: usize },
    /// `delaunay:N`: Delaunay triangulation of N random points (random numbering).
    Delaunay { n: usize },
    /// `band_rR:N`: N×N, random columns within half-bandwidth R.
    Band { r: usize, n: usize },
    /// A `.mtx` or `.mtx.gz` file.
    File(PathBuf),
}

/// The families and their syntax, for `--help` and error messages.
pub const FAMILIES: &str = "uniform_rK:N (e.g. uniform_r4:N), stencil2d_5pt:S, stencil3d_7pt:S, fem27_3dof:S, \
rmat:SCALE:EDGEFACTOR, delaunay:N, band_rR:N (e.g. band_r120:36000), or a path ending in .mtx / .mtx.gz";

fn parse_num<T: std::str::FromStr>(spec: &str, what: &str, s: &str) -> Result<T, String> {
    s.parse::<T>().map_err(|_| {
        format!("bad matrix spec {spec:?}: {what} {s:?} is not a non-negative integer")
    })
}

impl Spec {
    /// Parses a spec (see [`FAMILIES`]).
    pub fn parse(spec: &str) -> Result<Spec, String> {
        if spec.ends_with(".mtx") || spec.ends_with(".mtx.gz") {
            return Ok(Spec::File(PathBuf::from(spec)));
        }
        let parts: Vec<&str> = spec.split(':').collect();
        let want = |n: usize| -> Result<(), String> {
            if parts.len() == n + 1 {
                Ok(())
            } else {
                Err(format!(
                    "bad matrix spec {spec:?}: {} takes {n} parameter(s); families: {FAMILIES}",
                    parts[0]
                ))
            }
        };
        let positive = |what: &str, s: &str, min: usize| -> Result<usize, String> {
            let v: usize = parse_num(spec, what, s)?;
            if v < min {
                return Err(format!(
                    "bad matrix spec {spec:?}: {what} must be at least {min}"
                ));
            }
            Ok(v)
        };
        let family = parts[0];
        let parsed = match family {
            f if f.starts_with("uniform_r") => {
                want(1)?;
                let k = positive("K", &f["uniform_r".len()..], 1)?;
                Spec::Uniform {
                    k,
                    n: positive("N", parts[1], k)?,
                }
            }
            "stencil2d_5pt" => {
                want(1)?;
                Spec::Stencil2d {
                    s: positive("S", parts[1], 1)?,
                }
            }
            "stencil3d_7pt" => {
                want(1)?;
                Spec::Stencil3d {
                    s: positive("S", parts[1], 1)?,
                }
            }
            "fem27_3dof" => {
                want(1)?;
                Spec::Fem27 {
                    s: positive("S", parts[1], 1)?,
                }
            }
            "rmat" => {
                want(2)?;
                let scale = positive("SCALE", parts[1], 1)?;
                if scale > 31 {
                    return Err(format!(
                        "bad matrix spec {spec:?}: SCALE must be at most 31"
                    ));
                }
                Spec::Rmat {
                    scale: scale as u32,
                    edge_factor: positive("EDGEFACTOR", parts[2], 1)?,
                }
            }
            "delaunay" => {
                want(1)?;
                Spec::Delaunay {
                    n: positive("N", parts[1], 3)?,
                }
            }
            f if f.starts_with("band_r") => {
                want(1)?;
                Spec::Band {
                    r: parse_num(spec, "R", &f["band_r".len()..])?,
                    n: positive("N", parts[1], 1)?,
                }
            }
            _ => {
                return Err(format!(
                    "bad matrix spec {spec:?}: unknown family {family:?}; families: {FAMILIES}"
                ))
            }
        };
        Ok(parsed)
    }

    /// A file-system-safe name: the spec with `:` turned into `_`
    /// (`stencil2d_5pt_725`), or the file name without `.mtx` / `.mtx.gz`.
    pub fn safe_name(&self) -> String {
        let raw = match self {
            Spec::Uniform { k, n } => format!("uniform_r{k}_{n}"),
            Spec::Stencil2d { s } => format!("stencil2d_5pt_{s}"),
            Spec::Stencil3d { s } => format!("stencil3d_7pt_{s}"),
            Spec::Fem27 { s } => format!("fem27_3dof_{s}"),
            Spec::Rmat { scale, edge_factor } => format!("rmat_{scale}_{edge_factor}"),
            Spec::Delaunay { n } => format!("delaunay_{n}"),
            Spec::Band { r, n } => format!("band_r{r}_{n}"),
            Spec::File(p) => {
                let name = p
                    .file_name()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let stem = name
                    .strip_suffix(".mtx.gz")
                    .or_else(|| name.strip_suffix(".mtx"))
                    .unwrap_or(&name)
                    .to_string();
                if stem.is_empty() {
                    "matrix".to_string()
                } else {
                    stem
                }
            }
        };
        raw.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }

    /// Generates the matrix (not for [`Spec::File`], which
    /// `matrix_market::read_path` loads).
    pub fn generate(&self, seed: u64) -> Result<SparseMatrix, String> {
        Ok(match *self {
            Spec::Uniform { k, n } => uniform(k, n, seed),
            Spec::Stencil2d { s } => stencil2d_5pt(s, seed),
            Spec::Stencil3d { s } => stencil3d_7pt(s, seed),
            Spec::Fem27 { s } => fem27_3dof(s, seed),
            Spec::Rmat { scale, edge_factor } => rmat(scale, edge_factor, seed),
            Spec::Delaunay { n } => delaunay(n, seed),
            Spec::Band { r, n } => band(r, n, seed),
            Spec::File(_) => return Err("a Matrix Market file is read, not generated".into()),
        })
    }
}

/// SplitMix64: a good 64-bit mixer for seeding and per-item hashing.
fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A hash of `(seed, tag, index)`.
fn hash3(seed: u64, tag: u64, index: u64) -> u64 {
    splitmix(splitmix(splitmix(seed) ^ tag) ^ index)
}

/// A uniform number in `[0, 1)` from a hash.
fn unit(h: u64) -> f64 {
    (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// The random stream of one block of one family.
fn stream(seed: u64, tag: u64, block: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(hash3(seed, tag, block))
}

/// `sign * uniform(0.5, 1.0)`.
fn value(rng: &mut ChaCha8Rng) -> f64 {
    let m: f64 = rng.random_range(0.5..1.0);
    if rng.random::<bool>() {
        m
    } else {
        -m
    }
}

/// Family tags, so different families with the same seed get different streams.
mod tag {
    pub const UNIFORM: u64 = 1;
    pub const STENCIL2D: u64 = 2;
    pub const STENCIL3D: u64 = 3;
    pub const FEM27: u64 = 4;
    pub const RMAT: u64 = 5;
    pub const DELAUNAY: u64 = 6;
    pub const BAND: u64 = 7;
    pub const RMAT_VALUES: u64 = 8;
}

/// Builds a matrix row by row: `row(i, rng, cols)` pushes row `i`'s columns
/// (strictly increasing) into `cols`; each entry then gets a random value.
/// Blocks of [`BLOCK_ROWS`] rows run in parallel with their own streams.
fn build_rows<F>(nrows: usize, ncols: usize, seed: u64, tag: u64, row: F) -> SparseMatrix
where
    F: Fn(usize, &mut ChaCha8Rng, &mut Vec<usize>) + Sync,
{
    let blocks: Vec<(Vec<usize>, Vec<usize>, Vec<f64>)> = (0..nrows.div_ceil(BLOCK_ROWS))
        .into_par_iter()
        .map(|b| {
            let mut rng = stream(seed, tag, b as u64);
            let rows = b * BLOCK_ROWS..nrows.min((b + 1) * BLOCK_ROWS);
            let mut lens = Vec::with_capacity(rows.len());
            let mut cols = Vec::new();
            let mut vals = Vec::new();
            let mut buf = Vec::new();
            for i in rows {
                buf.clear();
                row(i, &mut rng, &mut buf);
                debug_assert!(buf.windows(2).all(|w| w[0] < w[1]));
                debug_assert!(buf.last().is_none_or(|&c| c < ncols));
                lens.push(buf.len());
                cols.extend_from_slice(&buf);
                vals.extend(buf.iter().map(|_| value(&mut rng)));
            }
            (lens, cols, vals)
        })
        .collect();
    let nnz = blocks.iter().map(|b| b.1.len()).sum();
    let mut indptr = Vec::with_capacity(nrows + 1);
    let mut indices = Vec::with_capacity(nnz);
    let mut values = Vec::with_capacity(nnz);
    indptr.push(0);
    for (lens, cols, vals) in blocks {
        for l in lens {
            indptr.push(indptr[indptr.len() - 1] + l);
        }
        indices.extend_from_slice(&cols);
        values.extend_from_slice(&vals);
    }
    SparseMatrix {
        nrows,
        ncols,
        indptr,
        indices,
        values: Values::Real(values),
    }
}

/// `uniform_rK:N` (`k <= n`).
pub fn uniform(k: usize, n: usize, seed: u64) -> SparseMatrix {
    build_rows(n, n, seed, tag::UNIFORM, |_, rng, cols| {
        while cols.len() < k {
            let c = rng.random_range(0..n);
            if !cols.contains(&c) {
                cols.push(c);
            }
        }
        cols.sort_unstable();
    })
}

/// `stencil2d_5pt:S` (row-major grid numbering).
pub fn stencil2d_5pt(s: usize, seed: u64) -> SparseMatrix {
    build_rows(s * s, s * s, seed, tag::STENCIL2D, |i, _, cols| {
        let (x, y) = (i % s, i / s);
        if y > 0 {
            cols.push(i - s);
        }
        if x > 0 {
            cols.push(i - 1);
        }
        cols.push(i);
        if x + 1 < s {
            cols.push(i + 1);
        }
        if y + 1 < s {
            cols.push(i + s);
        }
    })
}

/// `stencil3d_7pt:S` (x fastest).
pub fn stencil3d_7pt(s: usize, seed: u64) -> SparseMatrix {
    let s2 = s * s;
    build_rows(s2 * s, s2 * s, seed, tag::STENCIL3D, |i, _, cols| {
        let (x, y, z) = (i % s, (i / s) % s, i / s2);
        if z > 0 {
            cols.push(i - s2);
        }
        if y > 0 {
            cols.push(i - s);
        }
        if x > 0 {
            cols.push(i - 1);
        }
        cols.push(i);
        if x + 1 < s {
            cols.push(i + 1);
        }
        if y + 1 < s {
            cols.push(i + s);
        }
        if z + 1 < s {
            cols.push(i + s2);
        }
    })
}

/// The in-range neighbours `c - 1, c, c + 1` of coordinate `c` on `0..s`.
fn around(c: usize, s: usize) -> std::ops::RangeInclusive<usize> {
    c.saturating_sub(1)..=(c + 1).min(s - 1)
}

/// `fem27_3dof:S`: node `x + S*(y + S*z)` owns rows `3*node .. 3*node + 3`;
/// each pair of nodes within the 27-point neighbourhood is a dense 3×3 block.
pub fn fem27_3dof(s: usize, seed: u64) -> SparseMatrix {
    let nodes = s * s * s;
    build_rows(3 * nodes, 3 * nodes, seed, tag::FEM27, |r, _, cols| {
        let node = r / 3;
        let (x, y, z) = (node % s, (node / s) % s, node / (s * s));
        for zz in around(z, s) {
            for yy in around(y, s) {
                for xx in around(x, s) {
                    let m = xx + s * (yy + s * zz);
                    cols.extend([3 * m, 3 * m + 1, 3 * m + 2]);
                }
            }
        }
    })
}

/// `band_rR:N`: row `i` holds the diagonal plus distinct random columns of
/// `[i-R, i+R] ∩ [0, N)`, `round(BAND_FILL * width)` columns in all.
pub fn band(r: usize, n: usize, seed: u64) -> SparseMatrix {
    build_rows(n, n, seed, tag::BAND, |i, rng, cols| {
        let lo = i.saturating_sub(r);
        let hi = (i + r).min(n - 1);
        let width = hi - lo + 1;
        let k = ((BAND_FILL * width as f64).round() as usize).clamp(1, width);
        cols.push(i);
        // Off-diagonal candidates are 0..width-1; index t maps to column
        // lo + t, skipping the diagonal.
        for t in sample(rng, width - 1, k - 1).iter() {
            let c = lo + t;
            cols.push(if c >= i { c + 1 } else { c });
        }
        cols.sort_unstable();
    })
}

/// `rmat:SCALE:E`: `E * 2^SCALE` directed edges drawn with the R-MAT
/// recursion ([`RMAT_ABC`]), duplicates merged (one entry kept), self loops
/// kept, vertices not permuted.
pub fn rmat(scale: u32, edge_factor: usize, seed: u64) -> SparseMatrix {
    const EDGE_BLOCK: usize = 1 << 16;
    let n = 1usize << scale;
    let m = edge_factor * n;
    let (a, b, c) = RMAT_ABC;
    let mut keys: Vec<u64> = (0..m.div_ceil(EDGE_BLOCK))
        .into_par_iter()
        .flat_map_iter(|blk| {
            let mut rng = stream(seed, tag::RMAT, blk as u64);
            let count = EDGE_BLOCK.min(m - blk * EDGE_BLOCK);
            (0..count)
                .map(|_| {
                    let (mut row, mut col) = (0u64, 0u64);
                    for _ in 0..scale {
                        let u: f64 = rng.random();
                        let (rb, cb) = if u < a {
                            (0, 0)
                        } else if u < a + b {
                            (0, 1)
                        } else if u < a + b + c {
                            (1, 0)
                        } else {
                            (1, 1)
                        };
                        row = (row << 1) | rb;
                        col = (col << 1) | cb;
                    }
                    (row << 32) | col
                })
                .collect::<Vec<u64>>()
        })
        .collect();
    keys.par_sort_unstable();
    keys.dedup();
    let mut indptr = vec![0usize; n + 1];
    for &k in &keys {
        indptr[(k >> 32) as usize + 1] += 1;
    }
    for i in 0..n {
        indptr[i + 1] += indptr[i];
    }
    let indices: Vec<usize> = keys.iter().map(|&k| (k & 0xFFFF_FFFF) as usize).collect();
    let mut rng = stream(seed, tag::RMAT_VALUES, 0);
    let values = (0..indices.len()).map(|_| value(&mut rng)).collect();
    SparseMatrix {
        nrows: n,
        ncols: n,
        indptr,
        indices,
        values: Values::Real(values),
    }
}

/// How far the clipping box of the Voronoi cells of `delaunay:N` reaches
/// beyond the square of points, in multiples of its side. Only convex-hull
/// points have unbounded cells (O(log N) of them for random points); their
/// cells scan all points, so the box can be huge. Hull edges are added
/// separately ([`hull_edges`]), so an edge is left out only when its whole
/// Voronoi edge lies outside the box, which needs two nearly flat triangles
/// side by side on the hull.
const DELAUNAY_MARGIN: f64 = 1000.0;

/// Voronoi edges shorter than this are ignored (a tie between cocircular
/// points, which random points make practically impossible).
const DELAUNAY_EPS: f64 = 1e-9;

/// Label of a clipping-box edge (no neighbour).
const BOX: usize = usize::MAX;

/// The points of `delaunay:N` bucketed into unit cells (about one point per
/// cell), for finding the points near a point.
struct PointGrid {
    side: f64,
    cells: usize,
    points: Vec<(f64, f64)>,
    start: Vec<usize>,
    /// Points sorted by grid cell, with their coordinates (cache friendly).
    members: Vec<(f64, f64, usize)>,
}

impl PointGrid {
    fn new(points: Vec<(f64, f64)>, side: f64) -> PointGrid {
        let cells = (side.ceil() as usize).max(1);
        let mut start = vec![0usize; cells * cells + 1];
        let cell_of = |p: (f64, f64)| {
            let x = (p.0 as usize).min(cells - 1);
            let y = (p.1 as usize).min(cells - 1);
            y * cells + x
        };
        for &p in &points {
            start[cell_of(p) + 1] += 1;
        }
        for c in 0..cells * cells {
            start[c + 1] += start[c];
        }
        let mut next = start.clone();
        let mut members = vec![(0.0, 0.0, 0usize); points.len()];
        for (i, &p) in points.iter().enumerate() {
            let c = cell_of(p);
            members[next[c]] = (p.0, p.1, i);
            next[c] += 1;
        }
        PointGrid {
            side,
            cells,
            points,
            start,
            members,
        }
    }

    /// The Delaunay neighbours of point `i`: the points whose bisector
    /// bounds `i`'s Voronoi cell (clipped to the square grown by
    /// [`DELAUNAY_MARGIN`] times its side).
    ///
    /// The cell is clipped by the points of ring after ring of grid cells
    /// around `i`. A point can cut the cell only if it lies inside the
    /// circle around some vertex `v` of the cell through `i` (radius
    /// `|v - p|`); those circles all touch `i`, so once a whole ring misses
    /// them, every farther ring does too.
    fn neighbours(&self, i: usize, out: &mut Vec<usize>) {
        let p = self.points[i];
        let margin = DELAUNAY_MARGIN * (self.side + 1.0);
        let (lo, hi) = (-margin, self.side + margin);
        // Vertices, each with the label of the edge that starts at it.
        let mut poly = vec![(lo, lo, BOX), (hi, lo, BOX), (hi, hi, BOX), (lo, hi, BOX)];
        let mut scratch = Vec::with_capacity(16);
        let mut circles: Vec<(f64, f64, f64)> = Vec::with_capacity(16);
        let n = self.cells as isize;
        let bx = (p.0 as isize).min(n - 1);
        let by = (p.1 as isize).min(n - 1);
        for r in 0..=n {
            circles.clear();
            circles.extend(
                poly.iter()
                    .map(|v| (v.0, v.1, (v.0 - p.0).powi(2) + (v.1 - p.1).powi(2))),
            );
            // Whether grid cell (x, y), the square [x, x+1] x [y, y+1],
            // meets one of the circles.
            let reaches = |x: isize, y: isize| {
                let (x0, y0) = (x as f64, y as f64);
                circles.iter().any(|&(vx, vy, r2)| {
                    let dx = (x0 - vx).max(vx - x0 - 1.0).max(0.0);
                    let dy = (y0 - vy).max(vy - y0 - 1.0).max(0.0);
                    dx * dx + dy * dy <= r2
                })
            };
            let mut hit = false;
            for y in (by - r).max(0)..=(by + r).min(n - 1) {
                // Only the ring's border: all of its top and bottom rows,
                // the two end cells of the others.
                let step = if y == by - r || y == by + r {
                    1
                } else {
                    (2 * r).max(1)
                };
                let mut x = bx - r;
                while x <= bx + r {
                    if x >= 0 && x < n && reaches(x, y) {
                        hit = true;
                        let c = (y * n + x) as usize;
                        for &(qx, qy, q) in &self.members[self.start[c]..self.start[c + 1]] {
                            if q != i {
                                clip(&mut poly, &mut scratch, p, (qx, qy), q);
                            }
                        }
                    }
                    x += step;
                }
            }
            if !hit {
                break;
            }
        }
        for k in 0..poly.len() {
            let (a, b) = (poly[k], poly[(k + 1) % poly.len()]);
            let long = (a.0 - b.0).powi(2) + (a.1 - b.1).powi(2) > DELAUNAY_EPS * DELAUNAY_EPS;
            if a.2 != BOX && long {
                out.push(a.2);
            }
        }
    }
}

/// Clips the convex polygon `poly` to the half-plane of points closer to
/// `p` than to `q`; the new edge is labelled `label`.
fn clip(
    poly: &mut Vec<(f64, f64, usize)>,
    scratch: &mut Vec<(f64, f64, usize)>,
    p: (f64, f64),
    q: (f64, f64),
    label: usize,
) {
    let (dx, dy) = (q.0 - p.0, q.1 - p.1);
    let (mx, my) = ((p.0 + q.0) / 2.0, (p.1 + q.1) / 2.0);
    let f = |v: &(f64, f64, usize)| (v.0 - mx) * dx + (v.1 - my) * dy;
    if (dx == 0.0 && dy == 0.0) || poly.iter().all(|v| f(v) <= 0.0) {
        return;
    }
    scratch.clear();
    for k in 0..poly.len() {
        let a = poly[k];
        let b = poly[(k + 1) % poly.len()];
        let (fa, fb) = (f(&a), f(&b));
        let cut = || {
            let t = fa / (fa - fb);
            (a.0 + t * (b.0 - a.0), a.1 + t * (b.1 - a.1))
        };
        match (fa <= 0.0, fb <= 0.0) {
            (true, true) => scratch.push(a),
            (true, false) => {
                scratch.push(a);
                let (x, y) = cut();
                scratch.push((x, y, label));
            }
            (false, true) => {
                let (x, y) = cut();
                scratch.push((x, y, a.2));
            }
            (false, false) => {}
        }
    }
    std::mem::swap(poly, scratch);
}

/// The edges of the convex hull of `points` (Andrew's monotone chain), both
/// directions, sorted: every hull edge is a Delaunay edge.
fn hull_edges(points: &[(f64, f64)]) -> Vec<(usize, usize)> {
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.par_sort_unstable_by(|&a, &b| {
        let (p, q) = (points[a], points[b]);
        p.0.total_cmp(&q.0).then(p.1.total_cmp(&q.1))
    });
    let cross = |o: usize, a: usize, b: usize| {
        let (o, a, b) = (points[o], points[a], points[b]);
        (a.0 - o.0) * (b.1 - o.1) - (a.1 - o.1) * (b.0 - o.0)
    };
    let mut chain: Vec<usize> = Vec::new();
    for pass in [
        &order[..],
        &order.iter().rev().copied().collect::<Vec<_>>()[..],
    ] {
        let base = chain.len();
        for &i in pass {
            while chain.len() >= base + 2
                && cross(chain[chain.len() - 2], chain[chain.len() - 1], i) <= 0.0
            {
                chain.pop();
            }
            chain.push(i);
        }
        chain.pop(); // the last point starts the other chain
    }
    let mut edges = Vec::with_capacity(2 * chain.len());
    for k in 0..chain.len() {
        let (a, b) = (chain[k], chain[(k + 1) % chain.len()]);
        if a != b {
            edges.push((a, b));
            edges.push((b, a));
        }
    }
    edges.sort_unstable();
    edges.dedup();
    edges
}

/// `delaunay:N`: the Delaunay triangulation of N uniformly random points in
/// a `sqrt(N)` × `sqrt(N)` square, diagonal included. Point `i` is row `i`,
/// so the numbering is a random permutation of any spatial order. The
/// average degree is just under 6 (E = 3N - 3 - hull points), so rows hold about 7 entries; the pattern is
/// symmetric. Rows are independent (Voronoi cell of each point), so they
/// are built in parallel.
pub fn delaunay(n: usize, seed: u64) -> SparseMatrix {
    let side = (n as f64).sqrt();
    let points: Vec<(f64, f64)> = (0..n as u64)
        .into_par_iter()
        .map(|i| {
            (
                unit(hash3(seed, tag::DELAUNAY, 2 * i)) * side,
                unit(hash3(seed, tag::DELAUNAY, 2 * i + 1)) * side,
            )
        })
        .collect();
    let hull = hull_edges(&points);
    let grid = PointGrid::new(points, side);
    build_rows(n, n, seed, tag::DELAUNAY, |i, _, cols| {
        cols.push(i);
        grid.neighbours(i, cols);
        let first = hull.partition_point(|e| e.0 < i);
        cols.extend(hull[first..].iter().take_while(|e| e.0 == i).map(|e| e.1));
        cols.sort_unstable();
        cols.dedup();
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether entry (i, j) is stored.
    fn has(m: &SparseMatrix, i: usize, j: usize) -> bool {
        m.row(i).binary_search(&j).is_ok()
    }

    fn values(m: &SparseMatrix) -> &[f64] {
        match &m.values {
            Values::Real(v) => v,
            Values::Complex(_) => panic!("generated values are real"),
        }
    }

    fn check_common(m: &SparseMatrix, spec: &Spec) {
        assert!(m.is_canonical(), "{spec:?} is not canonical CSR");
        assert!(values(m)
            .iter()
            .all(|v| (0.5..1.0).contains(&v.abs()) || *v == -1.0));
        assert_eq!(
            &spec.generate(42).unwrap(),
            m,
            "{spec:?} is not deterministic"
        );
        assert_ne!(
            &spec.generate(43).unwrap().values,
            &m.values,
            "{spec:?} ignores the seed"
        );
    }

    #[test]
    fn uniform_r4_has_four_distinct_columns_per_row() {
        let spec = Spec::parse("uniform_r4:1000").unwrap();
        let m = spec.generate(42).unwrap();
        assert_eq!((m.nrows, m.ncols, m.nnz()), (1000, 1000, 4000));
        assert!((0..1000).all(|i| m.row(i).len() == 4));
        check_common(&m, &spec);
        // Columns spread over the whole range.
        assert!(m.indices.iter().any(|&c| c < 100) && m.indices.iter().any(|&c| c >= 900));
        let wide = Spec::parse("uniform_r24:500").unwrap();
        assert_eq!(wide.safe_name(), "uniform_r24_500");
        let m = wide.generate(42).unwrap();
        assert!((0..500).all(|i| m.row(i).len() == 24));
        check_common(&m, &wide);
    }

    #[test]
    fn stencil2d_4x4_is_the_5_point_laplacian_pattern() {
        let spec = Spec::parse("stencil2d_5pt:4").unwrap();
        let m = spec.generate(42).unwrap();
        assert_eq!((m.nrows, m.ncols, m.nnz()), (16, 16, 64));
        check_common(&m, &spec);
        for i in 0..16usize {
            for j in 0..16usize {
                let (xi, yi, xj, yj) = (i % 4, i / 4, j % 4, j / 4);
                let adjacent = xi.abs_diff(xj) + yi.abs_diff(yj) <= 1;
                assert_eq!(has(&m, i, j), adjacent, "({i}, {j})");
            }
        }
        // Corner, edge and interior rows.
        assert_eq!(m.row(0), &[0, 1, 4]);
        assert_eq!(m.row(5), &[1, 4, 5, 6, 9]);
    }

    #[test]
    fn stencil3d_counts() {
        let spec = Spec::parse("stencil3d_7pt:5").unwrap();
        let m = spec.generate(42).unwrap();
        // 7 S^3 - 6 S^2 entries.
        assert_eq!((m.nrows, m.nnz()), (125, 7 * 125 - 6 * 25));
        assert_eq!(m.row(31), &[6, 26, 30, 31, 32, 36, 56]); // (1, 1, 1)
        check_common(&m, &spec);
    }

    #[test]
    fn fem27_s3_has_dense_blocks_and_81_entry_interior_rows() {
        let spec = Spec::parse("fem27_3dof:3").unwrap();
        let m = spec.generate(42).unwrap();
        // Node pairs in the 27-point neighbourhood: (3S - 2)^3 = 343, each a 3x3 block.
        assert_eq!((m.nrows, m.ncols, m.nnz()), (81, 81, 9 * 343));
        check_common(&m, &spec);
        // The centre node 13 touches all 27 nodes: its 3 rows are full.
        for r in 39..42 {
            assert_eq!(m.row(r).len(), 81);
        }
        // A corner node touches 8 nodes.
        assert_eq!(m.row(0).len(), 24);
        assert_eq!(&m.row(0)[..6], &[0, 1, 2, 3, 4, 5]);
        // Rows of one node share the pattern (dense blocks) and it is symmetric.
        for i in 0..81 {
            assert_eq!(m.row(i), m.row(3 * (i / 3)));
            for j in 0..81 {
                assert_eq!(has(&m, i, j), has(&m, j, i));
            }
        }
    }

    #[test]
    fn band_rows_stay_in_the_band_with_the_documented_fill() {
        let spec = Spec::parse("band_r120:1000").unwrap();
        let m = spec.generate(42).unwrap();
        assert_eq!((m.nrows, m.ncols), (1000, 1000));
        check_common(&m, &spec);
        for i in 0..1000 {
            let row = m.row(i);
            assert!(row.contains(&i), "row {i} lacks its diagonal");
            assert!(row.iter().all(|&c| c.abs_diff(i) <= 120));
            let width = (i + 120).min(999) - i.saturating_sub(120) + 1;
            assert_eq!(row.len(), (BAND_FILL * width as f64).round() as usize);
        }
        assert_eq!(m.row(500).len(), 111);
        assert_eq!(m.row(0).len(), 56); // round(0.46 * 121)
    }

    #[test]
    fn rmat_merges_duplicates_and_skews_towards_low_vertices() {
        let spec = Spec::parse("rmat:10:4").unwrap();
        let m = spec.generate(42).unwrap();
        assert_eq!((m.nrows, m.ncols), (1024, 1024));
        check_common(&m, &spec);
        // Duplicates were merged, so fewer than the 4096 generated edges remain.
        assert!(m.nnz() < 4096 && m.nnz() > 2000, "nnz {}", m.nnz());
        // Power law: vertex 0 has the longest row, far above the mean of ~4.
        let longest = (0..1024).map(|i| m.row(i).len()).max().unwrap();
        assert_eq!(m.row(0).len(), longest);
        assert!(longest > 50, "longest row {longest}");
        // Directed: the pattern is not symmetric.
        assert!((0..1024).any(|i| (0..1024).any(|j| has(&m, i, j) != has(&m, j, i))));
    }

    #[test]
    fn delaunay_is_a_symmetric_planar_mesh_of_degree_about_six() {
        for n in [400usize, 97] {
            let spec = Spec::Delaunay { n };
            let m = spec.generate(42).unwrap();
            assert_eq!((m.nrows, m.ncols), (n, n));
            check_common(&m, &spec);
            let mut edges = 0;
            for i in 0..n {
                assert!(has(&m, i, i), "diagonal {i}");
                for j in 0..n {
                    assert_eq!(has(&m, i, j), has(&m, j, i), "symmetric ({i}, {j})");
                    edges += usize::from(i < j && has(&m, i, j));
                }
            }
            // A triangulation: E = 3n - 3 - (hull points) <= 3n - 6, so the
            // average degree is a bit below 6.
            let degree = 2.0 * edges as f64 / n as f64;
            assert!(degree > 5.0 && degree < 6.0, "n {n}: degree {degree}");
            assert!(edges <= 3 * n - 6, "planar");
        }
    }

    #[test]
    fn delaunay_matches_the_empty_circle_definition() {
        // Brute force on a few points: (a, b) is an edge when some triangle
        // (a, b, c) has a circumcircle with no other point inside.
        // Sizes and seeds include cases with nearly flat hull triangles.
        for (n, seed) in [(40, 5), (46, 8), (120, 3)] {
            let m = delaunay(n, seed);
            let side = (n as f64).sqrt();
            let pts: Vec<(f64, f64)> = (0..n as u64)
                .map(|i| {
                    (
                        unit(hash3(seed, tag::DELAUNAY, 2 * i)) * side,
                        unit(hash3(seed, tag::DELAUNAY, 2 * i + 1)) * side,
                    )
                })
                .collect();
            let in_circle = |a: (f64, f64), b: (f64, f64), c: (f64, f64), d: (f64, f64)| {
                // > 0 when d is inside the circle through a, b, c (counter-clockwise).
                let (ax, ay) = (a.0 - d.0, a.1 - d.1);
                let (bx, by) = (b.0 - d.0, b.1 - d.1);
                let (cx, cy) = (c.0 - d.0, c.1 - d.1);
                (ax * ax + ay * ay) * (bx * cy - cx * by)
                    - (bx * bx + by * by) * (ax * cy - cx * ay)
                    + (cx * cx + cy * cy) * (ax * by - bx * ay)
            };
            let orient = |a: (f64, f64), b: (f64, f64), c: (f64, f64)| {
                (b.0 - a.0) * (c.1 - a.1) - (b.1 - a.1) * (c.0 - a.0)
            };
            let mut brute = vec![vec![false; n]; n];
            for a in 0..n {
                for b in a + 1..n {
                    for c in b + 1..n {
                        let (pa, mut pb, mut pc) = (pts[a], pts[b], pts[c]);
                        if orient(pa, pb, pc) < 0.0 {
                            std::mem::swap(&mut pb, &mut pc);
                        }
                        let empty = (0..n)
                            .filter(|&d| d != a && d != b && d != c)
                            .all(|d| in_circle(pa, pb, pc, pts[d]) < 0.0);
                        if empty {
                            for (x, y) in [(a, b), (b, c), (a, c)] {
                                brute[x][y] = true;
                                brute[y][x] = true;
                            }
                        }
                    }
                }
            }
            for (i, row) in brute.iter().enumerate() {
                for (j, &edge) in row.iter().enumerate() {
                    if i != j {
                        assert_eq!(has(&m, i, j), edge, "n {n}, seed {seed}: edge ({i}, {j})");
                    }
                }
            }
        }
    }

    #[test]
    fn specs_parse_and_name_safely() {
        assert_eq!(
            Spec::parse("band_r120:36000").unwrap(),
            Spec::Band { r: 120, n: 36000 }
        );
        assert_eq!(
            Spec::parse("rmat:18:4").unwrap(),
            Spec::Rmat {
                scale: 18,
                edge_factor: 4
            }
        );
        assert_eq!(
            Spec::parse("stencil2d_5pt:725").unwrap().safe_name(),
            "stencil2d_5pt_725"
        );
        assert_eq!(
            Spec::parse("/x/y/1138_bus.mtx").unwrap().safe_name(),
            "1138_bus"
        );
        assert_eq!(
            Spec::parse("dir/my matrix.mtx.gz").unwrap().safe_name(),
            "my_matrix"
        );
        for bad in [
            "stencil2d_5pt",
            "stencil2d_5pt:x",
            "nope:3",
            "rmat:18",
            "uniform_r4:2",
            "uniform_r0:10",
            "uniform_rX:10",
            "band_rX:10",
        ] {
            let e = Spec::parse(bad).unwrap_err();
            assert!(e.contains("bad matrix spec"), "{bad}: {e}");
        }
    }
}
