//! Compiling the kernels' single source ([`crate::backend::kernel_source`])
//! with hiprtc for an AMD architecture (`gfx906`, `gfx90a`, ...).
//!
//! The same text NVRTC compiles for CUDA, with hiprtc's `__HIPCC_RTC__`
//! selecting the HIP branch of `kernels/portability.h`, `RS_WARP` the
//! device's wavefront width and the `-D` type macros of [`KernelTypes`].
//! hiprtc needs no GPU: CI compiles every instantiation for gfx906 and
//! gfx90a (`tests/hip_kernels.rs`).

use super::loader::{c_text, hiprtc, HiprtcProgram};
use crate::backend::kernel_cache::{fnv1a64, load_or_compile, DiskCache, ImageSource};
use crate::backend::kernel_source::KernelTypes;
use crate::error::{Error, Result};
use std::ffi::{c_char, c_int, CString};

/// Everything that selects one compiled HIP code object.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HipKernelOptions {
    /// Value, offset and index types.
    pub types: KernelTypes,
    /// Wavefront width (`RS_WARP`): [`wavefront_of_arch`].
    pub warp: u32,
    /// The `gcnArchName` target, e.g. `gfx906` or `gfx90a:sramecc+:xnack-`.
    pub arch: String,
}

impl HipKernelOptions {
    /// The hiprtc command line: `-D` types and wavefront, the target, C++17.
    pub fn hiprtc_options(&self) -> Vec<String> {
        vec![
            format!("-DRS_VALUE={}", self.types.value.code()),
            format!("-DRS_OFFSET64={}", u32::from(self.types.offset64)),
            format!("-DRS_INDEX64={}", u32::from(self.types.index64)),
            format!("-DRS_WARP={}", self.warp),
            format!("--gpu-architecture={}", self.arch),
            "-std=c++17".to_string(),
        ]
    }
}

/// The wavefront width rusparse compiles for on `arch` (a `gcnArchName`,
/// features after `:` ignored): 64 on GCN and CDNA (`gfx8`, `gfx9`,
/// including the MI50 and Hygon's DCUs, gfx906, and the MI200/MI300
/// series), 32 on RDNA (`gfx10`, `gfx11`, `gfx12`), whose native mode is
/// wave32. `None` for a name that is not a `gfx` target.
pub fn wavefront_of_arch(arch: &str) -> Option<u32> {
    let base = arch.split(':').next()?;
    let digits = base.strip_prefix("gfx")?;
    if digits.len() < 3 || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    // The major version is everything but the last two digits.
    let major: u32 = digits[..digits.len() - 2].parse().ok()?;
    Some(if major >= 10 { 32 } else { 64 })
}

/// A compiled code object and hiprtc's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HipCompiled {
    /// What `hipModuleLoadData` takes.
    pub code: Vec<u8>,
    /// hiprtc's log (warnings); empty when it had nothing to say.
    pub log: String,
}

/// Compiles `source` with hiprtc for `opts`.
///
/// `strict` turns any log text into an error, as the CI compile check
/// wants. Compilations are serialised (hiprtc is not thread-safe in ROCm
/// 5.2). Cost: about 1.3 s per instantiation of the rusparse kernels (ROCm
/// 5.2, one core).
///
/// # Errors
/// [`Error::NotSupported`] when hiprtc cannot be loaded;
/// [`Error::InvalidValue`] for a source or option with a NUL byte;
/// [`Error::InternalError`] with the log when compilation fails (or warns,
/// when `strict`).
pub fn compile_hiprtc(source: &str, opts: &HipKernelOptions, strict: bool) -> Result<HipCompiled> {
    let rtc = hiprtc().map_err(Error::NotSupported)?;
    // One compilation at a time: ROCm 5.2's hiprtc crashes (SIGSEGV) when
    // several threads compile at once; a compile takes about a second and
    // happens once per type combination and device, so nothing is lost.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let nul = |what: &str| Error::InvalidValue(format!("{what} contains a NUL byte"));
    let src = CString::new(source).map_err(|_| nul("the kernel source"))?;
    let options: Vec<CString> = opts
        .hiprtc_options()
        .into_iter()
        .map(|o| CString::new(o).map_err(|_| nul("a hiprtc option")))
        .collect::<Result<_>>()?;
    let option_ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
    let name = c"rusparse_kernels.hip";
    let failed = |what: &str, r: c_int| {
        Error::InternalError(format!(
            "{what} failed for {} ({}): {}",
            opts.arch,
            opts.types,
            // SAFETY: hiprtcGetErrorString takes any value and returns a
            // static string.
            unsafe { c_text((rtc.get_error_string)(r), "unknown hiprtc error") }
        ))
    };

    /// Destroys the program on every path out.
    struct Program(
        HiprtcProgram,
        unsafe extern "C" fn(*mut HiprtcProgram) -> c_int,
    );
    impl Drop for Program {
        fn drop(&mut self) {
            if !self.0.is_null() {
                // SAFETY: created by hiprtcCreateProgram, destroyed once.
                unsafe { (self.1)(&mut self.0) };
            }
        }
    }

    let mut program = Program(std::ptr::null_mut(), rtc.destroy_program);
    // SAFETY: valid NUL-terminated strings; no headers.
    let r = unsafe {
        (rtc.create_program)(
            &mut program.0,
            src.as_ptr(),
            name.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(failed("hiprtcCreateProgram", r));
    }
    let count = c_int::try_from(option_ptrs.len()).expect("a handful of options");
    // SAFETY: `option_ptrs` holds `count` valid strings.
    let compiled = unsafe { (rtc.compile_program)(program.0, count, option_ptrs.as_ptr()) };
    let log = program_log(program.0)?;
    if compiled != 0 {
        return Err(Error::InternalError(format!(
            "hiprtc could not compile the kernels for {} ({}), with {:?}:\n{log}",
            opts.arch,
            opts.types,
            opts.hiprtc_options()
        )));
    }
    if strict && !log.trim().is_empty() {
        return Err(Error::InternalError(format!(
            "hiprtc warned while compiling for {} ({}):\n{log}",
            opts.arch, opts.types
        )));
    }
    let mut size = 0usize;
    // SAFETY: a compiled program.
    let r = unsafe { (rtc.get_code_size)(program.0, &mut size) };
    if r != 0 {
        return Err(failed("hiprtcGetCodeSize", r));
    }
    let mut code = vec![0u8; size];
    // SAFETY: `code` holds the `size` bytes hiprtc writes.
    let r = unsafe { (rtc.get_code)(program.0, code.as_mut_ptr().cast()) };
    if r != 0 {
        return Err(failed("hiprtcGetCode", r));
    }
    Ok(HipCompiled { code, log })
}

/// The cache key of one HIP compilation: the source, the options (the
/// target among them) and the compiler's identity
/// ([`super::loader::Hiprtc::identity`]).
pub fn hip_cache_key(source: &str, opts: &HipKernelOptions, compiler: &str) -> u64 {
    let options = opts.hiprtc_options().join("\u{1}");
    fnv1a64(&[
        b"rusparse-hip-kernel-cache-v1",
        source.as_bytes(),
        options.as_bytes(),
        opts.arch.as_bytes(),
        compiler.as_bytes(),
    ])
}

/// Whether `image` is an AMD GPU code object: a 64-bit ELF for
/// `EM_AMDGPU` (224), what hiprtc returns.
pub fn is_amdgpu_code_object(image: &[u8]) -> bool {
    image.len() > 64 && image.starts_with(b"\x7fELF\x02") && image[18..20] == [224, 0]
}

/// The code object of `source` for `opts`: from `cache` when a valid one
/// is stored under its key, else compiled by hiprtc and stored (as the
/// CUDA back end caches its PTX, and keyed by the target architecture).
///
/// # Errors
/// As [`compile_hiprtc`]; a freshly compiled image that is not an AMD GPU
/// code object is [`Error::InternalError`].
pub fn cached_code_object(
    cache: &DiskCache,
    source: &str,
    opts: &HipKernelOptions,
) -> Result<(Vec<u8>, ImageSource)> {
    let rtc = hiprtc().map_err(Error::NotSupported)?;
    let key = hip_cache_key(source, opts, &rtc.identity());
    load_or_compile(
        cache,
        key,
        || compile_hiprtc(source, opts, false).map(|c| c.code),
        |image| {
            if is_amdgpu_code_object(image) {
                Ok(image.to_vec())
            } else {
                Err(Error::InternalError(format!(
                    "hiprtc returned {} bytes that are not an AMD GPU code object",
                    image.len()
                )))
            }
        },
    )
}

/// hiprtc's log of `program` (empty when it has none).
fn program_log(program: HiprtcProgram) -> Result<String> {
    let rtc = hiprtc().map_err(Error::NotSupported)?;
    let mut size = 0usize;
    // SAFETY: a live program.
    if unsafe { (rtc.get_program_log_size)(program, &mut size) } != 0 || size <= 1 {
        return Ok(String::new());
    }
    let mut buf = vec![0u8; size];
    // SAFETY: `buf` holds the `size` bytes hiprtc writes.
    if unsafe { (rtc.get_program_log)(program, buf.as_mut_ptr().cast()) } != 0 {
        return Ok(String::new());
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::kernel_source::ValueKind;

    #[test]
    fn wavefronts_follow_the_architecture_family() {
        assert_eq!(wavefront_of_arch("gfx906"), Some(64));
        assert_eq!(wavefront_of_arch("gfx90a:sramecc+:xnack-"), Some(64));
        assert_eq!(wavefront_of_arch("gfx942"), Some(64));
        assert_eq!(wavefront_of_arch("gfx803"), Some(64));
        assert_eq!(wavefront_of_arch("gfx1030"), Some(32));
        assert_eq!(wavefront_of_arch("gfx1100"), Some(32));
        assert_eq!(wavefront_of_arch("gfx1201"), Some(32));
        assert_eq!(wavefront_of_arch("sm_90"), None);
        assert_eq!(wavefront_of_arch("gfx"), None);
        assert_eq!(wavefront_of_arch("gfxzz9"), None);
    }

    #[test]
    fn cache_keys_separate_targets_and_types() {
        let opts = |arch: &str, index64| HipKernelOptions {
            types: KernelTypes {
                value: ValueKind::F64,
                offset64: false,
                index64,
            },
            warp: 64,
            arch: arch.into(),
        };
        let k = |o: &HipKernelOptions, src: &str, c: &str| hip_cache_key(src, o, c);
        let base = k(&opts("gfx906", false), "src", "hiprtc 9.0");
        assert_ne!(base, k(&opts("gfx90a", false), "src", "hiprtc 9.0"));
        assert_ne!(base, k(&opts("gfx906", true), "src", "hiprtc 9.0"));
        assert_ne!(base, k(&opts("gfx906", false), "src2", "hiprtc 9.0"));
        assert_ne!(base, k(&opts("gfx906", false), "src", "hiprtc 9.1"));
        assert_eq!(base, k(&opts("gfx906", false), "src", "hiprtc 9.0"));
    }

    #[test]
    fn code_objects_are_recognised() {
        let mut elf = vec![0u8; 128];
        elf[..5].copy_from_slice(b"\x7fELF\x02");
        elf[18] = 224;
        assert!(is_amdgpu_code_object(&elf));
        elf[18] = 62; // x86-64
        assert!(!is_amdgpu_code_object(&elf));
        assert!(!is_amdgpu_code_object(b"\x7fELF"));
        assert!(!is_amdgpu_code_object(&[0u8; 128]));
    }

    #[test]
    fn options_name_types_wavefront_and_target() {
        let opts = HipKernelOptions {
            types: KernelTypes {
                value: ValueKind::C64,
                offset64: true,
                index64: false,
            },
            warp: 64,
            arch: "gfx906".into(),
        };
        assert_eq!(
            opts.hiprtc_options(),
            [
                "-DRS_VALUE=3",
                "-DRS_OFFSET64=1",
                "-DRS_INDEX64=0",
                "-DRS_WARP=64",
                "--gpu-architecture=gfx906",
                "-std=c++17"
            ]
        );
    }
}
