//! What the examples that time PETSc's numeric loop share: a CSR matrix
//! read from a Matrix Market file, and that loop written plainly in Rust.
//! Included by `#[path]` (each example has its own `matrix_market` module).

use super::matrix_market;

/// Row offsets, columns, values, rows and columns, zero-based `i32`.
pub type Csr = (Vec<i32>, Vec<i32>, Vec<f64>, usize, usize);

/// A real Matrix Market file (gzipped or not) as [`Csr`].
pub fn read(path: &str) -> Csr {
    let x = matrix_market::read_path(std::path::Path::new(path))
        .and_then(|x| x.to_csr::<f64, i32>())
        .expect("a readable real Matrix Market file");
    let (m, n) = (x.nrows(), x.ncols());
    let (offsets, cols, vals) = x.into_parts();
    (offsets, cols, vals, m, n)
}

/// Reads row `i` of C (offsets `co`, columns `cc`) out of the dense
/// accumulator `d` into `cv`, zeroing what it read.
#[inline(always)]
pub fn gather(i: usize, (co, cc): (&[i32], &[i32]), cv: &mut [f64], d: &mut [f64]) {
    for e in co[i] as usize..co[i + 1] as usize {
        let j = cc[e] as usize;
        cv[e] = d[j];
        d[j] = 0.0;
    }
}

/// PETSc's numeric phase on C's known sorted structure
/// (`MatMatMultNumeric_SeqAIJ_SeqAIJ_Sorted`): each row's products added
/// into the dense accumulator `dense` (as wide as B), then gathered at C's
/// columns.
#[inline(never)]
pub fn petsc_numeric(a: &Csr, b: &Csr, c: (&[i32], &[i32], &mut [f64]), dense: &mut [f64]) {
    let (co, cc, cv) = c;
    for i in 0..a.3 {
        for k in a.0[i] as usize..a.0[i + 1] as usize {
            let (r, f) = (a.1[k] as usize, a.2[k]);
            for e in b.0[r] as usize..b.0[r + 1] as usize {
                dense[b.1[e] as usize] += f * b.2[e];
            }
        }
        gather(i, (co, cc), cv, dense);
    }
}
