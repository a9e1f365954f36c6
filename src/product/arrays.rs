//! A CSR matrix by pointer ([`MatrixArrays`]): shape, arrays and their
//! types as the caller gave them, in host or device memory, and the checked
//! slices and views of host arrays.

use crate::csr::used_entries;
use crate::types::{DataType, IndexBase, IndexType};
use crate::{CsrView, Error, Index, Result, Scalar};
use std::ffi::c_void;

/// One CSR matrix by pointer, in host or device memory: its shape, its
/// three arrays and their types (what a `rusparseSpMatDescr_t` points to,
/// and what the Rust API's views become for a GPU product).
#[derive(Clone, Debug)]
pub(crate) struct MatrixArrays {
    pub(crate) rows: i64,
    pub(crate) cols: i64,
    pub(crate) nnz: i64,
    pub(crate) offsets: *mut c_void,
    pub(crate) col_ind: *mut c_void,
    pub(crate) values: *mut c_void,
    pub(crate) offset_type: IndexType,
    pub(crate) col_type: IndexType,
    pub(crate) base: IndexBase,
    pub(crate) value_type: DataType,
    /// Declared read-only (`rusparseCreateConstCsr`): rusparse never writes
    /// its arrays.
    pub(crate) constant: bool,
    /// C's values split between two arrays (`rusparseCsrSetSplitValues`):
    /// the first block's row offsets and values, then the second's.
    pub(crate) split: Option<[*mut c_void; 4]>,
}

/// Checks that `p` can hold `len` elements of `X`: non-NULL unless `len`
/// is 0, and aligned.
fn check_array<X>(p: *const c_void, len: usize, what: &str) -> Result<bool> {
    if p.is_null() {
        if len == 0 {
            return Ok(false);
        }
        return Err(Error::InvalidValue(format!("{what} is NULL")));
    }
    if p.align_offset(std::mem::align_of::<X>()) != 0 {
        return Err(Error::InvalidValue(format!(
            "{what} = {p:p} is not aligned to {} bytes",
            std::mem::align_of::<X>()
        )));
    }
    Ok(true)
}

/// A shared slice of `len` elements at `p` (checked by [`check_array`]).
///
/// # Safety
/// `p` must be NULL or point to `len` readable elements of `X` that are not
/// written during `'a`.
pub(crate) unsafe fn slice_at<'a, X>(p: *const c_void, len: usize, what: &str) -> Result<&'a [X]> {
    if !check_array::<X>(p, len, what)? {
        return Ok(&[]);
    }
    Ok(std::slice::from_raw_parts(p.cast::<X>(), len))
}

/// A mutable slice of `len` elements at `p` (checked by [`check_array`]).
///
/// # Safety
/// `p` must be NULL or point to `len` writable elements of `X` that nothing
/// else accesses during `'a`.
pub(crate) unsafe fn slice_at_mut<'a, X>(
    p: *mut c_void,
    len: usize,
    what: &str,
) -> Result<&'a mut [X]> {
    if !check_array::<X>(p, len, what)? {
        return Ok(&mut []);
    }
    Ok(std::slice::from_raw_parts_mut(p.cast::<X>(), len))
}

impl MatrixArrays {
    pub(crate) fn nrows(&self) -> usize {
        self.rows as usize
    }
    pub(crate) fn ncols(&self) -> usize {
        self.cols as usize
    }
    pub(crate) fn nnz_usize(&self) -> usize {
        self.nnz as usize
    }

    /// A view of the arrays after checking the pointers (NULL, alignment).
    /// The contents are not checked here: work estimation validates them
    /// with [`crate::validate_structure`], later phases compare a fingerprint.
    ///
    /// The view holds the entries the row offsets use,
    /// `rowOffsets[rows] - base`, when that is at most the declared nnz: a
    /// larger nnz is spare room at the end of the arrays, never read (as
    /// cuSPARSE accepts it). Otherwise it holds all nnz entries and
    /// validation reports the mismatch.
    ///
    /// `values`: whether the phase reads the values. A phase that does not
    /// (work estimation, the symbolic phase, `reuse_copy`) accepts NULL
    /// values and sees none.
    ///
    /// # Safety
    /// The descriptor's arrays must hold the sizes it states.
    pub(crate) unsafe fn view<'a, T: Scalar, I: Index, J: Index>(
        &'a self,
        name: &str,
        values: bool,
    ) -> Result<CsrView<'a, T, I, J>> {
        debug_assert_eq!(T::DATA_TYPE, self.value_type);
        debug_assert_eq!(I::INDEX_TYPE, self.offset_type);
        debug_assert_eq!(J::INDEX_TYPE, self.col_type);
        if self.offsets.is_null() {
            return Err(Error::InvalidValue(format!("{name} rowOffsets is NULL")));
        }
        let m = self.nrows();
        let offsets: &[I] = slice_at(self.offsets, m + 1, &format!("{name} rowOffsets"))?;
        let nnz = used_entries(offsets[m].to_i64(), self.base.offset() as i64, self.nnz) as usize;
        let cols: &[J] = slice_at(self.col_ind, nnz, &format!("{name} colInd"))?;
        let vals: &[T] = if values || !self.values.is_null() {
            slice_at(self.values, nnz, &format!("{name} values"))?
        } else {
            &[]
        };
        Ok(CsrView::from_checked(
            m,
            self.ncols(),
            offsets,
            cols,
            vals,
            self.base,
        ))
    }
}
