//! The benchmark's own type-agnostic CSR matrix (what the generators and the
//! Matrix Market reader produce), and its conversion to the library's
//! `CsrMatrix<T, I, I>` for the value and index type chosen on the command
//! line.

use num_complex::Complex64;
use rusparse::{Complex, CsrMatrix, Index, IndexBase, Scalar};

/// Stored values: real (generated matrices, real/integer/pattern files) or
/// complex (complex Matrix Market files).
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// Real values.
    Real(Vec<f64>),
    /// Complex values.
    Complex(Vec<Complex64>),
}

impl Values {
    /// Number of stored values.
    pub fn len(&self) -> usize {
        match self {
            Values::Real(v) => v.len(),
            Values::Complex(v) => v.len(),
        }
    }
}

/// A zero-based CSR matrix with sorted, duplicate-free columns in each row.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseMatrix {
    /// Number of rows.
    pub nrows: usize,
    /// Number of columns.
    pub ncols: usize,
    /// Row offsets, `nrows + 1` entries starting at 0.
    pub indptr: Vec<usize>,
    /// Column indices.
    pub indices: Vec<usize>,
    /// Values, one per column index.
    pub values: Values,
}

impl SparseMatrix {
    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }

    /// Whether the values are complex.
    pub fn is_complex(&self) -> bool {
        matches!(self.values, Values::Complex(_))
    }

    /// Columns of row `i`.
    pub fn row(&self, i: usize) -> &[usize] {
        &self.indices[self.indptr[i]..self.indptr[i + 1]]
    }

    /// True when every row's columns strictly increase and lie in range and
    /// the offsets are consistent (used by the tests).
    pub fn is_canonical(&self) -> bool {
        self.indptr.len() == self.nrows + 1
            && self.indptr[0] == 0
            && self.indptr[self.nrows] == self.nnz()
            && self.values.len() == self.nnz()
            && self.indptr.windows(2).all(|w| w[0] <= w[1])
            && (0..self.nrows).all(|i| {
                let r = self.row(i);
                r.windows(2).all(|w| w[0] < w[1]) && r.last().is_none_or(|&c| c < self.ncols)
            })
    }

    /// The library matrix with value type `T` and index type `I` (for both
    /// row offsets and columns).
    ///
    /// Real values become complex values with a zero imaginary part. Complex
    /// values with a real `T` are refused.
    pub fn to_csr<T: BenchScalar, I: Index>(&self) -> Result<CsrMatrix<T, I, I>, String> {
        if self.is_complex() && !T::IS_COMPLEX {
            return Err(format!(
                "the matrix has complex values but --value {} is real; use --value c32 or c64",
                T::NAME
            ));
        }
        let fits = |v: usize, what: &str| {
            I::try_from_usize(v).ok_or_else(|| {
                format!(
                    "{what} {v} does not fit the index type {}; use --index i64",
                    index_name::<I>()
                )
            })
        };
        fits(self.nrows.max(self.ncols), "the dimension")?;
        let offsets = self
            .indptr
            .iter()
            .map(|&o| fits(o, "the row offset"))
            .collect::<Result<Vec<I>, String>>()?;
        let cols: Vec<I> = self
            .indices
            .iter()
            .map(|&c| I::from_usize_unchecked(c))
            .collect();
        let vals: Vec<T> = match &self.values {
            Values::Real(v) => v.iter().map(|&x| T::from_real(x)).collect(),
            Values::Complex(v) => v.iter().map(|&x| T::from_complex(x)).collect(),
        };
        CsrMatrix::try_from_parts(self.nrows, self.ncols, offsets, cols, vals, IndexBase::Zero)
            .map_err(|e| format!("could not build the CSR matrix: {e}"))
    }
}

/// The value types the benchmark runs, with the conversions it needs.
pub trait BenchScalar: Scalar {
    /// The command-line name (`f32`, `f64`, `c32`, `c64`).
    const NAME: &'static str;
    /// Whether the type is complex.
    const IS_COMPLEX: bool;
    /// From a real value (complex types get a zero imaginary part).
    fn from_real(v: f64) -> Self;
    /// From a complex value (real types keep the real part; callers refuse
    /// complex input for real types before calling this).
    fn from_complex(v: Complex64) -> Self;
    /// As a double-precision complex number.
    fn to_c64(self) -> Complex64;
}

impl BenchScalar for f32 {
    const NAME: &'static str = "f32";
    const IS_COMPLEX: bool = false;
    fn from_real(v: f64) -> Self {
        v as f32
    }
    fn from_complex(v: Complex64) -> Self {
        v.re as f32
    }
    fn to_c64(self) -> Complex64 {
        Complex64::new(self as f64, 0.0)
    }
}

impl BenchScalar for f64 {
    const NAME: &'static str = "f64";
    const IS_COMPLEX: bool = false;
    fn from_real(v: f64) -> Self {
        v
    }
    fn from_complex(v: Complex64) -> Self {
        v.re
    }
    fn to_c64(self) -> Complex64 {
        Complex64::new(self, 0.0)
    }
}

impl BenchScalar for Complex<f32> {
    const NAME: &'static str = "c32";
    const IS_COMPLEX: bool = true;
    fn from_real(v: f64) -> Self {
        Complex::new(v as f32, 0.0)
    }
    fn from_complex(v: Complex64) -> Self {
        Complex::new(v.re as f32, v.im as f32)
    }
    fn to_c64(self) -> Complex64 {
        Complex64::new(self.re as f64, self.im as f64)
    }
}

impl BenchScalar for Complex<f64> {
    const NAME: &'static str = "c64";
    const IS_COMPLEX: bool = true;
    fn from_real(v: f64) -> Self {
        Complex::new(v, 0.0)
    }
    fn from_complex(v: Complex64) -> Self {
        v
    }
    fn to_c64(self) -> Complex64 {
        self
    }
}

/// The command-line name of an index type (`i32`, `i64`).
pub fn index_name<I: Index>() -> &'static str {
    match I::INDEX_TYPE {
        rusparse::IndexType::I32 => "i32",
        rusparse::IndexType::I64 => "i64",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> SparseMatrix {
        // [[1, 0, 2], [0, 0, 0], [0, -3, 0]]
        SparseMatrix {
            nrows: 3,
            ncols: 3,
            indptr: vec![0, 2, 2, 3],
            indices: vec![0, 2, 1],
            values: Values::Real(vec![1.0, 2.0, -3.0]),
        }
    }

    #[test]
    fn conversion_keeps_the_structure_and_values() {
        let m = small();
        assert!(m.is_canonical());
        let c = m.to_csr::<f32, i64>().unwrap();
        assert_eq!(c.row_offsets(), &[0, 2, 2, 3]);
        assert_eq!(c.col_indices(), &[0, 2, 1]);
        assert_eq!(c.values(), &[1.0f32, 2.0, -3.0]);
        let z = m.to_csr::<Complex<f64>, i32>().unwrap();
        assert_eq!(z.values()[2], Complex::new(-3.0, 0.0));
    }

    #[test]
    fn complex_values_need_a_complex_type() {
        let mut m = small();
        m.values = Values::Complex(vec![Complex64::new(1.0, 1.0); 3]);
        let e = m.to_csr::<f64, i32>().unwrap_err();
        assert!(
            e.contains("complex") && e.contains("--value c32 or c64"),
            "{e}"
        );
        let z = m.to_csr::<Complex<f32>, i32>().unwrap();
        assert_eq!(z.values()[0], Complex::new(1.0f32, 1.0));
    }

    #[test]
    fn unsorted_rows_are_not_canonical() {
        let mut m = small();
        m.indices = vec![2, 0, 1];
        assert!(!m.is_canonical());
    }
}
