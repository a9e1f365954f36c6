//! A Matrix Market reader: `coordinate` and `array` formats; `real`,
//! `double`, `integer`, `complex` and `pattern` fields; `general`,
//! `symmetric`, `skew-symmetric` and `hermitian` symmetry. `.mtx.gz` files
//! are decompressed on the fly.
//!
//! Symmetric storage is expanded to both triangles (the diagonal once);
//! skew-symmetric mirrors get the negated value and hermitian mirrors the
//! conjugate. Pattern entries get the value 1. Explicitly stored zeros are
//! kept as entries. Duplicate coordinates are summed (as scipy does when it
//! converts to CSR).

use crate::sparse::{SparseMatrix, Values};
use num_complex::Complex64;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Real,
    Integer,
    Complex,
    Pattern,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Symmetry {
    General,
    Symmetric,
    Skew,
    Hermitian,
}

/// Reads a `.mtx` or `.mtx.gz` file.
pub fn read_path(path: &Path) -> Result<SparseMatrix, String> {
    let file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let gz = path.to_string_lossy().ends_with(".gz");
    let reader: Box<dyn Read> = if gz {
        Box::new(flate2::read::MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    };
    read(BufReader::with_capacity(1 << 20, reader)).map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads a Matrix Market text.
pub fn read(mut input: impl BufRead) -> Result<SparseMatrix, String> {
    let mut line = String::new();
    let mut line_no = 0usize;
    let mut next_line = |line: &mut String| -> Result<bool, String> {
        line.clear();
        line_no += 1;
        input
            .read_line(line)
            .map(|n| n > 0)
            .map_err(|e| format!("read error at line {line_no}: {e}"))
    };

    // Header.
    if !next_line(&mut line)? {
        return Err("empty file (expected a %%MatrixMarket header)".into());
    }
    let header: Vec<String> = line.split_whitespace().map(str::to_lowercase).collect();
    if header.len() != 5 || header[0] != "%%matrixmarket" || header[1] != "matrix" {
        return Err(format!(
            "bad header {:?}: expected '%%MatrixMarket matrix <format> <field> <symmetry>'",
            line.trim_end()
        ));
    }
    let coordinate = match header[2].as_str() {
        "coordinate" => true,
        "array" => false,
        f => return Err(format!("unsupported format {f:?} (coordinate or array)")),
    };
    let field = match header[3].as_str() {
        "real" | "double" => Field::Real,
        "integer" => Field::Integer,
        "complex" => Field::Complex,
        "pattern" => Field::Pattern,
        f => return Err(format!("unsupported field {f:?}")),
    };
    let symmetry = match header[4].as_str() {
        "general" => Symmetry::General,
        "symmetric" => Symmetry::Symmetric,
        "skew-symmetric" => Symmetry::Skew,
        "hermitian" => Symmetry::Hermitian,
        s => return Err(format!("unsupported symmetry {s:?}")),
    };
    if symmetry == Symmetry::Hermitian && field != Field::Complex {
        return Err("hermitian symmetry needs complex values".into());
    }
    if field == Field::Pattern && (!coordinate || symmetry == Symmetry::Skew) {
        return Err("pattern matrices must be coordinate, general or symmetric".into());
    }

    // Size line, after comments and blank lines.
    let size: Vec<usize> = loop {
        if !next_line(&mut line)? {
            return Err("missing size line".into());
        }
        let t = line.trim();
        if t.is_empty() || t.starts_with('%') {
            continue;
        }
        break t
            .split_whitespace()
            .map(|w| w.parse::<usize>())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("bad size line {t:?}"))?;
    };
    let want = if coordinate { 3 } else { 2 };
    if size.len() != want {
        return Err(format!(
            "the size line has {} numbers, expected {want}",
            size.len()
        ));
    }
    let (nrows, ncols) = (size[0], size[1]);
    if symmetry != Symmetry::General && nrows != ncols {
        return Err(format!("a {nrows} x {ncols} matrix cannot be {symmetry:?}"));
    }
    let stored = if coordinate {
        size[2]
    } else {
        match symmetry {
            Symmetry::General => nrows * ncols,
            Symmetry::Skew => nrows * nrows.saturating_sub(1) / 2,
            _ => nrows * (nrows + 1) / 2,
        }
    };

    // Entries: (row, col, value), zero-based.
    let complex = field == Field::Complex;
    let mut rows = Vec::with_capacity(stored);
    let mut cols = Vec::with_capacity(stored);
    let mut re = Vec::with_capacity(stored);
    let mut im = Vec::with_capacity(if complex { stored } else { 0 });
    // Position of the next value in an array file: column-major, and only
    // the lower triangle (strictly lower when skew) unless general.
    let first_row = |j: usize| match symmetry {
        Symmetry::General => 0,
        Symmetry::Skew => j + 1,
        _ => j,
    };
    let (mut ai, mut aj) = (first_row(0), 0usize);
    let mut count = 0usize;
    while next_line(&mut line)? {
        let t = line.trim();
        if t.is_empty() || t.starts_with('%') {
            continue;
        }
        if count == stored {
            return Err(format!(
                "more than the {stored} entries the size line announces"
            ));
        }
        let mut words = t.split_whitespace();
        let bad = || format!("bad entry {t:?} (entry {})", count + 1);
        let (i, j) = if coordinate {
            let mut index = |n: usize| -> Result<usize, String> {
                let v: usize = words.next().and_then(|w| w.parse().ok()).ok_or_else(bad)?;
                if v == 0 || v > n {
                    return Err(format!("{} is out of range 1..={n} in entry {t:?}", v));
                }
                Ok(v - 1)
            };
            (index(nrows)?, index(ncols)?)
        } else {
            (ai, aj)
        };
        let mut number =
            || -> Result<f64, String> { words.next().and_then(|w| w.parse().ok()).ok_or_else(bad) };
        let (vr, vi) = match field {
            Field::Pattern => (1.0, 0.0),
            Field::Real | Field::Integer => (number()?, 0.0),
            Field::Complex => (number()?, number()?),
        };
        if words.next().is_some() {
            return Err(format!("{}: extra words", bad()));
        }
        rows.push(i);
        cols.push(j);
        re.push(vr);
        if complex {
            im.push(vi);
        }
        count += 1;
        if !coordinate {
            ai += 1;
            while ai >= nrows && aj < ncols {
                aj += 1;
                ai = first_row(aj);
            }
        }
    }
    if count != stored {
        return Err(format!(
            "the size line announces {stored} entries but the file holds {count}"
        ));
    }

    // Mirror the other triangle.
    if symmetry != Symmetry::General {
        for k in 0..count {
            let (i, j) = (rows[k], cols[k]);
            if i == j {
                continue;
            }
            rows.push(j);
            cols.push(i);
            match symmetry {
                Symmetry::Skew => {
                    re.push(-re[k]);
                    if complex {
                        im.push(-im[k]);
                    }
                }
                Symmetry::Hermitian => {
                    re.push(re[k]);
                    im.push(-im[k]);
                }
                _ => {
                    re.push(re[k]);
                    if complex {
                        im.push(im[k]);
                    }
                }
            }
        }
    }
    Ok(to_csr(
        nrows,
        ncols,
        &rows,
        &cols,
        &re,
        complex.then_some(&im[..]),
    ))
}

/// Counting sort by row, sort each row by column, sum duplicates.
fn to_csr(
    nrows: usize,
    ncols: usize,
    rows: &[usize],
    cols: &[usize],
    re: &[f64],
    im: Option<&[f64]>,
) -> SparseMatrix {
    let mut start = vec![0usize; nrows + 1];
    for &r in rows {
        start[r + 1] += 1;
    }
    for i in 0..nrows {
        start[i + 1] += start[i];
    }
    let mut next = start.clone();
    let mut order = vec![0usize; rows.len()];
    for (k, &r) in rows.iter().enumerate() {
        order[next[r]] = k;
        next[r] += 1;
    }
    let mut indptr = Vec::with_capacity(nrows + 1);
    let mut indices = Vec::with_capacity(rows.len());
    let mut vals_re = Vec::with_capacity(rows.len());
    let mut vals_im = Vec::with_capacity(if im.is_some() { rows.len() } else { 0 });
    indptr.push(0);
    for i in 0..nrows {
        let row = &mut order[start[i]..start[i + 1]];
        row.sort_by_key(|&k| cols[k]);
        for &k in row.iter() {
            if indices.len() > indptr[i] && indices[indices.len() - 1] == cols[k] {
                *vals_re.last_mut().unwrap() += re[k];
                if let (Some(im), Some(last)) = (im, vals_im.last_mut()) {
                    *last += im[k];
                }
                continue;
            }
            indices.push(cols[k]);
            vals_re.push(re[k]);
            if let Some(im) = im {
                vals_im.push(im[k]);
            }
        }
        indptr.push(indices.len());
    }
    let values = match im {
        None => Values::Real(vals_re),
        Some(_) => Values::Complex(
            vals_re
                .into_iter()
                .zip(vals_im)
                .map(|(r, i)| Complex64::new(r, i))
                .collect(),
        ),
    };
    SparseMatrix {
        nrows,
        ncols,
        indptr,
        indices,
        values,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SparseMatrix, String> {
        read(text.as_bytes())
    }

    fn real(m: &SparseMatrix) -> &[f64] {
        match &m.values {
            Values::Real(v) => v,
            Values::Complex(_) => panic!("expected real values"),
        }
    }

    #[test]
    fn general_real_with_comments_blank_lines_and_explicit_zero() {
        let m = parse(
            "%%MatrixMarket matrix coordinate real general\n\
             % a comment\n\
             \n\
             %another\n\
             3 4 4\n\
             3 4 -2.5e0\n\
             \n\
             1 2 1.5\n\
             1 1 0\n\
             % trailing comment\n\
             2 3 7\n",
        )
        .unwrap();
        assert!(m.is_canonical());
        assert_eq!((m.nrows, m.ncols), (3, 4));
        assert_eq!(m.indptr, [0, 2, 3, 4]);
        assert_eq!(m.indices, [0, 1, 2, 3]);
        // The explicit zero stays an entry.
        assert_eq!(real(&m), &[0.0, 1.5, 7.0, -2.5]);
    }

    #[test]
    fn symmetric_expands_without_duplicating_the_diagonal() {
        let m = parse(
            "%%MatrixMarket matrix coordinate integer symmetric\n\
             3 3 4\n1 1 4\n2 1 -1\n3 2 -2\n3 3 5\n",
        )
        .unwrap();
        assert_eq!(m.nnz(), 6);
        assert_eq!(m.indptr, [0, 2, 4, 6]);
        assert_eq!(m.indices, [0, 1, 0, 2, 1, 2]);
        assert_eq!(real(&m), &[4.0, -1.0, -1.0, -2.0, -2.0, 5.0]);
    }

    #[test]
    fn skew_symmetric_negates_the_mirror() {
        let m = parse(
            "%%MatrixMarket matrix coordinate real skew-symmetric\n\
             3 3 2\n2 1 3\n3 1 -4\n",
        )
        .unwrap();
        assert_eq!(m.indices, [1, 2, 0, 0]);
        assert_eq!(real(&m), &[-3.0, 4.0, 3.0, -4.0]);
    }

    #[test]
    fn pattern_entries_are_one() {
        let m = parse(
            "%%MatrixMarket matrix coordinate pattern symmetric\n\
             3 3 3\n1 1\n2 1\n3 2\n",
        )
        .unwrap();
        assert_eq!(m.nnz(), 5);
        assert_eq!(real(&m), &[1.0; 5]);
    }

    #[test]
    fn complex_and_hermitian() {
        let m = parse(
            "%%MatrixMarket matrix coordinate complex hermitian\n\
             2 2 2\n1 1 2 0\n2 1 1 -3\n",
        )
        .unwrap();
        let Values::Complex(v) = &m.values else {
            panic!("expected complex values")
        };
        assert_eq!(m.indices, [0, 1, 0]);
        assert_eq!(
            v,
            &[
                Complex64::new(2.0, 0.0),
                Complex64::new(1.0, 3.0),
                Complex64::new(1.0, -3.0)
            ]
        );
        let g =
            parse("%%MatrixMarket matrix coordinate complex general\n1 2 1\n1 2 0.5 -1\n").unwrap();
        assert_eq!(g.values, Values::Complex(vec![Complex64::new(0.5, -1.0)]));
    }

    #[test]
    fn duplicates_are_summed() {
        let m =
            parse("%%MatrixMarket matrix coordinate real general\n2 2 3\n1 2 1\n1 2 2\n2 1 4\n")
                .unwrap();
        assert_eq!(m.indices, [1, 0]);
        assert_eq!(real(&m), &[3.0, 4.0]);
    }

    #[test]
    fn array_format_general_and_symmetric() {
        let g = parse("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n").unwrap();
        // Column-major: [[1, 3], [2, 4]].
        assert_eq!(real(&g), &[1.0, 3.0, 2.0, 4.0]);
        let s = parse("%%MatrixMarket matrix array real symmetric\n2 2\n1\n2\n4\n").unwrap();
        assert_eq!(s.indices, [0, 1, 0, 1]);
        assert_eq!(real(&s), &[1.0, 2.0, 2.0, 4.0]);
    }

    #[test]
    fn malformed_input_is_refused_with_a_message() {
        let cases = [
            ("", "empty file"),
            (
                "%%MatrixMarket matrix coordinate real\n1 1 0\n",
                "bad header",
            ),
            (
                "%MatrixMarket matrix coordinate real general\n1 1 0\n",
                "bad header",
            ),
            (
                "%%MatrixMarket matrix coordinate float general\n1 1 0\n",
                "unsupported field",
            ),
            (
                "%%MatrixMarket matrix coordinate real general\n",
                "missing size line",
            ),
            (
                "%%MatrixMarket matrix coordinate real general\n2 2\n",
                "expected 3",
            ),
            (
                "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n",
                "holds 1",
            ),
            (
                "%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1\n",
                "out of range",
            ),
            (
                "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 x\n",
                "bad entry",
            ),
            (
                "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\n2 2 2\n",
                "more than",
            ),
            (
                "%%MatrixMarket matrix coordinate real symmetric\n2 3 0\n",
                "cannot be",
            ),
            (
                "%%MatrixMarket matrix coordinate real hermitian\n2 2 0\n",
                "hermitian",
            ),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    fn shared(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/matrices")
            .join(name)
    }

    #[test]
    fn reads_1138_bus() {
        let path = shared("1138_bus.mtx");
        if !path.exists() {
            eprintln!("skipping: {} not found", path.display());
            return;
        }
        let m = read_path(&path).unwrap();
        assert_eq!((m.nrows, m.ncols, m.nnz()), (1138, 1138, 4054));
        assert!(m.is_canonical());
        // Symmetric: the pattern and values mirror.
        let v = real(&m);
        for i in 0..m.nrows {
            for (k, &j) in m.row(i).iter().enumerate() {
                let back = m.row(j).binary_search(&i).expect("mirror entry");
                assert_eq!(v[m.indptr[i] + k], v[m.indptr[j] + back]);
            }
        }
        assert_eq!(
            (0..m.nrows).filter(|&i| m.row(i).contains(&i)).count(),
            1138
        );
    }

    #[test]
    fn reads_gzipped_complex_and_explicit_zeros() {
        let qc = shared("qc324.mtx.gz");
        let ex = shared("ex31.mtx.gz");
        if !qc.exists() || !ex.exists() {
            eprintln!("skipping: shared matrices not found");
            return;
        }
        let q = read_path(&qc).unwrap();
        assert_eq!((q.nrows, q.ncols, q.nnz()), (324, 324, 26730));
        assert!(q.is_complex());
        let e = read_path(&ex).unwrap();
        assert_eq!((e.nrows, e.nnz()), (3909, 115357));
        assert_eq!(real(&e).iter().filter(|&&x| x == 0.0).count(), 24134);
    }

    #[test]
    fn unreadable_file_names_the_path() {
        let e = read_path(Path::new("/nonexistent/x.mtx")).unwrap_err();
        assert!(e.contains("cannot open /nonexistent/x.mtx"), "{e}");
    }
}
