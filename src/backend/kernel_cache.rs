//! The on-disk cache of compiled kernel images, shared by the CUDA (PTX,
//! CUBIN) and HIP (code objects) back ends: `$XDG_CACHE_HOME/rusparse` (else
//! `$HOME/.cache/rusparse`), one file per key, where the key is an FNV-1a
//! hash of the source, the compiler options, the target architecture and
//! the compiler's version. A cache that is missing, corrupt, unreadable or
//! unwritable only costs a compilation.

use crate::error::Result;
use std::path::{Path, PathBuf};

/// 64-bit FNV-1a, the stable hash of the cache key (no dependency, same
/// value on every platform and Rust version).
pub fn fnv1a64(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // Separate parts so that ("ab", "c") and ("a", "bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

const MAGIC: &[u8; 16] = b"rusparse-kernel1";
const HEADER: usize = 16 + 8 + 8 + 8;

/// The on-disk kernel cache: one file per key, `kernels-<key>.bin`, holding
/// a magic, the key, the length and an FNV-1a checksum before the image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskCache {
    dir: Option<PathBuf>,
}

impl DiskCache {
    /// `$XDG_CACHE_HOME/rusparse` when that variable is an absolute path,
    /// else `$HOME/.cache/rusparse`; disabled when neither is set.
    pub fn from_env() -> DiskCache {
        let xdg = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute());
        let home = || {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".cache"))
        };
        DiskCache {
            dir: xdg.or_else(home).map(|d| d.join("rusparse")),
        }
    }

    /// A cache in `dir` (created on the first store).
    pub fn at(dir: impl Into<PathBuf>) -> DiskCache {
        DiskCache {
            dir: Some(dir.into()),
        }
    }

    /// A cache that never finds nor stores anything.
    pub fn disabled() -> DiskCache {
        DiskCache { dir: None }
    }

    /// The folder, when enabled.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The file of `key`, when enabled.
    pub fn path(&self, key: u64) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(format!("kernels-{key:016x}.bin")))
    }

    /// The image stored under `key`; `None` when absent, unreadable or
    /// corrupt (wrong magic, key, length or checksum).
    pub fn load(&self, key: u64) -> Option<Vec<u8>> {
        let bytes = std::fs::read(self.path(key)?).ok()?;
        if bytes.len() < HEADER || &bytes[..16] != MAGIC {
            return None;
        }
        let word = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
        let (k, len, sum) = (word(16), word(24), word(32));
        let image = &bytes[HEADER..];
        (k == key && len == image.len() as u64 && sum == fnv1a64(&[image])).then(|| image.to_vec())
    }

    /// Stores `image` under `key`: written to a temporary file in the same
    /// folder, then renamed over the final name, so readers never see a
    /// partial file. Returns whether it was stored; failures (read-only
    /// folder, full disk) are not errors.
    pub fn store(&self, key: u64, image: &[u8]) -> bool {
        let (Some(dir), Some(path)) = (self.dir.as_ref(), self.path(key)) else {
            return false;
        };
        if std::fs::create_dir_all(dir).is_err() {
            return false;
        }
        let mut bytes = Vec::with_capacity(HEADER + image.len());
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&key.to_le_bytes());
        bytes.extend_from_slice(&(image.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&fnv1a64(&[image]).to_le_bytes());
        bytes.extend_from_slice(image);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let tmp = dir.join(format!(
            ".kernels-{key:016x}.{}.{nanos}.tmp",
            std::process::id()
        ));
        let ok = std::fs::write(&tmp, &bytes).is_ok() && std::fs::rename(&tmp, &path).is_ok();
        if !ok {
            let _ = std::fs::remove_file(&tmp);
        }
        ok
    }
}

/// Where a loaded image came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageSource {
    /// Read from the disk cache.
    Cache,
    /// Compiled in this call (and stored, when the cache is writable).
    Compiler,
}

/// Finds or makes the module for `key` and loads it with `load`:
///
/// 1. a cached image is loaded; when `load` refuses it (a stale or damaged
///    file that passed the checksum, a driver that changed), it is
///    recompiled and the file overwritten;
/// 2. otherwise `compile` runs, the image is stored, then loaded.
///
/// `compile` runs at most once. Errors of `compile` and of loading a
/// freshly compiled image are returned.
///
/// # Errors
/// Whatever `compile` or `load` return.
pub fn load_or_compile<T>(
    cache: &DiskCache,
    key: u64,
    compile: impl FnOnce() -> Result<Vec<u8>>,
    mut load: impl FnMut(&[u8]) -> Result<T>,
) -> Result<(T, ImageSource)> {
    if let Some(image) = cache.load(key) {
        if let Ok(loaded) = load(&image) {
            return Ok((loaded, ImageSource::Cache));
        }
    }
    let image = compile()?;
    // Stored only once the runtime took it: an image the driver refused
    // must not come back from the cache on the next call.
    let loaded = load(&image)?;
    cache.store(key, &image);
    Ok((loaded, ImageSource::Compiler))
}
