//! NVRTC, loaded at run time by rusparse itself (not through cudarc), so
//! that CUDA 12's and CUDA 13's libraries are both found and a user can
//! name the one to use.
//!
//! Where it looks, in order:
//! 1. `RUSPARSE_NVRTC`: the library file itself, or a folder holding it
//!    (e.g. the CUDA 13 wheel's `site-packages/nvidia/cu13/lib`); when it is
//!    set, nothing else is tried.
//! 2. `libnvrtc.so.13`, `libnvrtc.so.12`, `libnvrtc.so` through the dynamic
//!    loader's search (`LD_LIBRARY_PATH`, the system folders), newest
//!    first, skipping a version newer than the CUDA driver when the driver
//!    is loaded (its PTX would not JIT there).
//!
//! The functions are the C API both majors share; nothing here panics.

use crate::error::{Error, Result};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The variable naming NVRTC's library file or folder.
pub const NVRTC_ENV: &str = "RUSPARSE_NVRTC";

/// The library names tried through the loader's search, newest first.
pub const NVRTC_NAMES: [&str; 3] = ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"];

/// `nvrtcResult`.
pub type NvrtcResult = c_int;
/// `NVRTC_SUCCESS`.
pub const NVRTC_SUCCESS: NvrtcResult = 0;
/// `NVRTC_ERROR_INVALID_OPTION`: among others, an architecture this NVRTC
/// does not know.
pub const NVRTC_ERROR_INVALID_OPTION: NvrtcResult = 5;

/// An `nvrtcProgram`.
pub type NvrtcProgram = *mut c_void;

/// The loaded library and its functions.
pub struct Nvrtc {
    /// `(major, minor)` from `nvrtcVersion`.
    pub version: (i32, i32),
    /// The file or name it was loaded from.
    pub path: String,
    // Kept loaded for the process's lifetime: the function pointers below
    // point into it.
    _lib: libloading::Library,
    pub(crate) get_error_string: unsafe extern "C" fn(NvrtcResult) -> *const c_char,
    pub(crate) get_num_supported_archs: unsafe extern "C" fn(*mut c_int) -> NvrtcResult,
    pub(crate) get_supported_archs: unsafe extern "C" fn(*mut c_int) -> NvrtcResult,
    pub(crate) create_program: unsafe extern "C" fn(
        *mut NvrtcProgram,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> NvrtcResult,
    pub(crate) destroy_program: unsafe extern "C" fn(*mut NvrtcProgram) -> NvrtcResult,
    pub(crate) compile_program:
        unsafe extern "C" fn(NvrtcProgram, c_int, *const *const c_char) -> NvrtcResult,
    pub(crate) get_program_log_size: unsafe extern "C" fn(NvrtcProgram, *mut usize) -> NvrtcResult,
    pub(crate) get_program_log: unsafe extern "C" fn(NvrtcProgram, *mut c_char) -> NvrtcResult,
    pub(crate) get_ptx_size: unsafe extern "C" fn(NvrtcProgram, *mut usize) -> NvrtcResult,
    pub(crate) get_ptx: unsafe extern "C" fn(NvrtcProgram, *mut c_char) -> NvrtcResult,
    pub(crate) get_cubin_size: unsafe extern "C" fn(NvrtcProgram, *mut usize) -> NvrtcResult,
    pub(crate) get_cubin: unsafe extern "C" fn(NvrtcProgram, *mut c_char) -> NvrtcResult,
}

impl std::fmt::Debug for Nvrtc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "NVRTC {}.{} ({})",
            self.version.0, self.version.1, self.path
        )
    }
}

impl Nvrtc {
    /// `nvrtcGetErrorString`.
    pub fn error_string(&self, r: NvrtcResult) -> String {
        // SAFETY: NVRTC returns a static string for any value.
        let p = unsafe { (self.get_error_string)(r) };
        if p.is_null() {
            return format!("NVRTC error {r}");
        }
        // SAFETY: non-NULL, NUL-terminated.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// `Ok` for `NVRTC_SUCCESS`, else the error string with `what`.
    pub fn check(&self, what: &str, r: NvrtcResult) -> Result<()> {
        if r == NVRTC_SUCCESS {
            Ok(())
        } else {
            Err(Error::InternalError(format!(
                "{what}: {} ({r})",
                self.error_string(r)
            )))
        }
    }
}

/// The message for a missing NVRTC.
pub fn missing_message(tried: &[String], why: &[String]) -> String {
    format!(
        "NVRTC not found (tried {}{}): install the CUDA toolkit, or `pip install \
         nvidia-cuda-nvrtc-cu12` (or the CUDA 13 wheel, `nvidia-cuda-nvrtc`) and put its lib \
         folder on LD_LIBRARY_PATH, or set {NVRTC_ENV} to the library file or its folder",
        tried.join(", "),
        if why.is_empty() {
            String::new()
        } else {
            format!("; {}", why.join("; "))
        }
    )
}

/// The candidates to try: `RUSPARSE_NVRTC` alone when set (a folder: the
/// known names inside it), else [`NVRTC_NAMES`].
pub fn candidates(env: Option<&str>) -> Vec<String> {
    match env.map(str::trim).filter(|v| !v.is_empty()) {
        Some(v) if Path::new(v).is_dir() => NVRTC_NAMES
            .iter()
            .map(|n| PathBuf::from(v).join(n).to_string_lossy().into_owned())
            .collect(),
        Some(v) => vec![v.to_string()],
        None => NVRTC_NAMES.iter().map(|n| n.to_string()).collect(),
    }
}

/// Whether an NVRTC of `major` can serve a driver for CUDA
/// `driver_version` (e.g. 12080): its PTX needs a driver of the same major
/// or newer. Without a driver (compile-only use) any version will do.
pub fn fits_driver(major: i32, driver_version: Option<i32>) -> bool {
    driver_version.is_none_or(|v| major <= v / 1000)
}

/// NVRTC, loaded once per process.
///
/// # Errors
/// [`Error::NotSupported`] naming every candidate tried and why it was not
/// taken.
pub fn nvrtc() -> Result<&'static Nvrtc> {
    let _process_wide = crate::host_allocator::process_wide();
    static LOADED: OnceLock<std::result::Result<Nvrtc, String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let env = std::env::var(NVRTC_ENV).ok();
            let tried = candidates(env.as_deref());
            let driver = super::loader::driver().ok().map(|d| d.version);
            let mut why = Vec::new();
            for name in &tried {
                match load(name) {
                    Ok(n) if fits_driver(n.version.0, driver) => return Ok(n),
                    Ok(n) => why.push(format!(
                        "{name} is NVRTC {}.{}, newer than the driver's CUDA {}.{}",
                        n.version.0,
                        n.version.1,
                        driver.unwrap_or(0) / 1000,
                        driver.unwrap_or(0) % 1000 / 10
                    )),
                    Err(e) if env.is_some() => why.push(e),
                    // A name the search did not find: said by the list.
                    Err(_) => {}
                }
            }
            Err(missing_message(&tried, &why))
        })
        .as_ref()
        .map_err(|e| Error::NotSupported(e.clone()))
}

fn load(name: &str) -> std::result::Result<Nvrtc, String> {
    // SAFETY: loading NVRTC runs no initialisation code of concern.
    let lib = unsafe { libloading::Library::new(name) }.map_err(|e| format!("{name}: {e}"))?;
    macro_rules! sym {
        ($n:literal) => {
            // SAFETY: the symbol has the C signature of the field it is
            // stored in (NVRTC's public API, the same in CUDA 12 and 13).
            *unsafe { lib.get(concat!($n, "\0").as_bytes()) }
                .map_err(|e| format!("{name}: {}: {e}", $n))?
        };
    }
    let version_fn: unsafe extern "C" fn(*mut c_int, *mut c_int) -> NvrtcResult =
        sym!("nvrtcVersion");
    let (mut major, mut minor) = (0, 0);
    // SAFETY: valid out pointers.
    if unsafe { version_fn(&mut major, &mut minor) } != NVRTC_SUCCESS {
        return Err(format!("{name}: nvrtcVersion failed"));
    }
    let n = Nvrtc {
        version: (major, minor),
        path: name.to_string(),
        get_error_string: sym!("nvrtcGetErrorString"),
        get_num_supported_archs: sym!("nvrtcGetNumSupportedArchs"),
        get_supported_archs: sym!("nvrtcGetSupportedArchs"),
        create_program: sym!("nvrtcCreateProgram"),
        destroy_program: sym!("nvrtcDestroyProgram"),
        compile_program: sym!("nvrtcCompileProgram"),
        get_program_log_size: sym!("nvrtcGetProgramLogSize"),
        get_program_log: sym!("nvrtcGetProgramLog"),
        get_ptx_size: sym!("nvrtcGetPTXSize"),
        get_ptx: sym!("nvrtcGetPTX"),
        get_cubin_size: sym!("nvrtcGetCUBINSize"),
        get_cubin: sym!("nvrtcGetCUBIN"),
        _lib: lib,
    };
    Ok(n)
}

/// A program, destroyed on drop.
pub(crate) struct Program<'a> {
    nv: &'a Nvrtc,
    prog: NvrtcProgram,
}

impl<'a> Program<'a> {
    /// `nvrtcCreateProgram` of `source` named `name`.
    pub(crate) fn new(nv: &'a Nvrtc, source: &CStr, name: &CStr) -> Result<Program<'a>> {
        let mut prog: NvrtcProgram = std::ptr::null_mut();
        // SAFETY: NUL-terminated strings; no headers.
        let r = unsafe {
            (nv.create_program)(
                &mut prog,
                source.as_ptr(),
                name.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        nv.check("nvrtcCreateProgram", r)?;
        Ok(Program { nv, prog })
    }

    /// `nvrtcCompileProgram` with `options`; the raw result.
    pub(crate) fn compile(&self, options: &[String]) -> Result<NvrtcResult> {
        let c: Vec<CString> = options
            .iter()
            .map(|o| CString::new(o.as_str()))
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| Error::InternalError("an NVRTC option contains NUL".into()))?;
        let ptrs: Vec<*const c_char> = c.iter().map(|s| s.as_ptr()).collect();
        // SAFETY: a live program; `ptrs` holds `c.len()` valid strings.
        Ok(unsafe { (self.nv.compile_program)(self.prog, ptrs.len() as c_int, ptrs.as_ptr()) })
    }

    /// The program's log (without its NUL).
    pub(crate) fn log(&self) -> String {
        let bytes = self.read(self.nv.get_program_log_size, self.nv.get_program_log);
        String::from_utf8_lossy(&bytes.unwrap_or_default())
            .trim_end_matches('\0')
            .to_string()
    }

    /// The PTX, NUL-terminated.
    pub(crate) fn ptx(&self) -> Result<Vec<u8>> {
        let mut bytes = self.read(self.nv.get_ptx_size, self.nv.get_ptx)?;
        if let Some(end) = bytes.iter().position(|&c| c == 0) {
            bytes.truncate(end);
        }
        bytes.push(0);
        Ok(bytes)
    }

    /// The CUBIN.
    pub(crate) fn cubin(&self) -> Result<Vec<u8>> {
        self.read(self.nv.get_cubin_size, self.nv.get_cubin)
    }

    fn read(
        &self,
        size: unsafe extern "C" fn(NvrtcProgram, *mut usize) -> NvrtcResult,
        get: unsafe extern "C" fn(NvrtcProgram, *mut c_char) -> NvrtcResult,
    ) -> Result<Vec<u8>> {
        let mut n = 0usize;
        // SAFETY: a live program; a valid out pointer.
        self.nv.check("reading an NVRTC output's size", unsafe {
            size(self.prog, &mut n)
        })?;
        let mut bytes = vec![0u8; n];
        // SAFETY: `bytes` holds the size NVRTC asked for.
        self.nv.check("reading an NVRTC output", unsafe {
            get(self.prog, bytes.as_mut_ptr().cast())
        })?;
        Ok(bytes)
    }
}

impl Drop for Program<'_> {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        unsafe { (self.nv.destroy_program)(&mut self.prog) };
    }
}

/// The architectures `nv` compiles for, as `10 * major + minor`.
///
/// # Errors
/// An NVRTC error.
pub fn supported_archs(nv: &Nvrtc) -> Result<Vec<u32>> {
    let mut n = 0;
    // SAFETY: a valid out pointer.
    nv.check("nvrtcGetNumSupportedArchs", unsafe {
        (nv.get_num_supported_archs)(&mut n)
    })?;
    let mut archs = vec![0 as c_int; n.max(0) as usize];
    // SAFETY: `archs` holds `n` entries.
    nv.check("nvrtcGetSupportedArchs", unsafe {
        (nv.get_supported_archs)(archs.as_mut_ptr())
    })?;
    Ok(archs
        .into_iter()
        .filter(|&a| a > 0)
        .map(|a| a as u32)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_follow_the_environment() {
        assert_eq!(candidates(None), NVRTC_NAMES.map(String::from).to_vec());
        assert_eq!(
            candidates(Some("  ")),
            NVRTC_NAMES.map(String::from).to_vec()
        );
        assert_eq!(
            candidates(Some("/opt/x/libnvrtc.so.13")),
            vec!["/opt/x/libnvrtc.so.13".to_string()]
        );
        let dir = std::env::temp_dir();
        let got = candidates(Some(dir.to_str().unwrap()));
        assert_eq!(got.len(), 3);
        assert!(got[0].ends_with("libnvrtc.so.13") && got[0].starts_with(dir.to_str().unwrap()));
    }

    #[test]
    fn an_nvrtc_newer_than_the_driver_is_passed_over() {
        assert!(fits_driver(12, Some(12080)));
        assert!(fits_driver(12, Some(13000)));
        assert!(fits_driver(13, Some(13000)));
        assert!(!fits_driver(13, Some(12080)));
        assert!(fits_driver(13, None));
    }

    #[test]
    fn a_missing_library_names_what_was_tried() {
        let m = missing_message(&["a.so".into(), "b.so".into()], &["a.so: no".into()]);
        assert!(
            m.contains("tried a.so, b.so; a.so: no") && m.contains(NVRTC_ENV),
            "{m}"
        );
    }
}
