//! `--dump DIR`: the inputs of each case, and a check of rusparse's C, as
//! NumPy files for the peer script.
//!
//! `DIR/<name>/` receives `A_indptr.npy`, `A_indices.npy` (int64),
//! `A_data.npy` (float64, or complex128 for complex value types), the same
//! three `B_*` files for `--product ab`, `shape.json`, and `check_x.npy` /
//! `check_y.npy`: `x_j = 1 + (j mod 7) / 8` of length ncols(C) (float64) and
//! `y = C x` computed from rusparse's C in float64 / complex128. The values
//! written are the ones rusparse multiplied (after rounding to f32 for the
//! single-precision types).

use crate::npy;
use crate::sparse::BenchScalar;
use num_complex::Complex64;
use rusparse::{CsrMatrix, Index};
use serde_json::json;
use std::path::Path;

/// `x_j = 1 + (j mod 7) / 8`.
pub fn check_x(n: usize) -> Vec<f64> {
    (0..n).map(|j| 1.0 + (j % 7) as f64 / 8.0).collect()
}

/// `y = C x` in double precision (complex when `T` is).
pub fn check_y<T: BenchScalar, I: Index>(c: &CsrMatrix<T, I, I>, x: &[f64]) -> Vec<Complex64> {
    let (ro, ci, v) = (c.row_offsets(), c.col_indices(), c.values());
    (0..c.nrows())
        .map(|i| {
            (ro[i].to_usize()..ro[i + 1].to_usize())
                .map(|k| v[k].to_c64() * x[ci[k].to_usize()])
                .sum()
        })
        .collect()
}

fn write_matrix<T: BenchScalar, I: Index>(
    dir: &Path,
    prefix: &str,
    m: &CsrMatrix<T, I, I>,
) -> Result<(), String> {
    npy::write(
        &dir.join(format!("{prefix}_indptr.npy")),
        m.row_offsets().iter().map(|o| o.to_i64()),
    )?;
    npy::write(
        &dir.join(format!("{prefix}_indices.npy")),
        m.col_indices().iter().map(|c| c.to_i64()),
    )?;
    write_values(
        &dir.join(format!("{prefix}_data.npy")),
        m.values().iter().map(|v| v.to_c64()),
        T::IS_COMPLEX,
    )
}

fn write_values(
    path: &Path,
    values: impl ExactSizeIterator<Item = Complex64>,
    complex: bool,
) -> Result<(), String> {
    if complex {
        npy::write(path, values)
    } else {
        npy::write(path, values.map(|z| z.re))
    }
}

/// Writes the files of one case into `dir/name/`.
pub fn write_case<T: BenchScalar, I: Index>(
    dir: &Path,
    name: &str,
    product: &str,
    a: &CsrMatrix<T, I, I>,
    b: Option<&CsrMatrix<T, I, I>>,
    c: &CsrMatrix<T, I, I>,
) -> Result<(), String> {
    let dir = dir.join(name);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    write_matrix(&dir, "A", a)?;
    let mut shape = json!({
        "rows": a.nrows(),
        "cols": a.ncols(),
        "product": product,
        "c_rows": c.nrows(),
        "c_cols": c.ncols(),
        "nnz_c": c.nnz(),
        "value": T::NAME,
    });
    if let Some(b) = b {
        write_matrix(&dir, "B", b)?;
        shape["b_rows"] = b.nrows().into();
        shape["b_cols"] = b.ncols().into();
    }
    let path = dir.join("shape.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&shape).map_err(|e| e.to_string())? + "\n",
    )
    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let x = check_x(c.ncols());
    let y = check_y(c, &x);
    npy::write(&dir.join("check_x.npy"), x.iter().copied())?;
    write_values(&dir.join("check_y.npy"), y.into_iter(), T::IS_COMPLEX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusparse::{Complex, IndexBase};

    #[test]
    fn check_vector_and_product() {
        assert_eq!(
            check_x(9),
            [1.0, 1.125, 1.25, 1.375, 1.5, 1.625, 1.75, 1.0, 1.125]
        );
        // C = [[1, 0, 2], [0, 0, -1]]: y = [1 + 2 * 1.25, -1.25].
        let c = CsrMatrix::<f32, i64, i64>::from_triplets(
            2,
            3,
            &[(0, 0, 1.0), (0, 2, 2.0), (1, 2, -1.0)],
            IndexBase::Zero,
        )
        .unwrap();
        let y = check_y(&c, &check_x(3));
        assert_eq!(y, [Complex64::new(3.5, 0.0), Complex64::new(-1.25, 0.0)]);
    }

    #[test]
    fn writes_every_file_of_a_case() {
        let dir = std::env::temp_dir().join(format!("rusparse-bench-dump-{}", std::process::id()));
        let a = CsrMatrix::<Complex<f64>, i32, i32>::from_triplets(
            1,
            2,
            &[(0, 1, Complex::new(1.0, 2.0))],
            IndexBase::Zero,
        )
        .unwrap();
        write_case(&dir, "m", "ab", &a, Some(&a), &a).unwrap();
        let case = dir.join("m");
        for f in [
            "A_indptr.npy",
            "A_indices.npy",
            "A_data.npy",
            "B_indptr.npy",
            "B_indices.npy",
            "B_data.npy",
            "check_x.npy",
            "check_y.npy",
        ] {
            assert!(case.join(f).exists(), "{f}");
        }
        let data = std::fs::read(case.join("A_data.npy")).unwrap();
        let header = 10 + u16::from_le_bytes([data[8], data[9]]) as usize;
        assert!(std::str::from_utf8(&data[10..header])
            .unwrap()
            .contains("'<c16'"));
        assert_eq!(data.len(), header + 16);
        assert_eq!(
            f64::from_le_bytes(data[header + 8..].try_into().unwrap()),
            2.0
        );
        let shape: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(case.join("shape.json")).unwrap())
                .unwrap();
        assert_eq!(shape["rows"], 1);
        assert_eq!(shape["cols"], 2);
        assert_eq!(shape["product"], "ab");
        assert_eq!(shape["b_cols"], 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
