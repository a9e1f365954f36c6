//! A writer for one-dimensional NumPy `.npy` files (format version 1.0):
//! the magic `\x93NUMPY`, version bytes `1 0`, a little-endian `u16` header
//! length, an ASCII header dict padded with spaces to a multiple of 64 bytes
//! and ending in `\n`, then the raw little-endian data.

use num_complex::Complex64;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// An element type `.npy` files store.
pub trait NpyElement: Copy {
    /// The NumPy type descriptor (`<i8`, `<f8`, `<c16`).
    const DESCR: &'static str;
    /// Appends the little-endian bytes of `self`.
    fn put(self, out: &mut Vec<u8>);
}

impl NpyElement for i64 {
    const DESCR: &'static str = "<i8";
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl NpyElement for f64 {
    const DESCR: &'static str = "<f8";
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl NpyElement for Complex64 {
    const DESCR: &'static str = "<c16";
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.re.to_le_bytes());
        out.extend_from_slice(&self.im.to_le_bytes());
    }
}

/// The header of a 1-D array of `len` elements of type `descr`: magic,
/// version, header length and the padded dict.
pub fn header(descr: &str, len: usize) -> Vec<u8> {
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({len},), }}");
    // 10 bytes of preamble + dict + padding + '\n' is a multiple of 64.
    let used = 10 + dict.len() + 1;
    dict.push_str(&" ".repeat((64 - used % 64) % 64));
    dict.push('\n');
    let mut out = Vec::with_capacity(10 + dict.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out
}

/// Writes `data` as a 1-D `.npy` file.
pub fn write<T: NpyElement>(
    path: &Path,
    data: impl ExactSizeIterator<Item = T>,
) -> Result<(), String> {
    let err = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let mut w = BufWriter::with_capacity(1 << 20, File::create(path).map_err(err)?);
    w.write_all(&header(T::DESCR, data.len())).map_err(err)?;
    let mut buf = Vec::with_capacity(1 << 16);
    for x in data {
        x.put(&mut buf);
        if buf.len() >= 1 << 16 {
            w.write_all(&buf).map_err(err)?;
            buf.clear();
        }
    }
    w.write_all(&buf).map_err(err)?;
    w.flush().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Splits a `.npy` file into (header dict, data bytes), checking the preamble.
    fn split(bytes: &[u8]) -> (String, &[u8]) {
        assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
        let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0, "header not padded to 64 bytes");
        let dict = std::str::from_utf8(&bytes[10..10 + hlen])
            .unwrap()
            .to_string();
        assert!(dict.ends_with('\n'));
        (dict, &bytes[10 + hlen..])
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("rusparse-bench-npy-{}-{name}", std::process::id()))
    }

    #[test]
    fn int64_round_trip() {
        let path = tmp("i8.npy");
        let data = [0i64, -1, 1 << 40, 7];
        write(&path, data.iter().copied()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let (dict, body) = split(&bytes);
        assert_eq!(
            dict.trim_end(),
            "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }"
        );
        let back: Vec<i64> = body
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(back, data);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn float_and_complex_round_trip() {
        let path = tmp("c16.npy");
        let data = [Complex64::new(1.5, -2.0), Complex64::new(0.0, 1e-300)];
        write(&path, data.iter().copied()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let (dict, body) = split(&bytes);
        assert!(dict.contains("'descr': '<c16'") && dict.contains("'shape': (2,)"));
        assert_eq!(body.len(), 32);
        let f: Vec<f64> = body
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(f, [1.5, -2.0, 0.0, 1e-300]);
        std::fs::remove_file(&path).unwrap();

        write(&path, std::iter::empty::<f64>()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let (dict, body) = split(&bytes);
        assert!(dict.contains("'descr': '<f8'") && dict.contains("'shape': (0,)"));
        assert!(body.is_empty());
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn headers_are_padded_for_every_length() {
        for len in [0usize, 9, 10, 99_999, usize::MAX] {
            let h = header("<f8", len);
            assert_eq!(h.len() % 64, 0);
            assert_eq!(h[h.len() - 1], b'\n');
        }
    }
}
