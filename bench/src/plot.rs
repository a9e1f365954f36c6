//! A grouped bar chart of GFLOPS per matrix and per tool, as a PNG.
//!
//! Text uses DejaVu Sans, bundled by the `dejavu` crate and rendered with
//! plotters' `ab_glyph` feature, so no system font library is needed.

use crate::report::{matrices, tools, Row};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{register_font, FontStyle, FontTransform};
use std::path::Path;
use std::sync::Once;

const FONT: &str = "sans-serif";

/// Bar colours, one per series (repeats after ten).
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

fn register_fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bundled font is a valid TrueType file; a failure here would
        // only lose the text, which the drawing calls then report.
        let _ = register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
        let _ = register_font(FONT, FontStyle::Bold, dejavu::sans::bold());
    });
}

/// One bar series: a tool, or a tool with one value type / thread count
/// when a tool has rows of several.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// GFLOPS per matrix (in [`matrices`] order); `None` where not measured.
    pub gflops: Vec<Option<f64>>,
}

/// The series of a plot, from the rows.
pub fn series(rows: &[Row]) -> Vec<Series> {
    let mats = matrices(rows);
    let key = |r: &Row| (r.tool.clone(), r.value.clone(), r.index.clone(), r.threads);
    let mut out = Vec::new();
    for tool in tools(rows) {
        let mut keys = Vec::new();
        for r in rows.iter().filter(|r| r.tool == tool) {
            if !keys.contains(&key(r)) {
                keys.push(key(r));
            }
        }
        let several = keys.len() > 1;
        for k in keys {
            let label = if several {
                format!("{} {}/{} {}t", k.0, k.1, k.2, k.3)
            } else {
                k.0.clone()
            };
            let gflops = mats
                .iter()
                .map(|m| {
                    rows.iter()
                        .find(|r| &r.matrix == m && key(r) == k)
                        .map(|r| r.gflops)
                })
                .collect();
            out.push(Series { label, gflops });
        }
    }
    out
}

/// Draws the chart of `rows` into the PNG file `path`.
pub fn plot(rows: &[Row], path: &Path) -> Result<(), String> {
    if rows.is_empty() {
        return Err("nothing to plot: no rows".into());
    }
    register_fonts();
    let err = |e: &dyn std::fmt::Display| format!("cannot draw {}: {e}", path.display());
    let mats = matrices(rows);
    let series = series(rows);
    let n = mats.len();
    let per_group = (series.len() as u32 * 36 + 40).max(110);
    let width = (140 + n as u32 * per_group).clamp(800, 8000);
    // Matrix names under the groups, rotated when they do not fit.
    let label_font = (FONT, 14).into_font();
    let widest = mats
        .iter()
        .map(|m| label_font.box_size(m).map_or(0, |s| s.0))
        .max()
        .unwrap_or(0);
    let plot_width = width.saturating_sub(120);
    let rotate = widest + 8 > plot_width / n.max(1) as u32;
    let label_area = if rotate { (widest + 20).min(800) } else { 40 };
    let height = 600 + label_area;

    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;

    let ymax = series
        .iter()
        .flat_map(|s| s.gflops.iter().flatten())
        .fold(0.0f64, |a, &b| a.max(b));
    let ymax = if ymax > 0.0 { ymax * 1.3 } else { 1.0 };
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "SpGEMM throughput (GFLOPS = 2 nprod / median time; higher is better)",
            (FONT, 20),
        )
        .margin(16)
        .x_label_area_size(label_area)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..n as f64, 0f64..ymax)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("GFLOPS")
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .draw()
        .map_err(|e| err(&e))?;

    let bar = 0.8 / series.len() as f64;
    let bar_px = {
        let (x0, _) = chart.backend_coord(&(0.0, 0.0));
        let (x1, _) = chart.backend_coord(&(bar, 0.0));
        x1 - x0
    };
    for (s_idx, s) in series.iter().enumerate() {
        let color = COLORS[s_idx % COLORS.len()];
        let bars = s.gflops.iter().enumerate().filter_map(|(m, g)| {
            let x0 = m as f64 + 0.1 + s_idx as f64 * bar;
            g.map(|g| Rectangle::new([(x0, 0.0), (x0 + bar, g)], color.filled()))
        });
        chart
            .draw_series(bars)
            .map_err(|e| err(&e))?
            .label(s.label.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
        if bar_px >= 28 {
            let values = s.gflops.iter().enumerate().filter_map(|(m, g)| {
                let x = m as f64 + 0.1 + (s_idx as f64 + 0.5) * bar;
                g.map(|g| {
                    Text::new(
                        format_gflops(g),
                        (x, g),
                        (FONT, 11)
                            .into_font()
                            .color(&BLACK)
                            .pos(Pos::new(HPos::Center, VPos::Bottom)),
                    )
                })
            });
            chart.draw_series(values).map_err(|e| err(&e))?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 14))
        .draw()
        .map_err(|e| err(&e))?;

    for (m, name) in mats.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(m as f64 + 0.5, 0.0));
        let style = if rotate {
            label_font
                .clone()
                .transform(FontTransform::Rotate90)
                .color(&BLACK)
                .pos(Pos::new(HPos::Left, VPos::Center))
        } else {
            label_font
                .clone()
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Top))
        };
        root.draw(&Text::new(name.clone(), (x, y + 8), style))
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

fn format_gflops(g: f64) -> String {
    if g >= 10.0 {
        format!("{g:.1}")
    } else {
        format!("{g:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::TOOL;

    fn row(tool: &str, matrix: &str, gflops: f64, value: &str) -> Row {
        Row {
            tool: tool.into(),
            matrix: matrix.into(),
            rows: 1,
            cols: 1,
            nnz_a: 1,
            nprod: 1,
            nnz_c: 1,
            median_s: 1.0,
            min_s: 1.0,
            max_s: 1.0,
            gflops,
            peak_extra_bytes: None,
            algorithm: String::new(),
            threads: 2,
            value: value.into(),
            index: "i32".into(),
            ..Row::default()
        }
    }

    #[test]
    fn series_split_tools_with_several_value_types() {
        let rows = vec![
            row("scipy", "a", 0.5, "f64"),
            row(TOOL, "a", 1.0, "f64"),
            row(TOOL, "b", 2.0, "f64"),
            row(TOOL, "a", 1.5, "f32"),
        ];
        let s = series(&rows);
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].label, "rusparse f64/i32 2t");
        assert_eq!(s[0].gflops, [Some(1.0), Some(2.0)]);
        assert_eq!(s[1].label, "rusparse f32/i32 2t");
        assert_eq!(s[1].gflops, [Some(1.5), None]);
        assert_eq!(s[2].label, "scipy");
        assert_eq!(s[2].gflops, [Some(0.5), None]);
    }

    #[test]
    fn draws_a_png() {
        let path =
            std::env::temp_dir().join(format!("rusparse-bench-plot-{}.png", std::process::id()));
        let rows = vec![
            row(TOOL, "stencil2d_5pt_725", 0.21, "f64"),
            row("scipy", "stencil2d_5pt_725", 0.15, "f64"),
            row(TOOL, "1138_bus", 0.05, "f64"),
        ];
        plot(&rows, &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        assert!(
            bytes.len() > 5000,
            "suspiciously small PNG: {} bytes",
            bytes.len()
        );
        assert!(plot(&[], &path).is_err());
    }
}
