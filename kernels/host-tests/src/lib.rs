//! Host-emulated GPU kernels (see `kernels/README.md`, "Host emulation").
//!
//! `build.rs` compiles the kernels in `kernels/*.cu` as host C++ against
//! `kernels/testing/host.h`, which emulates blocks, threads, shared memory,
//! barriers, atomics and warp operations with one fiber per GPU thread. The
//! tests in `tests/` run them and compare with sequential code or with
//! rusparse's reference SpGEMM.
//!
//! # Variants
//!
//! One compilation serves one combination of types and warp width, as on a
//! device. Each *variant* is compiled separately (its own `-D RS_VALUE`,
//! `RS_OFFSET64`, `RS_INDEX64`, `RS_WARP`) and all are linked together; its
//! suffix, `<value>_<offset>_<index>_w<warp>`, ends the name of every host
//! entry point it exports:
//!
//! | type here | suffix | value | offsets | columns | warp |
//! |---|---|---|---|---|---|
//! | [`F64I32I32W32`] | `f64_i32_i32_w32` | f64 | i32 | i32 | 32 |
//! | [`F64I32I32W64`] | `f64_i32_i32_w64` | f64 | i32 | i32 | 64 |
//! | [`F32I64I32W32`] | `f32_i64_i32_w32` | f32 | i64 | i32 | 32 |
//! | [`C64I64I64W64`] | `c64_i64_i64_w64` | c64 | i64 | i64 | 64 |
//! | [`C32I32I64W32`] | `c32_i32_i64_w32` | c32 | i32 | i64 | 32 |
//!
//! The list lives in `for_each_variant!` below and in `VARIANTS` in
//! `build.rs`; keep them in step (a variant missing from `build.rs` is a
//! link error).
//!
//! # Launchers
//!
//! A launcher file `kernels/testing/launch_<name>.cpp` defines, for kernel
//! `rs_x`, the host entry point
//!
//! ```c
//! extern "C" void RS_HOST_FN(rs_host_x)(long long grid, long long block,
//!                                       long long shared, /* rs_x's arguments */) {
//!   rs_host::launch(grid, block, shared, [&] { rs_x(/* arguments */); });
//! }
//! ```
//!
//! where `RS_HOST_FN(rs_host_x)` expands to `rs_host_x_<suffix>`. `build.rs`
//! compiles every launcher for every variant, in one translation unit per
//! variant after `portability.h` and all `kernels/*.cu`. On the Rust side a
//! module per launcher (here [`scan_binning`], [`emulator`], [`hash`],
//! [`transpose`]) lists its entry points once, in a `macro_rules!` list
//! (`raw_x = x(parameters after the launch geometry);`, types written with
//! `$V` for the variant). `launcher_trait!` makes the trait from that list
//! (one `unsafe fn raw_x(l: Launch, ...)` each) and `launcher_impl!`, called
//! per variant by `for_each_variant!(launchers_for_variant, ...)`,
//! implements it: each method declares `rs_host_x_<suffix>` and forwards
//! the geometry and its arguments. The
//! module then wraps the entry points in safe functions generic over the
//! variant. Adding a launcher: write the `.cpp`, add such a module, and add
//! its trait to [`Kernels`].

use std::fmt::Debug;
use std::marker::PhantomData;

pub use rusparse::{Complex, Index, Scalar};

/// The test support of rusparse's own tests (`tests/support`): the value
/// types' [`TestValue`], the generator [`Rng`] and the random rows of test
/// matrices, the proptest configuration and the skip reports.
#[path = "../../../tests/support/mod.rs"]
pub mod support;

pub use support::{Rng, TestValue};

/// `Complex<f64>` in one token (for `for_each_variant!`).
pub type C64 = Complex<f64>;
/// `Complex<f32>` in one token.
pub type C32 = Complex<f32>;

/// Calls `$m!(Type, "suffix", value, offset, index, warp)` for every
/// variant (`$m!(extra..., Type, ...)` with extra arguments). Keep in step
/// with `VARIANTS` in `build.rs`.
macro_rules! for_each_variant {
    ($m:ident $(, $extra:tt)*) => {
        $m!($($extra,)* F64I32I32W32, "f64_i32_i32_w32", f64, i32, i32, 32);
        $m!($($extra,)* F64I32I32W64, "f64_i32_i32_w64", f64, i32, i32, 64);
        $m!($($extra,)* F32I64I32W32, "f32_i64_i32_w32", f32, i64, i32, 32);
        $m!($($extra,)* C64I64I64W64, "c64_i64_i64_w64", $crate::C64, i64, i64, 64);
        $m!($($extra,)* C32I32I64W32, "c32_i32_i64_w32", $crate::C32, i32, i64, 32);
    };
}

/// A launcher trait from a list of entry points (see the module docs,
/// "Launchers"): `pub trait Name(geometry);` then `raw_x = x(params);`
/// per entry point; one `unsafe fn raw_x(l: Launch, params)` each.
macro_rules! launcher_trait {
    (
        $(#[$attr:meta])*
        pub trait $trait:ident $geometry:tt;
        $( $method:ident = $c:ident ($($arg:ident : $ty:ty),* $(,)?); )*
    ) => {
        $(#[$attr])*
        #[allow(clippy::too_many_arguments, clippy::missing_safety_doc, missing_docs)]
        pub trait $trait: $crate::Variant {
            $( unsafe fn $method(l: $crate::Launch, $($arg: $ty),*); )*
        }
    };
}

/// The implementation of a launcher trait for one variant, from the same
/// list as [`launcher_trait`]: each method declares the C entry point
/// `rs_host_<x>_<suffix>` (the launch geometry's fields, then the
/// parameters) and forwards to it.
macro_rules! launcher_impl {
    (
        $trait:ident for $variant:ty, $sfx:literal $geometry:tt;
        $( $method:ident = $c:ident ($($arg:ident : $ty:ty),* $(,)?); )*
    ) => {
        impl $trait for $variant {
            $(
                unsafe fn $method(l: $crate::Launch, $($arg: $ty),*) {
                    launcher_call!(l $geometry $c $sfx; $($arg: $ty),*)
                }
            )*
        }
    };
}

/// Implements launcher trait `$trait`, listed by `$list` with launch
/// geometry `$geometry`, for one variant (a `for_each_variant!` callback:
/// `for_each_variant!(launchers_for_variant, list, Trait, (grid, ...))`).
macro_rules! launchers_for_variant {
    ($list:ident, $trait:ident, $geometry:tt, $name:ident, $sfx:literal, $($types:tt)*) => {
        $list!(launcher_impl { $trait for crate::$name, $sfx $geometry; } crate::$name);
    };
}

/// The body of one [`launcher_impl`] method.
macro_rules! launcher_call {
    ($l:ident ($($g:ident),*) $c:ident $sfx:literal; $($arg:ident : $ty:ty),*) => {{
        extern "C" {
            #[link_name = concat!("rs_host_", stringify!($c), "_", $sfx)]
            fn f($($g: i64,)* $($arg: $ty),*);
        }
        unsafe { f($($l.$g,)* $($arg),*) }
    }};
}

pub mod device;
pub mod emulator;
pub mod hash;
pub mod scan_binning;
pub mod transpose;

/// `KernelCsr` in a variant's types.
pub type Csr<'a, V> = KernelCsr<'a, OffsetOf<V>, IndexOf<V>, ValueOf<V>>;
/// A variant's `value_t`.
pub type ValueOf<V> = <V as Variant>::Value;
/// A variant's `offset_t`.
pub type OffsetOf<V> = <V as Variant>::Offset;
/// A variant's `index_t`.
pub type IndexOf<V> = <V as Variant>::Index;

/// One compilation of the kernels: its types and warp width.
pub trait Variant: Send + Sync + 'static {
    /// `value_t`.
    type Value: TestValue;
    /// `offset_t`: row offsets of A, B and C.
    type Offset: Index;
    /// `index_t`: column indices.
    type Index: Index;
    /// `RS_WARP`.
    const WARP: i64;
    /// The suffix of its entry points, e.g. `f64_i32_i32_w32`.
    const NAME: &'static str;
    /// Whether `value_t` is complex.
    const COMPLEX: bool;
}

macro_rules! declare_variant {
    ($name:ident, $sfx:literal, $v:ty, $o:ty, $i:ty, $w:literal) => {
        #[doc = concat!("The variant `", $sfx, "`.")]
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name;
        impl Variant for $name {
            type Value = $v;
            type Offset = $o;
            type Index = $i;
            const WARP: i64 = $w;
            const NAME: &'static str = $sfx;
            const COMPLEX: bool = $sfx.as_bytes()[0] == b'c';
        }
    };
}
for_each_variant!(declare_variant);

/// Everything a variant runs: one supertrait per launcher file.
pub trait Kernels: Variant + scan_binning::ScanBinning + emulator::Emulator {}
impl<T: Variant + scan_binning::ScanBinning + emulator::Emulator> Kernels for T {}

/// Runs a test body once per variant: `visit::<V>()` for each.
pub trait VariantVisitor {
    /// Called once per variant.
    fn visit<V: Kernels>(&mut self);
}

/// The variants the race check (feature `race-check`) runs: one per warp
/// width, the narrow and the wide types. ThreadSanitizer makes each about
/// four times slower, and the lanes' memory ordering depends on the warp
/// width and the kernels' code, not on the value type.
pub const RACE_CHECK_VARIANTS: [&str; 2] = ["f64_i32_i32_w32", "c64_i64_i64_w64"];

/// Calls `visitor.visit::<V>()` for every variant, in the order of the
/// table above (with the feature `race-check`, for those of
/// [`RACE_CHECK_VARIANTS`]).
pub fn visit_variants(visitor: &mut impl VariantVisitor) {
    macro_rules! visit {
        ($name:ident, $($rest:tt)*) => {
            if !cfg!(feature = "race-check") || RACE_CHECK_VARIANTS.contains(&$name::NAME) {
                visitor.visit::<$name>();
            }
        };
    }
    for_each_variant!(visit);
}

/// Launch geometry: `grid` blocks of `block` threads, `shared` bytes of
/// dynamic shared memory per block. The emulator aborts the process on a
/// grid below 1 or a block that is not a multiple of the warp width (or
/// above 1024), as a device would refuse the launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Blocks.
    pub grid: i64,
    /// Threads per block.
    pub block: i64,
    /// Dynamic shared memory per block, in bytes.
    pub shared: i64,
}

impl Launch {
    /// `grid` blocks of `block` threads, no dynamic shared memory.
    pub fn new(grid: i64, block: i64) -> Self {
        Launch {
            grid,
            block,
            shared: 0,
        }
    }
}

/// `op(X)` in CSR as the kernels take it: `struct rs_csr` of
/// `kernels/README.md`, passed by value. Borrows the arrays it points at.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KernelCsr<'a, O, I, T> {
    /// `nrows + 1` offsets.
    pub rows: *const O,
    /// `nnz` column indices.
    pub cols: *const I,
    /// `nnz` values, or null in symbolic kernels.
    pub vals: *const T,
    /// Rows.
    pub nrows: i64,
    /// Columns.
    pub ncols: i64,
    /// Stored entries.
    pub nnz: i64,
    /// 0 or 1.
    pub base: i32,
    /// Padding (keeps the C layout explicit).
    pub pad_: i32,
    _borrow: PhantomData<&'a ()>,
}

impl<'a, O: Index, I: Index, T> KernelCsr<'a, O, I, T> {
    /// Points at `rows`, `cols` and (when given) `vals`.
    ///
    /// # Panics
    /// When `rows` is empty, or `cols` (or `vals`) is shorter than the
    /// entry count `rows[nrows] - base`.
    pub fn new(rows: &'a [O], cols: &'a [I], vals: Option<&'a [T]>, ncols: i64, base: i32) -> Self {
        let nrows = rows
            .len()
            .checked_sub(1)
            .expect("rows holds nrows + 1 offsets");
        let nnz = rows[nrows].to_i64() - i64::from(base);
        let need = usize::try_from(nnz).expect("non-negative entry count");
        assert!(
            cols.len() >= need,
            "cols holds {} of {need} entries",
            cols.len()
        );
        if let Some(v) = vals {
            assert!(v.len() >= need, "vals holds {} of {need} entries", v.len());
        }
        KernelCsr {
            rows: rows.as_ptr(),
            cols: cols.as_ptr(),
            vals: vals.map_or(std::ptr::null(), <[T]>::as_ptr),
            nrows: nrows as i64,
            ncols,
            nnz,
            base,
            pad_: 0,
            _borrow: PhantomData,
        }
    }
}

/// A small nonzero integer value (both parts set for complex types), so
/// sums are exact in every order.
pub fn small_int_value<V: Variant>(rng: &mut Rng) -> V::Value {
    let re = rng.below(7) as f64 - 3.0;
    let im = rng.below(5) as f64 - 2.0;
    V::Value::from_parts(if re == 0.0 { 1.0 } else { re }, im)
}

/// A value with a fractional part (sums round, so only reproducibility is
/// exact).
pub fn fractional_value<V: Variant>(rng: &mut Rng) -> V::Value {
    let re = (rng.below(1 << 20) as f64 - (1 << 19) as f64) / 3.0e4;
    let im = (rng.below(1 << 20) as f64 - (1 << 19) as f64) / 7.0e4;
    V::Value::from_parts(re, im)
}

/// A generator seeded from the variant's name and `salt`, so each variant
/// draws its own data.
pub fn variant_rng<V: Variant>(salt: u64) -> Rng {
    let h = V::NAME.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, c| {
        (h ^ c as u64).wrapping_mul(0x0100_0000_01b3)
    });
    Rng::new(h ^ salt)
}

/// Checks a slice length against what a kernel will touch.
#[track_caller]
pub(crate) fn need<T: Debug>(what: &str, slice: &[T], len: usize) {
    assert!(
        slice.len() >= len,
        "{what} has {} entries, the kernel needs {len}",
        slice.len()
    );
}
