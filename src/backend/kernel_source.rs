//! The GPU kernels' single source, shared by the CUDA and HIP back ends:
//! `kernels/portability.h` followed by every `kernels/*.cu` in the order of
//! [`KERNEL_SOURCES`], prefixed with `#define RS_AMALGAMATED` (so their
//! `#include "portability.h"` lines are skipped) and with a `#line`
//! directive before each file, so the run-time compiler's messages (NVRTC,
//! hiprtc) name the real file and line; and the type combinations one
//! compilation serves ([`KernelTypes`]).
//!
//! The files are embedded with `include_str!` rather than copied by a
//! build script: cargo records every `include_str!` file as a dependency of
//! the crate, so editing a kernel rebuilds rusparse with no
//! `rerun-if-changed` bookkeeping and no generated file to go stale.

use crate::types::{DataType, IndexType};
use std::fmt;

/// The kernel files, in the order they are concatenated (`portability.h`
/// first), as `(file name, text)`.
pub const KERNEL_SOURCES: &[(&str, &str)] = &[
    ("portability.h", include_str!("../../kernels/portability.h")),
    ("setup.cu", include_str!("../../kernels/setup.cu")),
    ("binning.cu", include_str!("../../kernels/binning.cu")),
    ("scan.cu", include_str!("../../kernels/scan.cu")),
    ("transpose.cu", include_str!("../../kernels/transpose.cu")),
    ("symbolic.cu", include_str!("../../kernels/symbolic.cu")),
    ("numeric.cu", include_str!("../../kernels/numeric.cu")),
];

/// Builds the amalgamated source from `files` (see the module docs).
pub fn amalgamate(files: &[(&str, &str)]) -> String {
    let len: usize = files.iter().map(|(n, t)| n.len() + t.len() + 32).sum();
    let mut s = String::with_capacity(len + 32);
    s.push_str("#define RS_AMALGAMATED 1\n");
    for (name, text) in files {
        s.push_str(&format!("#line 1 \"kernels/{name}\"\n"));
        s.push_str(text);
        if !text.ends_with('\n') {
            s.push('\n');
        }
    }
    s
}

/// The amalgamated source of [`KERNEL_SOURCES`] (built once).
pub fn kernel_source() -> &'static str {
    let _process_wide = crate::host_allocator::process_wide();
    static SOURCE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SOURCE.get_or_init(|| amalgamate(KERNEL_SOURCES))
}

/// The value type of one kernel compilation (`RS_VALUE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueKind {
    /// `float` (`RS_VALUE=0`).
    F32,
    /// `double` (`RS_VALUE=1`).
    F64,
    /// `rs_complex<float>` (`RS_VALUE=2`).
    C32,
    /// `rs_complex<double>` (`RS_VALUE=3`).
    C64,
}

impl ValueKind {
    /// Every value kind, in `RS_VALUE` order.
    pub const ALL: [ValueKind; 4] = [
        ValueKind::F32,
        ValueKind::F64,
        ValueKind::C32,
        ValueKind::C64,
    ];

    /// The `RS_VALUE` number.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// Bytes of one value.
    pub fn bytes(self) -> u32 {
        match self {
            ValueKind::F32 => 4,
            ValueKind::F64 | ValueKind::C32 => 8,
            ValueKind::C64 => 16,
        }
    }

    /// The kind of a C data type.
    pub fn of(data_type: DataType) -> ValueKind {
        match data_type {
            DataType::R32F => ValueKind::F32,
            DataType::R64F => ValueKind::F64,
            DataType::C32F => ValueKind::C32,
            DataType::C64F => ValueKind::C64,
        }
    }

    /// A short name (`f32`, `f64`, `c32`, `c64`).
    pub fn name(self) -> &'static str {
        match self {
            ValueKind::F32 => "f32",
            ValueKind::F64 => "f64",
            ValueKind::C32 => "c32",
            ValueKind::C64 => "c64",
        }
    }
}

/// The type combination of one kernel compilation: values, row offsets
/// (`RS_OFFSET64`) and column indices (`RS_INDEX64`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelTypes {
    /// `value_t`.
    pub value: ValueKind,
    /// `offset_t` is `long long` (else `int`).
    pub offset64: bool,
    /// `index_t` is `long long` (else `int`).
    pub index64: bool,
}

impl KernelTypes {
    /// All 16 combinations.
    pub fn all() -> impl Iterator<Item = KernelTypes> {
        ValueKind::ALL.into_iter().flat_map(|value| {
            [(false, false), (false, true), (true, false), (true, true)]
                .into_iter()
                .map(move |(offset64, index64)| KernelTypes {
                    value,
                    offset64,
                    index64,
                })
        })
    }

    /// The combination of a value type, a row offset type and a column
    /// index type.
    pub fn new(value: DataType, offsets: IndexType, indices: IndexType) -> KernelTypes {
        KernelTypes {
            value: ValueKind::of(value),
            offset64: offsets == IndexType::I64,
            index64: indices == IndexType::I64,
        }
    }

    /// Bytes of one column index.
    pub fn index_bytes(self) -> u32 {
        if self.index64 {
            8
        } else {
            4
        }
    }

    /// Bytes of one row offset.
    pub fn offset_bytes(self) -> u32 {
        if self.offset64 {
            8
        } else {
            4
        }
    }

    /// Bytes of one value.
    pub fn value_bytes(self) -> u32 {
        self.value.bytes()
    }
}

impl fmt::Display for KernelTypes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} values, {} offsets, {} indices",
            self.value.name(),
            if self.offset64 { "i64" } else { "i32" },
            if self.index64 { "i64" } else { "i32" }
        )
    }
}
