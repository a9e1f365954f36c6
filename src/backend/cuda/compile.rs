//! NVRTC options, compilation and the on-disk kernel cache. The kernels'
//! single source and type combinations are in
//! [`crate::backend::kernel_source`] (re-exported here).
//!
//! One compilation serves one [`KernelTypes`] (value, offset and index
//! type) for one warp width and architecture; table sizes, blocks and teams
//! are run-time arguments. Compiled images are cached per device in memory
//! (`device.rs`) and on disk in `$XDG_CACHE_HOME/rusparse` (else
//! `$HOME/.cache/rusparse`), keyed by an FNV-1a hash of the source, the
//! options, the architecture and the NVRTC version. A cache that is
//! missing, corrupt, unreadable or unwritable only costs a compilation.

use crate::error::{Error, Result};

pub use crate::backend::kernel_source::{
    amalgamate, kernel_source, KernelTypes, ValueKind, KERNEL_SOURCES,
};

/// The target of a compilation: a virtual architecture (PTX, JIT-compiled
/// by the driver) or a real one (CUBIN). The number is `10 * major + minor`
/// of the compute capability.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// `-arch=compute_XY`: PTX text.
    Virtual(u32),
    /// `-arch=sm_XY`: a CUBIN. Used when the driver is older than NVRTC and
    /// refuses its PTX (CUDA's minor-version compatibility covers CUBINs).
    Real(u32),
}

impl Arch {
    /// The `-arch=` value, e.g. `compute_80`.
    pub fn name(self) -> String {
        match self {
            Arch::Virtual(cc) => format!("compute_{cc}"),
            Arch::Real(cc) => format!("sm_{cc}"),
        }
    }

    /// `10 * major + minor`.
    pub fn number(self) -> u32 {
        match self {
            Arch::Virtual(cc) | Arch::Real(cc) => cc,
        }
    }
}

/// Everything that selects one compiled module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelOptions {
    /// Value, offset and index types.
    pub types: KernelTypes,
    /// Warp width (`RS_WARP`): 32 on NVIDIA GPUs.
    pub warp: u32,
    /// Target architecture.
    pub arch: Arch,
}

impl KernelOptions {
    /// The NVRTC command line: `-D` types and warp, `-arch`, C++17, every
    /// function a device function by default. `-lineinfo` and
    /// `--use_fast_math` are deliberately absent (fast math would change
    /// results; line info only grows the image).
    pub fn nvrtc_options(&self) -> Vec<String> {
        vec![
            format!("-DRS_VALUE={}", self.types.value.code()),
            format!("-DRS_OFFSET64={}", u32::from(self.types.offset64)),
            format!("-DRS_INDEX64={}", u32::from(self.types.index64)),
            format!("-DRS_WARP={}", self.warp),
            format!("-arch={}", self.arch.name()),
            "--std=c++17".to_string(),
            "-default-device".to_string(),
        ]
    }
}

/// A compiled module image and the compiler's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compiled {
    /// What `cuModuleLoadData` takes: NUL-terminated PTX text, or a CUBIN.
    pub image: Vec<u8>,
    /// NVRTC's log (warnings); empty when it had nothing to say.
    pub log: String,
}

/// Compiles `source` with NVRTC.
///
/// `strict` turns any log text (every warning, except NVRTC's own notice
/// that an architecture is deprecated, see [`is_arch_notice`]) into an
/// error, as the CI compile check wants; otherwise warnings are returned
/// in [`Compiled::log`]. Cost: NVRTC's compile time (about a second per
/// instantiation of the rusparse kernels).
///
/// # Errors
/// [`Error::NotSupported`] when NVRTC cannot be loaded;
/// [`Error::ArchMismatch`] when NVRTC does not know the architecture;
/// [`Error::InternalError`] with the full log when compilation fails (or
/// warns, when `strict`).
#[doc(hidden)]
pub fn compile_nvrtc(source: &str, opts: &KernelOptions, strict: bool) -> Result<Compiled> {
    compile_nvrtc_with(source, opts, strict, &[])
}

/// [`compile_nvrtc`] with `extra` options after the usual ones (e.g.
/// ptxas's report, [`super::resources`]).
///
/// # Errors
/// As [`compile_nvrtc`].
#[doc(hidden)]
pub fn compile_nvrtc_with(
    source: &str,
    opts: &KernelOptions,
    strict: bool,
    extra: &[&str],
) -> Result<Compiled> {
    super::loader::nvrtc()?;
    super::loader::guarded("running NVRTC", || {
        nvrtc_compile(source, opts, strict, extra)
    })
}

fn nvrtc_compile(
    source: &str,
    opts: &KernelOptions,
    strict: bool,
    extra: &[&str],
) -> Result<Compiled> {
    use super::nvrtc::{Program, NVRTC_ERROR_INVALID_OPTION, NVRTC_SUCCESS};
    use std::ffi::CString;

    let nv = super::nvrtc::nvrtc()?;
    let what = || {
        format!(
            "NVRTC {}.{} ({}, {}, warp {})",
            nv.version.0,
            nv.version.1,
            opts.types,
            opts.arch.name(),
            opts.warp
        )
    };
    let src = CString::new(source)
        .map_err(|_| Error::InternalError(format!("{}: the kernel source contains NUL", what())))?;
    let mut options = opts.nvrtc_options();
    options.extend(extra.iter().map(|o| o.to_string()));
    let prog = Program::new(nv, &src, c"rusparse_kernels.cu")
        .map_err(|e| Error::InternalError(format!("{}: {}", what(), e.message())))?;
    let compiled = prog.compile(&options)?;
    let log = prog.log();
    if compiled != NVRTC_SUCCESS {
        let msg = format!(
            "{} failed ({}) with options {}:\n{}",
            what(),
            nv.error_string(compiled),
            options.join(" "),
            log.trim_end()
        );
        return Err(if compiled == NVRTC_ERROR_INVALID_OPTION {
            Error::ArchMismatch(msg)
        } else {
            Error::InternalError(msg)
        });
    }
    if strict
        && !log
            .lines()
            .all(|l| l.trim().is_empty() || is_arch_notice(l))
    {
        return Err(Error::InternalError(format!(
            "{} produced warnings (strict) with options {}:\n{}",
            what(),
            options.join(" "),
            log.trim_end()
        )));
    }
    let image = match opts.arch {
        Arch::Virtual(_) => prog.ptx(),
        Arch::Real(_) => prog.cubin(),
    }
    .map_err(|e| Error::InternalError(format!("{}: {}", what(), e.message())))?;
    Ok(Compiled { image, log })
}

/// Whether a log line is NVRTC's own notice that an architecture is
/// deprecated (NVRTC 12.9 prints it for every `compute_70` compilation and
/// has no option to silence it). It says nothing about the kernels, so
/// strict compilation ignores it; every other line fails.
pub fn is_arch_notice(line: &str) -> bool {
    let l = line.trim();
    l.starts_with("nvrtc: warning: Architectures prior to")
        && l.ends_with("are deprecated and may be removed in a future release")
}

/// The architectures NVRTC can compile for (`nvrtcGetSupportedArchs`), as
/// `10 * major + minor`.
///
/// # Errors
/// [`Error::NotSupported`] when NVRTC cannot be loaded.
pub fn nvrtc_supported_archs() -> Result<Vec<u32>> {
    super::nvrtc::supported_archs(super::nvrtc::nvrtc()?)
}

/// The architecture to compile for on a device of compute capability
/// `device` (`10 * major + minor`): the device's own when NVRTC knows it,
/// else the newest older one NVRTC knows (its PTX runs on the newer device
/// through the driver's JIT). `None` when NVRTC knows nothing that old.
pub fn pick_arch(device: u32, supported: &[u32]) -> Option<u32> {
    supported.iter().copied().filter(|&a| a <= device).max()
}

/// The images to try for a device of compute capability `device`, in
/// order: a CUBIN for the device itself when NVRTC knows its architecture
/// (no driver JIT of the kernels on the first call), then PTX for
/// `ptx_arch` (see [`pick_arch`]), which the driver JIT-compiles.
pub fn image_order(device: u32, ptx_arch: u32, supported: &[u32]) -> Vec<Arch> {
    let mut order = Vec::with_capacity(2);
    if supported.contains(&device) {
        order.push(Arch::Real(device));
    }
    order.push(Arch::Virtual(ptx_arch));
    order
}

/// Builds the first of `order` that `build` manages: an
/// [`Error::ArchMismatch`] (NVRTC does not know the target, or the driver
/// refuses the image: no binary for the GPU, PTX it cannot JIT, no JIT
/// compiler) moves on to the next; any other error stops. The last
/// mismatch, with every earlier one, when none works.
///
/// # Errors
/// As above.
pub fn first_that_loads<T>(order: &[Arch], mut build: impl FnMut(Arch) -> Result<T>) -> Result<T> {
    let mut refused = Vec::new();
    for &arch in order {
        match build(arch) {
            Err(Error::ArchMismatch(m)) => refused.push(format!("as {}: {m}", arch.name())),
            other => return other,
        }
    }
    Err(Error::ArchMismatch(if refused.is_empty() {
        "no image to try".into()
    } else {
        refused.join("; then ")
    }))
}

/// The cache key of one compilation: source, options, architecture and
/// the compiler's identity (e.g. `nvrtc 12.9`).
pub fn cache_key(source: &str, opts: &KernelOptions, compiler: &str) -> u64 {
    let options = opts.nvrtc_options().join("\u{1}");
    let arch = opts.arch.name();
    fnv1a64(&[
        b"rusparse-kernel-cache-v1",
        source.as_bytes(),
        options.as_bytes(),
        arch.as_bytes(),
        compiler.as_bytes(),
    ])
}

pub use crate::backend::kernel_cache::{fnv1a64, DiskCache, ImageSource};

/// [`crate::backend::kernel_cache::load_or_compile`] for NVRTC's
/// [`Compiled`] images.
///
/// # Errors
/// Whatever `compile` or `load` return.
pub fn load_or_compile<T>(
    cache: &DiskCache,
    key: u64,
    compile: impl FnOnce() -> Result<Compiled>,
    load: impl FnMut(&[u8]) -> Result<T>,
) -> Result<(T, ImageSource)> {
    crate::backend::kernel_cache::load_or_compile(cache, key, || compile().map(|c| c.image), load)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::path::{Path, PathBuf};

    fn opts() -> KernelOptions {
        KernelOptions {
            types: KernelTypes {
                value: ValueKind::C64,
                offset64: true,
                index64: false,
            },
            warp: 32,
            arch: Arch::Virtual(80),
        }
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "rusparse-cache-test-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn option_strings() {
        assert_eq!(
            opts().nvrtc_options(),
            [
                "-DRS_VALUE=3",
                "-DRS_OFFSET64=1",
                "-DRS_INDEX64=0",
                "-DRS_WARP=32",
                "-arch=compute_80",
                "--std=c++17",
                "-default-device"
            ]
        );
        let mut o = opts();
        o.arch = Arch::Real(90);
        o.types.value = ValueKind::F32;
        assert!(o.nvrtc_options().contains(&"-arch=sm_90".to_string()));
        assert!(o.nvrtc_options().contains(&"-DRS_VALUE=0".to_string()));
        assert!(!o
            .nvrtc_options()
            .iter()
            .any(|s| s.contains("fast_math") || s.contains("lineinfo")));
    }

    #[test]
    fn sixteen_type_combinations() {
        let all: Vec<_> = KernelTypes::all().collect();
        assert_eq!(all.len(), 16);
        let distinct: std::collections::HashSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), 16);
        assert_eq!(ValueKind::ALL.map(ValueKind::bytes), [4, 8, 8, 16]);
    }

    #[test]
    fn amalgamation_marks_files() {
        let s = amalgamate(&[("a.h", "int a;"), ("b.cu", "int b;\n")]);
        assert_eq!(
            s,
            "#define RS_AMALGAMATED 1\n#line 1 \"kernels/a.h\"\nint a;\n#line 1 \"kernels/b.cu\"\nint b;\n"
        );
        assert!(kernel_source().starts_with("#define RS_AMALGAMATED"));
        assert_eq!(KERNEL_SOURCES[0].0, "portability.h");
    }

    #[test]
    fn every_kernel_file_is_embedded() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".cu"))
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = KERNEL_SOURCES[1..]
            .iter()
            .map(|(n, _)| n.to_string())
            .collect();
        listed.sort();
        assert_eq!(
            listed, on_disk,
            "KERNEL_SOURCES must list every kernels/*.cu"
        );
        for (name, text) in KERNEL_SOURCES {
            assert_eq!(
                std::fs::read_to_string(dir.join(name)).unwrap(),
                *text,
                "{name}"
            );
        }
    }

    #[test]
    fn key_depends_on_everything() {
        let base = cache_key("src", &opts(), "nvrtc 12.9");
        assert_eq!(base, cache_key("src", &opts(), "nvrtc 12.9"), "stable");
        assert_ne!(base, cache_key("src2", &opts(), "nvrtc 12.9"));
        assert_ne!(base, cache_key("src", &opts(), "nvrtc 12.8"));
        let mut o = opts();
        o.arch = Arch::Virtual(90);
        assert_ne!(base, cache_key("src", &o, "nvrtc 12.9"));
        let mut o = opts();
        o.arch = Arch::Real(80);
        assert_ne!(base, cache_key("src", &o, "nvrtc 12.9"));
        let mut o = opts();
        o.types.index64 = true;
        assert_ne!(base, cache_key("src", &o, "nvrtc 12.9"));
        let mut o = opts();
        o.warp = 64;
        assert_ne!(base, cache_key("src", &o, "nvrtc 12.9"));
        // The published FNV-1a test vector, then part separation.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in b"a" {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        assert_eq!(h, 0xaf63_dc4c_8601_ec8c);
        assert_ne!(fnv1a64(&[b"ab", b"c"]), fnv1a64(&[b"a", b"bc"]));
    }

    #[test]
    fn only_the_deprecation_notice_is_tolerated() {
        assert!(is_arch_notice(
            "nvrtc: warning: Architectures prior to '<compute/sm>_75' are deprecated and may be removed in a future release"
        ));
        assert!(!is_arch_notice("kernels/numeric.cu(12): warning #177-D: variable \"x\" was declared but never referenced"));
        assert!(!is_arch_notice("nvrtc: warning: something else"));
    }

    #[test]
    fn a_cubin_for_the_device_first_then_ptx() {
        assert_eq!(
            image_order(90, 90, &[75, 80, 90]),
            vec![Arch::Real(90), Arch::Virtual(90)]
        );
        // NVRTC older than the device: PTX for its newest architecture.
        assert_eq!(image_order(100, 90, &[75, 80, 90]), vec![Arch::Virtual(90)]);
        let mut tried = Vec::new();
        let r = first_that_loads(&image_order(90, 90, &[90]), |a| {
            tried.push(a);
            match a {
                Arch::Real(_) => Err(Error::ArchMismatch("no binary".into())),
                Arch::Virtual(_) => Ok(7),
            }
        });
        assert_eq!((r, tried), (Ok(7), vec![Arch::Real(90), Arch::Virtual(90)]));
        // Another error stops at once.
        let mut n = 0;
        let r: Result<()> = first_that_loads(&image_order(90, 90, &[90]), |_| {
            n += 1;
            Err(Error::InsufficientResources("out of memory".into()))
        });
        assert!(matches!(r, Err(Error::InsufficientResources(_))) && n == 1);
        // Every image refused: both reasons, in order.
        let r: Result<()> = first_that_loads(&image_order(90, 90, &[90]), |a| {
            Err(Error::ArchMismatch(format!("refused {}", a.name())))
        });
        let m = r.unwrap_err().to_string();
        assert!(
            m.contains("as sm_90: refused sm_90; then as compute_90: refused compute_90"),
            "{m}"
        );
    }

    #[test]
    fn arch_choice() {
        let supported = [50, 52, 60, 70, 75, 80, 86, 89, 90];
        assert_eq!(pick_arch(80, &supported), Some(80));
        assert_eq!(pick_arch(87, &supported), Some(86));
        assert_eq!(pick_arch(120, &supported), Some(90));
        assert_eq!(pick_arch(35, &supported), None);
    }

    #[test]
    fn cache_round_trip_and_corruption() {
        let dir = temp_dir("roundtrip");
        let cache = DiskCache::at(&dir);
        assert_eq!(cache.load(7), None);
        assert!(cache.store(7, b"ptx text\0"));
        assert_eq!(cache.load(7).as_deref(), Some(&b"ptx text\0"[..]));
        assert_eq!(cache.load(8), None, "other key");
        // No temporary files are left behind.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["kernels-0000000000000007.bin"]);

        let path = cache.path(7).unwrap();
        let good = std::fs::read(&path).unwrap();
        // A flipped payload byte, a truncated file, a bad magic, a file
        // renamed to another key: all read as absent.
        let mut bad = good.clone();
        *bad.last_mut().unwrap() ^= 1;
        std::fs::write(&path, &bad).unwrap();
        assert_eq!(cache.load(7), None);
        std::fs::write(&path, &good[..good.len() - 1]).unwrap();
        assert_eq!(cache.load(7), None);
        std::fs::write(&path, b"short").unwrap();
        assert_eq!(cache.load(7), None);
        let mut bad = good.clone();
        bad[0] ^= 1;
        std::fs::write(&path, &bad).unwrap();
        assert_eq!(cache.load(7), None);
        std::fs::write(cache.path(9).unwrap(), &good).unwrap();
        assert_eq!(cache.load(9), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn disabled_and_unwritable_caches_only_cost_a_compile() {
        assert!(!DiskCache::disabled().store(1, b"x"));
        assert_eq!(DiskCache::disabled().load(1), None);
        // A regular file where the folder should be: nothing can be stored.
        let file = temp_dir("notadir");
        std::fs::write(&file, b"").unwrap();
        let cache = DiskCache::at(file.join("sub"));
        assert!(!cache.store(1, b"x"));
        let compiles = Cell::new(0);
        let compile = || {
            compiles.set(compiles.get() + 1);
            Ok(Compiled {
                image: b"img\0".to_vec(),
                log: String::new(),
            })
        };
        let (img, src) = load_or_compile(&cache, 1, compile, |i| Ok(i.to_vec())).unwrap();
        assert_eq!(
            (img.as_slice(), src, compiles.get()),
            (&b"img\0"[..], ImageSource::Compiler, 1)
        );
        let _ = std::fs::remove_file(&file);
    }

    #[test]
    fn load_or_compile_policy() {
        let dir = temp_dir("policy");
        let cache = DiskCache::at(&dir);
        let compiles = Cell::new(0);
        let compile = |image: &'static [u8]| {
            let compiles = &compiles;
            move || {
                compiles.set(compiles.get() + 1);
                Ok(Compiled {
                    image: image.to_vec(),
                    log: String::new(),
                })
            }
        };
        let accept = |i: &[u8]| Ok(i.to_vec());

        // Miss: compiled and stored.
        let (img, src) = load_or_compile(&cache, 5, compile(b"v1\0"), accept).unwrap();
        assert_eq!((img, src), (b"v1\0".to_vec(), ImageSource::Compiler));
        assert_eq!(cache.load(5).as_deref(), Some(&b"v1\0"[..]));
        // Hit: no compile.
        let (img, src) = load_or_compile(&cache, 5, compile(b"v2\0"), accept).unwrap();
        assert_eq!(
            (img, src, compiles.get()),
            (b"v1\0".to_vec(), ImageSource::Cache, 1)
        );
        // A corrupt file: recompiled and overwritten.
        let path = cache.path(5).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        *bytes.last_mut().unwrap() ^= 0x55;
        std::fs::write(&path, bytes).unwrap();
        let (img, src) = load_or_compile(&cache, 5, compile(b"v3\0"), accept).unwrap();
        assert_eq!(
            (img, src, compiles.get()),
            (b"v3\0".to_vec(), ImageSource::Compiler, 2)
        );
        assert_eq!(cache.load(5).as_deref(), Some(&b"v3\0"[..]));
        // A cached image the loader refuses (module load failure):
        // recompiled, overwritten, loaded.
        let refuse_v3 = |i: &[u8]| {
            if i == b"v3\0" {
                Err(Error::ExecutionFailed("CUDA_ERROR_INVALID_PTX".into()))
            } else {
                Ok(i.to_vec())
            }
        };
        let (img, src) = load_or_compile(&cache, 5, compile(b"v4\0"), refuse_v3).unwrap();
        assert_eq!(
            (img, src, compiles.get()),
            (b"v4\0".to_vec(), ImageSource::Compiler, 3)
        );
        assert_eq!(cache.load(5).as_deref(), Some(&b"v4\0"[..]));
        // A freshly compiled image the driver refuses is not stored: the
        // next call compiles again instead of loading it from the cache.
        let refuse_all = |_: &[u8]| -> Result<Vec<u8>> {
            Err(Error::ArchMismatch("CUDA_ERROR_NO_BINARY_FOR_GPU".into()))
        };
        assert!(load_or_compile(&cache, 7, compile(b"v5\0"), refuse_all).is_err());
        assert_eq!(cache.load(7), None);
        // Compile errors come back as they are.
        let failing = || Err(Error::InternalError("log: error".into()));
        assert_eq!(
            load_or_compile(&cache, 6, failing, accept).unwrap_err(),
            Error::InternalError("log: error".into())
        );
        assert_eq!(cache.load(6), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn cache_folder_from_environment() {
        // Only inspects the rule; never changes the process environment.
        let c = DiskCache::from_env();
        if let Some(d) = c.dir() {
            assert!(d.is_absolute() && d.ends_with("rusparse"));
        }
    }
}
