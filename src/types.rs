//! Value types, index types and the small enums of the Rust API.

use num_complex::Complex;
use std::fmt::Debug;
use std::ops::{Add, AddAssign, Mul};

/// The value types rusparse multiplies: `f32`, `f64`, `Complex<f32>`, `Complex<f64>`.
pub trait Scalar:
    Copy
    + Send
    + Sync
    + Debug
    + PartialEq
    + Default
    + Add<Output = Self>
    + AddAssign
    + Mul<Output = Self>
    + 'static
{
    /// The matching C `rusparseDataType_t`.
    const DATA_TYPE: DataType;
    /// The additive identity.
    fn zero() -> Self;
    /// The multiplicative identity.
    fn one() -> Self;
    /// The complex conjugate (identity for real types).
    fn conj(self) -> Self;
    /// `|self|` as an `f64`, used for error bounds in tests and checks.
    fn magnitude(self) -> f64;
    /// The bits of the value folded into 64 bits (for value fingerprints).
    fn hash_bits(self) -> u64;
    /// The value where `keep`, else zero, chosen by a mask on its bits
    /// rather than a branch, for sums restarted where the data say (which
    /// products of a row share a column). Where `keep` the bits are
    /// `self`'s; else `+0.0`, as [`Scalar::zero`].
    #[doc(hidden)]
    #[inline(always)]
    fn zero_unless(self, keep: bool) -> Self {
        if keep {
            self
        } else {
            Self::zero()
        }
    }
}

macro_rules! real_scalar {
    ($t:ty, $bits:ty, $dt:expr) => {
        impl Scalar for $t {
            const DATA_TYPE: DataType = $dt;
            #[inline]
            fn zero() -> Self {
                0.0
            }
            #[inline]
            fn one() -> Self {
                1.0
            }
            #[inline]
            fn conj(self) -> Self {
                self
            }
            #[inline]
            fn magnitude(self) -> f64 {
                (self as f64).abs()
            }
            #[inline]
            fn hash_bits(self) -> u64 {
                self.to_bits() as u64
            }
            #[inline(always)]
            fn zero_unless(self, keep: bool) -> Self {
                // Through `black_box`: the compiler otherwise sees the
                // mask's `bool` and makes the `and` a branch again.
                let mask = std::hint::black_box(<$bits>::from(keep).wrapping_neg());
                <$t>::from_bits(self.to_bits() & mask)
            }
        }
    };
}
real_scalar!(f32, u32, DataType::R32F);
real_scalar!(f64, u64, DataType::R64F);

macro_rules! complex_scalar {
    ($t:ty, $dt:expr) => {
        impl Scalar for Complex<$t> {
            const DATA_TYPE: DataType = $dt;
            #[inline]
            fn zero() -> Self {
                Complex::new(0.0, 0.0)
            }
            #[inline]
            fn one() -> Self {
                Complex::new(1.0, 0.0)
            }
            #[inline]
            fn conj(self) -> Self {
                Complex::conj(&self)
            }
            #[inline]
            fn magnitude(self) -> f64 {
                (self.re as f64).hypot(self.im as f64)
            }
            #[inline]
            fn hash_bits(self) -> u64 {
                (self.re.to_bits() as u64) ^ (self.im.to_bits() as u64).rotate_left(32)
            }
            #[inline(always)]
            fn zero_unless(self, keep: bool) -> Self {
                Complex::new(self.re.zero_unless(keep), self.im.zero_unless(keep))
            }
        }
    };
}
complex_scalar!(f32, DataType::C32F);
complex_scalar!(f64, DataType::C64F);

/// The index types of row offsets and column indices: `i32` and `i64`.
///
/// A row-offset array and a column-index array may use different types
/// (e.g. `i64` offsets with `i32` columns).
pub trait Index: Copy + Send + Sync + Debug + Ord + Default + 'static {
    /// The matching C `rusparseIndexType_t`.
    const INDEX_TYPE: IndexType;
    /// The largest value the type holds, as `u64`.
    const MAX: u64;
    /// The value as `i64` (always exact).
    fn to_i64(self) -> i64;
    /// Converts a non-negative `usize` known to fit (checked by the caller
    /// against [`Index::MAX`]); truncates otherwise.
    fn from_usize_unchecked(v: usize) -> Self;
    /// The value as `usize`; negative values map to `usize::MAX` so that
    /// range checks reject them.
    #[inline]
    fn to_usize(self) -> usize {
        usize::try_from(self.to_i64()).unwrap_or(usize::MAX)
    }
    /// The value as `usize` without a range check: for indices already
    /// validated as non-negative (the hot loops of the kernels).
    #[inline(always)]
    fn as_usize(self) -> usize {
        self.to_i64() as usize
    }
    /// Converts when the value fits.
    #[inline]
    fn try_from_usize(v: usize) -> Option<Self> {
        (v as u64 <= Self::MAX).then(|| Self::from_usize_unchecked(v))
    }
}

impl Index for i32 {
    const INDEX_TYPE: IndexType = IndexType::I32;
    const MAX: u64 = i32::MAX as u64;
    #[inline]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline]
    fn from_usize_unchecked(v: usize) -> Self {
        v as i32
    }
}

impl Index for i64 {
    const INDEX_TYPE: IndexType = IndexType::I64;
    const MAX: u64 = i64::MAX as u64;
    #[inline]
    fn to_i64(self) -> i64 {
        self
    }
    #[inline]
    fn from_usize_unchecked(v: usize) -> Self {
        v as i64
    }
}

/// The operation applied to an operand: `op(X)` is `X`, `Xᵀ` or `Xᴴ`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Op {
    /// `op(X) = X`.
    #[default]
    N,
    /// `op(X) = Xᵀ`.
    T,
    /// `op(X) = Xᴴ` (the conjugate transpose; `Xᵀ` for real types).
    C,
}

impl Op {
    /// Whether the operand's rows and columns swap.
    pub fn transposes(self) -> bool {
        !matches!(self, Op::N)
    }
}

/// Whether indices count from 0 (C) or 1 (Fortran).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum IndexBase {
    /// Indices start at 0.
    #[default]
    Zero,
    /// Indices start at 1.
    One,
}

impl IndexBase {
    /// 0 or 1.
    #[inline]
    pub fn offset(self) -> usize {
        match self {
            IndexBase::Zero => 0,
            IndexBase::One => 1,
        }
    }
}

/// Value types as numbered by `cudaDataType` / `rusparseDataType_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataType {
    /// `f32`.
    R32F,
    /// `f64`.
    R64F,
    /// `Complex<f32>`.
    C32F,
    /// `Complex<f64>`.
    C64F,
}

impl DataType {
    /// Its number in the C API (`rusparseDataType_t`: cuSPARSE's
    /// `cudaDataType` numbers).
    pub const fn c_number(self) -> i32 {
        match self {
            DataType::R32F => 0,
            DataType::R64F => 1,
            DataType::C32F => 4,
            DataType::C64F => 5,
        }
    }

    /// Size of one value in bytes.
    pub fn size(self) -> usize {
        match self {
            DataType::R32F => 4,
            DataType::R64F | DataType::C32F => 8,
            DataType::C64F => 16,
        }
    }
    /// The C spelling, for messages.
    pub fn name(self) -> &'static str {
        match self {
            DataType::R32F => "RUSPARSE_R_32F",
            DataType::R64F => "RUSPARSE_R_64F",
            DataType::C32F => "RUSPARSE_C_32F",
            DataType::C64F => "RUSPARSE_C_64F",
        }
    }
}

/// Index types as numbered by `rusparseIndexType_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexType {
    /// `int32_t`.
    I32,
    /// `int64_t`.
    I64,
}

impl IndexType {
    /// Its number in the C API (`rusparseIndexType_t`).
    pub const fn c_number(self) -> i32 {
        match self {
            IndexType::I32 => 2,
            IndexType::I64 => 3,
        }
    }

    /// Size of one index in bytes.
    pub fn size(self) -> usize {
        match self {
            IndexType::I32 => 4,
            IndexType::I64 => 8,
        }
    }
    /// The largest representable value.
    pub fn max(self) -> u64 {
        match self {
            IndexType::I32 => i32::MAX as u64,
            IndexType::I64 => i64::MAX as u64,
        }
    }
    /// The C spelling, for messages.
    pub fn name(self) -> &'static str {
        match self {
            IndexType::I32 => "RUSPARSE_INDEX_32I",
            IndexType::I64 => "RUSPARSE_INDEX_64I",
        }
    }
}

/// The order of the column indices within each row of C.
///
/// [`ColumnOrder::Sorted`] is cuSPARSE's behaviour and the default.
/// [`ColumnOrder::Any`] (a rusparse extension, C: `rusparseSpGEMM_setColumnOrder`)
/// lets a product skip sorting its rows: each row holds the same entries,
/// in an order that is deterministic for the same inputs, plan and thread
/// count (so `beta != 0` and repeated products line up), but not sorted.
/// For users who do not need sorted rows (an SpMV next, graph analytics).
/// Only a product that writes C's columns and values together honours it
/// (`CsrOutput::full`, [`crate::Context::spgemm`], the C ABI's
/// `rusparseSpGEMM_copy`); structure-only and values-only outputs (the reuse
/// flow) stay sorted, and so does every GPU product.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ColumnOrder {
    /// Increasing columns in every row.
    #[default]
    Sorted,
    /// Each row's columns in any (deterministic) order.
    Any,
}

/// How the phases of a planned product after the plan make sure that A's
/// and B's patterns (and, for a values-only output, C's) are still the ones
/// the plan was made for.
///
/// [`PatternCheck::Hash`] is the default: every phase that writes C
/// compares a parallel 64-bit hash of the index arrays with the plan's
/// (O(nnz), about a tenth of a short-row numeric phase). A caller that
/// already knows the patterns did not change (it owns the arrays, or
/// tracks changes as PETSc's nonzero state does) sets
/// [`PatternCheck::Caller`] (C: `rusparseSpGEMM_setPatternCheck`) and
/// skips the hashes: shapes and nnz are still checked (O(1)), C's columns
/// are still range-checked where they are read, and nothing is ever read
/// or written outside the arrays; but a pattern changed with the same nnz
/// then gives wrong values or an error, not the hash's error. The GPU back
/// ends validate their operands in their kernels and ignore it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum PatternCheck {
    /// Hash the patterns in every phase that writes C (the default).
    #[default]
    Hash,
    /// The caller vouches that the patterns are the planned ones.
    Caller,
}

/// The SpGEMM algorithms of the C API (`rusparseSpGEMMAlg_t`).
///
/// On the CPU back end every algorithm is deterministic: the same input gives
/// bitwise-identical output for any thread count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Algorithm {
    /// Let rusparse choose.
    #[default]
    Default,
    /// Bitwise-identical results run to run.
    Deterministic,
    /// May trade determinism for speed (deterministic on the CPU).
    NonDeterministic,
    /// cuSPARSE's ALG1 (deterministic).
    Alg1,
    /// cuSPARSE's ALG2.
    Alg2,
    /// cuSPARSE's ALG3 (memory-bounded, honours `chunk_fraction`).
    Alg3,
    /// CPU: hash symbolic, exact row offsets, hash numeric, then a sort of
    /// each row (rusparse extension).
    Hash,
    /// CPU: BRMerge-Precise (the BRMerge paper): hash symbolic for exact
    /// row sizes, then binary merging of the scaled rows of B straight into
    /// C.
    BrmergePrecise,
    /// CPU: BRMerge-Upper (the BRMerge paper): merges into a temporary C sized by
    /// nprod during the symbolic phase, then copies it into C.
    BrmergeUpper,
    /// CPU: dense accumulator (one array as wide as B per thread) with a bit
    /// map; for B whose columns fit in cache.
    Dense,
}

impl Algorithm {
    /// Every algorithm, the generic requests first.
    pub const fn all() -> [Algorithm; 10] {
        [
            Algorithm::Default,
            Algorithm::Deterministic,
            Algorithm::NonDeterministic,
            Algorithm::Alg1,
            Algorithm::Alg2,
            Algorithm::Alg3,
            Algorithm::Hash,
            Algorithm::Dense,
            Algorithm::BrmergePrecise,
            Algorithm::BrmergeUpper,
        ]
    }

    /// Its number in the C API (`rusparseSpGEMMAlg_t`).
    pub const fn c_number(self) -> i32 {
        match self {
            Algorithm::Default => 0,
            Algorithm::Deterministic => 1,
            Algorithm::NonDeterministic => 2,
            Algorithm::Alg1 => 3,
            Algorithm::Alg2 => 4,
            Algorithm::Alg3 => 5,
            Algorithm::Hash => 100,
            Algorithm::BrmergePrecise => 101,
            Algorithm::BrmergeUpper => 102,
            Algorithm::Dense => 103,
        }
    }

    /// True for the algorithms that name one concrete CPU method; the others
    /// leave the choice to the planner.
    pub fn is_concrete(self) -> bool {
        matches!(
            self,
            Algorithm::Hash
                | Algorithm::BrmergePrecise
                | Algorithm::BrmergeUpper
                | Algorithm::Dense
        )
    }
    /// A short lower-case name (`hash`, `brmerge-precise`, ...), as the
    /// benchmark prints it.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Default => "default",
            Algorithm::Deterministic => "deterministic",
            Algorithm::NonDeterministic => "nondeterministic",
            Algorithm::Alg1 => "alg1",
            Algorithm::Alg2 => "alg2",
            Algorithm::Alg3 => "alg3",
            Algorithm::Hash => "hash",
            Algorithm::BrmergePrecise => "brmerge-precise",
            Algorithm::BrmergeUpper => "brmerge-upper",
            Algorithm::Dense => "dense",
        }
    }
}

/// Which back end executes a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum BackendKind {
    /// Decide per call from where the data lives (host data runs on the CPU).
    #[default]
    Auto,
    /// Multi-core CPU (rayon).
    Cpu,
    /// NVIDIA GPU (not built into this version).
    Cuda,
    /// AMD GPU / Hygon DCU (not built into this version).
    Hip,
}

#[cfg(test)]
mod tests {
    use super::Scalar;
    use num_complex::Complex;

    /// `zero_unless` keeps every value's bits (a NaN's payload, -0.0,
    /// infinities, subnormals) where asked and gives +0.0 otherwise, as
    /// the `if` it replaces did, for every value type.
    #[test]
    fn zero_unless_keeps_the_bits_or_gives_plus_zero() {
        let f64s = [
            -0.0,
            1.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::from_bits(0x7ff8_dead_beef_0001),
            f64::MIN_POSITIVE / 4.0,
        ];
        for x in f64s {
            assert_eq!(x.zero_unless(true).to_bits(), x.to_bits());
            assert_eq!(x.zero_unless(false).to_bits(), 0.0f64.to_bits());
            let y = x as f32;
            assert_eq!(y.zero_unless(true).to_bits(), y.to_bits());
            assert_eq!(y.zero_unless(false).to_bits(), 0.0f32.to_bits());
            let z = Complex::new(x, -x);
            let kept = z.zero_unless(true);
            assert_eq!(
                (kept.re.to_bits(), kept.im.to_bits()),
                (x.to_bits(), (-x).to_bits())
            );
            let zero = z.zero_unless(false);
            assert_eq!((zero.re.to_bits(), zero.im.to_bits()), (0, 0));
            let w = Complex::new(y, 2.0 * y).zero_unless(false);
            assert_eq!((w.re.to_bits(), w.im.to_bits()), (0, 0));
        }
    }
}
