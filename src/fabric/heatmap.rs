//! The N x N heatmap (SVG, drawn with plotters' SVG backend): one cell per
//! client (row) / server (column), colour from worst (red) to best (green),
//! grey where no value, host:device labels on both axes while they fit
//! (N <= 64), and the scale's ends written below.

use super::matrix::Matrix;
use super::summary::Better;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Most cells drawn per axis: above this, a cell shows the worst value of a
/// block of ranks (so a bad link still shows, and the SVG stays bounded).
pub const MAX_CELLS: usize = 512;

/// Ranks per drawn cell for `n` ranks.
pub fn block(n: usize) -> usize {
    n.div_ceil(MAX_CELLS).max(1)
}

/// Geometry of the image for `n` ranks: (cell px, label margin px, width, height).
pub fn geometry(n: usize) -> (u32, u32, u32, u32) {
    let n = n.max(1).div_ceil(block(n)) as u32;
    let cell = (768 / n).clamp(2, 32);
    let margin = if n <= 64 { 150 } else { 20 };
    let w = margin + n * cell + 20;
    let h = margin + n * cell + 50;
    (cell, margin, w, h)
}

/// Red (worst) to green (best) through yellow.
fn colour(t: f64) -> RGBColor {
    let t = t.clamp(0.0, 1.0);
    let (r, g) = if t < 0.5 {
        (220.0, 60.0 + 2.0 * t * 160.0)
    } else {
        (220.0 - (t - 0.5) * 2.0 * 180.0, 220.0)
    };
    RGBColor(r as u8, g as u8, 60)
}

/// The worst value among the block of `b` x `b` cells at (r0, c0).
fn worst_in(m: &Matrix, r0: usize, c0: usize, b: usize, better: Better) -> Option<f64> {
    let mut w: Option<f64> = None;
    for r in r0..(r0 + b).min(m.n) {
        for c in c0..(c0 + b).min(m.n) {
            if let Some(v) = m.get(r, c) {
                w = Some(match (w, better) {
                    (None, _) => v,
                    (Some(x), Better::Higher) => x.min(v),
                    (Some(x), Better::Lower) => x.max(v),
                });
            }
        }
    }
    w
}

/// Renders the heatmap; `title` goes on top, `units` next to the scale.
pub fn render_svg(
    m: &Matrix,
    labels: &[String],
    better: Better,
    title: &str,
    units: &str,
) -> Result<String, String> {
    let (cell, margin, w, h) = geometry(m.n);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let font = ("sans-serif", 11).into_font();
        root.draw(&Text::new(
            title.to_owned(),
            (4, 4),
            font.clone().color(&BLACK),
        ))
        .map_err(draw_err)?;
        let (lo, hi) = m.range().unwrap_or((0.0, 1.0));
        draw_cells(&root, m, better, (cell, margin), (lo, hi))?;
        if m.n <= 64 {
            draw_labels(
                &root,
                &labels[..labels.len().min(m.n)],
                (cell, margin),
                &font,
            )?;
        }
        let foot = format!(
            "rows: client, columns: server; {} {lo:.3} .. {hi:.3} {units} (red = worst, grey = none)",
            if better == Better::Lower { "lower is better:" } else { "higher is better:" }
        );
        root.draw(&Text::new(foot, (4, h as i32 - 30), font.color(&BLACK)))
            .map_err(draw_err)?;
        root.present().map_err(draw_err)?;
    }
    Ok(svg)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn draw_err<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> String {
    format!("drawing the heatmap: {e}")
}

/// One coloured square per block of ranks (`(cell px, margin px)`), scaled
/// over `(lo, hi)`.
fn draw_cells(
    root: &Area<'_>,
    m: &Matrix,
    better: Better,
    (cell, margin): (u32, u32),
    (lo, hi): (f64, f64),
) -> Result<(), String> {
    let span = if hi > lo { hi - lo } else { 1.0 };
    let b = block(m.n);
    let g = m.n.div_ceil(b);
    for r in 0..g {
        for c in 0..g {
            let x = (margin + c as u32 * cell) as i32;
            let y = (margin + r as u32 * cell) as i32;
            let fill = match worst_in(m, r * b, c * b, b, better) {
                Some(v) => {
                    let t = (v - lo) / span;
                    colour(if better == Better::Lower { 1.0 - t } else { t })
                }
                None => RGBColor(200, 200, 200),
            };
            root.draw(&Rectangle::new(
                [(x, y), (x + cell as i32, y + cell as i32)],
                fill.filled(),
            ))
            .map_err(draw_err)?;
        }
    }
    Ok(())
}

/// Each rank's label left of its row and (rotated) above its column.
fn draw_labels(
    root: &Area<'_>,
    labels: &[String],
    (cell, margin): (u32, u32),
    font: &FontDesc<'_>,
) -> Result<(), String> {
    let left = font
        .clone()
        .color(&BLACK)
        .pos(Pos::new(HPos::Right, VPos::Center));
    let top = font
        .clone()
        .transform(FontTransform::Rotate270)
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, l) in labels.iter().enumerate() {
        let mid = (margin + i as u32 * cell + cell / 2) as i32;
        root.draw(&Text::new(
            l.clone(),
            (margin as i32 - 4, mid),
            left.clone(),
        ))
        .map_err(draw_err)?;
        root.draw(&Text::new(l.clone(), (mid, margin as i32 - 4), top.clone()))
            .map_err(draw_err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::pattern::Pair;

    /// The value of attribute `name` in the `<svg ...>` element.
    fn svg_attr(svg: &str, name: &str) -> Option<u32> {
        let start = svg.find("<svg")?;
        let head = &svg[start..start + svg[start..].find('>')?];
        let at = head.find(&format!(" {name}=\""))? + name.len() + 3;
        head[at..].split('"').next()?.parse().ok()
    }

    #[test]
    fn svg_size_cells_and_labels() {
        let n = 5;
        let mut m = Matrix::new(n);
        for a in 0..n {
            for b in 0..n {
                if a != b {
                    m.set(Pair::new(a, b), (a * n + b) as f64);
                }
            }
        }
        let labels: Vec<String> = (0..n).map(|i| format!("host{i}:rxe0")).collect();
        let svg = render_svg(&m, &labels, Better::Higher, "write-bw pairs", "MB/sec").unwrap();
        let (_, _, w, h) = geometry(n);
        assert_eq!(svg_attr(&svg, "width"), Some(w));
        assert_eq!(svg_attr(&svg, "height"), Some(h));
        assert!(svg.trim_end().ends_with("</svg>"));
        // Background + one rect per cell.
        assert!(
            svg.matches("<rect").count() > n * n,
            "{} rects",
            svg.matches("<rect").count()
        );
        // Each label on both axes.
        assert_eq!(svg.matches("host3:rxe0").count(), 2);
        // Big N: no labels, blocks of ranks, the image stays bounded.
        assert_eq!(block(16384), 32);
        let (_, _, w, h) = geometry(16384);
        assert!(w <= 1100 && h <= 1100, "{w}x{h}");
        let mut big = Matrix::new(1030);
        big.set(Pair::new(0, 1), 1.0);
        big.set(Pair::new(1, 0), 9.0);
        let svg = render_svg(&big, &[], Better::Higher, "t", "u").unwrap();
        let (_, _, w, _) = geometry(1030);
        assert_eq!(svg_attr(&svg, "width"), Some(w));
        assert_eq!(worst_in(&big, 0, 0, 3, Better::Higher), Some(1.0));
        assert_eq!(worst_in(&big, 0, 0, 3, Better::Lower), Some(9.0));
    }
}
