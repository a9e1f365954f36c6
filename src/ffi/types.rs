//! The C types of the ABI: status and option enums with cuSPARSE's numbers,
//! and the opaque handle types.
//!
//! Enums that C passes *in* are received as plain `c_int` (the `*Arg`
//! aliases, which cbindgen renames to the enum's name in the header), so a
//! value outside the enum is reported as INVALID_VALUE instead of being
//! undefined behaviour in Rust.

#![allow(non_camel_case_types)]

use crate::types::{Algorithm, BackendKind, DataType, IndexBase, IndexType, Op};
use crate::Error;
use std::ffi::c_int;

/// Status returned by every function (same numbers as `cusparseStatus_t`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum rusparseStatus_t {
    /// The call succeeded.
    RUSPARSE_STATUS_SUCCESS = 0,
    /// NULL or uninitialised handle.
    RUSPARSE_STATUS_NOT_INITIALIZED = 1,
    /// A host allocation failed.
    RUSPARSE_STATUS_ALLOC_FAILED = 2,
    /// An argument is invalid (see `rusparseGetLastErrorMessage`).
    RUSPARSE_STATUS_INVALID_VALUE = 3,
    /// The device architecture is not supported.
    RUSPARSE_STATUS_ARCH_MISMATCH = 4,
    /// Memory mapping failed.
    RUSPARSE_STATUS_MAPPING_ERROR = 5,
    /// A back-end operation failed while running.
    RUSPARSE_STATUS_EXECUTION_FAILED = 6,
    /// An internal error (a bug); the message says where.
    RUSPARSE_STATUS_INTERNAL_ERROR = 7,
    /// The matrix type is not supported.
    RUSPARSE_STATUS_MATRIX_TYPE_NOT_SUPPORTED = 8,
    /// A zero pivot (unused by SpGEMM).
    RUSPARSE_STATUS_ZERO_PIVOT = 9,
    /// The type, operation or back end is not supported by this build.
    RUSPARSE_STATUS_NOT_SUPPORTED = 10,
    /// A device resource ran out.
    RUSPARSE_STATUS_INSUFFICIENT_RESOURCES = 11,
}

impl rusparseStatus_t {
    /// All statuses, indexed by their number.
    pub(crate) const ALL: [rusparseStatus_t; 12] = [
        rusparseStatus_t::RUSPARSE_STATUS_SUCCESS,
        rusparseStatus_t::RUSPARSE_STATUS_NOT_INITIALIZED,
        rusparseStatus_t::RUSPARSE_STATUS_ALLOC_FAILED,
        rusparseStatus_t::RUSPARSE_STATUS_INVALID_VALUE,
        rusparseStatus_t::RUSPARSE_STATUS_ARCH_MISMATCH,
        rusparseStatus_t::RUSPARSE_STATUS_MAPPING_ERROR,
        rusparseStatus_t::RUSPARSE_STATUS_EXECUTION_FAILED,
        rusparseStatus_t::RUSPARSE_STATUS_INTERNAL_ERROR,
        rusparseStatus_t::RUSPARSE_STATUS_MATRIX_TYPE_NOT_SUPPORTED,
        rusparseStatus_t::RUSPARSE_STATUS_ZERO_PIVOT,
        rusparseStatus_t::RUSPARSE_STATUS_NOT_SUPPORTED,
        rusparseStatus_t::RUSPARSE_STATUS_INSUFFICIENT_RESOURCES,
    ];

    /// The status of an error.
    pub fn of(e: &Error) -> Self {
        Self::ALL[e.status_code() as usize]
    }
}

/// `op(X)`: `X`, `X^T` or `X^H` (all three supported for A and B).
#[repr(C)]
pub enum rusparseOperation_t {
    /// `op(X) = X`.
    RUSPARSE_OPERATION_NON_TRANSPOSE = 0,
    /// `op(X) = X^T`.
    RUSPARSE_OPERATION_TRANSPOSE = 1,
    /// `op(X) = X^H`.
    RUSPARSE_OPERATION_CONJUGATE_TRANSPOSE = 2,
}

/// Index types of row offsets and column indices (they may differ).
#[repr(C)]
pub enum rusparseIndexType_t {
    /// `uint16_t` (NOT_SUPPORTED).
    RUSPARSE_INDEX_16U = 1,
    /// `int32_t`.
    RUSPARSE_INDEX_32I = 2,
    /// `int64_t`.
    RUSPARSE_INDEX_64I = 3,
}

/// Index base: 0 (C) or 1 (Fortran).
#[repr(C)]
pub enum rusparseIndexBase_t {
    /// Indices count from 0.
    RUSPARSE_INDEX_BASE_ZERO = 0,
    /// Indices count from 1.
    RUSPARSE_INDEX_BASE_ONE = 1,
}

/// Value types, numbered as `cudaDataType`. 16-bit types are NOT_SUPPORTED.
#[repr(C)]
pub enum rusparseDataType_t {
    /// `float`.
    RUSPARSE_R_32F = 0,
    /// `double`.
    RUSPARSE_R_64F = 1,
    /// `half` (NOT_SUPPORTED).
    RUSPARSE_R_16F = 2,
    /// `float _Complex` / `{float re, im}`.
    RUSPARSE_C_32F = 4,
    /// `double _Complex` / `{double re, im}`.
    RUSPARSE_C_64F = 5,
    /// `bfloat16` (NOT_SUPPORTED).
    RUSPARSE_R_16BF = 14,
}

/// SpGEMM algorithms, numbered as `cusparseSpGEMMAlg_t`. On the CPU every
/// algorithm is deterministic (bitwise-identical results for any thread count).
#[repr(C)]
pub enum rusparseSpGEMMAlg_t {
    /// rusparse chooses.
    RUSPARSE_SPGEMM_DEFAULT = 0,
    /// Bitwise-identical results run to run.
    RUSPARSE_SPGEMM_CSR_ALG_DETERMINISTIC = 1,
    /// May be non-deterministic on a GPU.
    RUSPARSE_SPGEMM_CSR_ALG_NONDETERMINISTIC = 2,
    /// cuSPARSE's ALG1 (deterministic).
    RUSPARSE_SPGEMM_ALG1 = 3,
    /// cuSPARSE's ALG2.
    RUSPARSE_SPGEMM_ALG2 = 4,
    /// cuSPARSE's ALG3 (memory-bounded, `chunk_fraction`).
    RUSPARSE_SPGEMM_ALG3 = 5,
    /// CPU hash accumulator (rusparse extension; other back ends choose).
    RUSPARSE_SPGEMM_CPU_HASH = 100,
    /// CPU BRMerge-Precise (rusparse extension).
    RUSPARSE_SPGEMM_CPU_BRMERGE_PRECISE = 101,
    /// CPU BRMerge-Upper (rusparse extension).
    RUSPARSE_SPGEMM_CPU_BRMERGE_UPPER = 102,
    /// CPU dense accumulator (rusparse extension).
    RUSPARSE_SPGEMM_CPU_DENSE = 103,
}

/// Where alpha and beta live.
#[repr(C)]
pub enum rusparsePointerMode_t {
    /// Host memory.
    RUSPARSE_POINTER_MODE_HOST = 0,
    /// Device memory (on a CPU handle, and for host arrays on a GPU handle:
    /// also host memory).
    RUSPARSE_POINTER_MODE_DEVICE = 1,
}

/// Which back end a handle uses (rusparse extension).
#[repr(C)]
pub enum rusparseBackend_t {
    /// Decide per call from where the data lives.
    RUSPARSE_BACKEND_AUTO = 0,
    /// Multi-core CPU.
    RUSPARSE_BACKEND_CPU = 1,
    /// NVIDIA GPU.
    RUSPARSE_BACKEND_CUDA = 2,
    /// AMD GPU / Hygon DCU.
    RUSPARSE_BACKEND_HIP = 3,
}

/// Which phase's row bins `rusparseSpGEMM_getBinCounts` reports (rusparse
/// extension).
#[repr(C)]
pub enum rusparseSpGEMMBins_t {
    /// The symbolic phase's bins (counting nnz of each row of C).
    RUSPARSE_SPGEMM_BINS_SYMBOLIC = 0,
    /// The numeric phase's bins (computing each row of C).
    RUSPARSE_SPGEMM_BINS_NUMERIC = 1,
}

/// The order of C's columns within each row, set on an SpGEMM descriptor
/// with `rusparseSpGEMM_setColumnOrder` (rusparse extension; cuSPARSE
/// always sorts).
#[repr(C)]
pub enum rusparseColumnOrder_t {
    /// Increasing columns in every row (the default, as cuSPARSE).
    RUSPARSE_COLUMN_ORDER_SORTED = 0,
    /// Each row's columns in any order, deterministic for the same inputs
    /// and thread count: `rusparseSpGEMM_copy` skips sorting the rows.
    RUSPARSE_COLUMN_ORDER_ANY = 1,
}

/// How the numeric phases of a product check that A's, B's and (for
/// `rusparseSpGEMMreuse_compute`) C's patterns are the planned ones, set on
/// an SpGEMM descriptor with `rusparseSpGEMM_setPatternCheck` (rusparse
/// extension; cuSPARSE does not check).
#[repr(C)]
pub enum rusparsePatternCheck_t {
    /// A 64-bit hash of the index arrays, compared before C is written
    /// (the default).
    RUSPARSE_PATTERN_CHECK_HASH = 0,
    /// No hash: the caller vouches that the patterns did not change since
    /// work estimation (C's: since `rusparseSpGEMMreuse_copy`). Sizes are
    /// still checked and nothing is accessed outside the arrays, but a
    /// changed pattern gives wrong values or an error.
    RUSPARSE_PATTERN_CHECK_CALLER = 1,
}

/// `rusparseStatus_t` as received from C.
pub type StatusArg = c_int;
/// `rusparseOperation_t` as received from C.
pub type OperationArg = c_int;
/// `rusparseIndexType_t` as received from C.
pub type IndexTypeArg = c_int;
/// `rusparseIndexBase_t` as received from C.
pub type IndexBaseArg = c_int;
/// `rusparseDataType_t` as received from C.
pub type DataTypeArg = c_int;
/// `rusparseSpGEMMAlg_t` as received from C.
pub type SpGEMMAlgArg = c_int;
/// `rusparsePointerMode_t` as received from C.
pub type PointerModeArg = c_int;
/// `rusparseBackend_t` as received from C.
pub type BackendArg = c_int;
/// `rusparseSpGEMMBins_t` as received from C.
pub type SpGEMMBinsArg = c_int;
/// `rusparseColumnOrder_t` as received from C.
pub type ColumnOrderArg = c_int;
/// `rusparsePatternCheck_t` as received from C.
pub type PatternCheckArg = c_int;

/// Opaque library context (one per handle).
pub struct rusparseContext {
    _private: [u8; 0],
}
/// Opaque sparse matrix descriptor.
pub struct rusparseSpMatDescr {
    _private: [u8; 0],
}
/// Opaque SpGEMM descriptor (holds the plan between phases).
pub struct rusparseSpGEMMDescr {
    _private: [u8; 0],
}

/// A library handle.
pub type rusparseHandle_t = *mut rusparseContext;
/// A sparse matrix descriptor.
pub type rusparseSpMatDescr_t = *mut rusparseSpMatDescr;
/// A sparse matrix descriptor whose arrays rusparse only reads.
pub type rusparseConstSpMatDescr_t = *const rusparseSpMatDescr;
/// An SpGEMM descriptor.
pub type rusparseSpGEMMDescr_t = *mut rusparseSpGEMMDescr;

/// Decodes `opX`.
pub(crate) fn operation(v: OperationArg, name: &str) -> Result<Op, Error> {
    match v {
        0 => Ok(Op::N),
        1 => Ok(Op::T),
        2 => Ok(Op::C),
        _ => Err(Error::InvalidValue(format!(
            "{name} = {v} is not a rusparseOperation_t"
        ))),
    }
}

/// Decodes an index type; 16U is NOT_SUPPORTED.
pub(crate) fn index_type(v: IndexTypeArg, name: &str) -> Result<IndexType, Error> {
    match v {
        2 => Ok(IndexType::I32),
        3 => Ok(IndexType::I64),
        1 => Err(Error::NotSupported(format!(
            "{name} = RUSPARSE_INDEX_16U is not supported; use RUSPARSE_INDEX_32I or RUSPARSE_INDEX_64I"
        ))),
        _ => Err(Error::InvalidValue(format!("{name} = {v} is not a rusparseIndexType_t"))),
    }
}

/// Decodes an index base.
pub(crate) fn index_base(v: IndexBaseArg, name: &str) -> Result<IndexBase, Error> {
    match v {
        0 => Ok(IndexBase::Zero),
        1 => Ok(IndexBase::One),
        _ => Err(Error::InvalidValue(format!(
            "{name} = {v} is not a rusparseIndexBase_t"
        ))),
    }
}

/// Decodes a value type; known but unsupported types are NOT_SUPPORTED.
pub(crate) fn data_type(v: DataTypeArg, name: &str) -> Result<DataType, Error> {
    match v {
        0 => Ok(DataType::R32F),
        1 => Ok(DataType::R64F),
        4 => Ok(DataType::C32F),
        5 => Ok(DataType::C64F),
        2 | 6 | 14 | 15 => Err(Error::NotSupported(format!(
            "{name} = {v} is a 16-bit type, which rusparse does not support yet"
        ))),
        // The other `cudaDataType` numbers (integer and 8-bit types).
        3 | 7..=13 | 16..=33 => Err(Error::NotSupported(format!(
            "{name} = {v} is not a supported value type (R_32F, R_64F, C_32F, C_64F)"
        ))),
        _ => Err(Error::InvalidValue(format!(
            "{name} = {v} is not a rusparseDataType_t"
        ))),
    }
}

/// Decodes an SpGEMM algorithm.
pub(crate) fn algorithm(v: SpGEMMAlgArg) -> Result<Algorithm, Error> {
    Ok(match v {
        0 => Algorithm::Default,
        1 => Algorithm::Deterministic,
        2 => Algorithm::NonDeterministic,
        3 => Algorithm::Alg1,
        4 => Algorithm::Alg2,
        5 => Algorithm::Alg3,
        100 => Algorithm::Hash,
        101 => Algorithm::BrmergePrecise,
        102 => Algorithm::BrmergeUpper,
        103 => Algorithm::Dense,
        _ => {
            return Err(Error::InvalidValue(format!(
                "alg = {v} is not a rusparseSpGEMMAlg_t"
            )))
        }
    })
}

/// Decodes a back end.
pub(crate) fn backend(v: BackendArg) -> Result<BackendKind, Error> {
    Ok(match v {
        0 => BackendKind::Auto,
        1 => BackendKind::Cpu,
        2 => BackendKind::Cuda,
        3 => BackendKind::Hip,
        _ => {
            return Err(Error::InvalidValue(format!(
                "backend = {v} is not a rusparseBackend_t"
            )))
        }
    })
}

/// The C number of a back end.
pub(crate) fn backend_number(b: BackendKind) -> BackendArg {
    match b {
        BackendKind::Auto => 0,
        BackendKind::Cpu => 1,
        BackendKind::Cuda => 2,
        BackendKind::Hip => 3,
    }
}
