//! SVG plots (plotters, SVG backend only): throughput vs clients, one line per system,
//! configuration, operation and mode — the shape of BFT library Figures 6 and 7b.

use super::json::Row;
use anyhow::Context as _;
use plotters::prelude::*;
use std::path::Path;

fn series_name(r: &Row) -> String {
    let mut s = format!("{} {} {}", r.system, r.op, r.mode);
    let mut off = Vec::new();
    for (v, name) in [
        (r.batching, "batching"),
        (r.srt, "srt"),
        (r.tentative, "tentative"),
        (r.read_only_opt, "ro-opt"),
    ] {
        if v == Some(false) {
            off.push(name);
        }
    }
    if !off.is_empty() {
        s.push_str(&format!(" ({} off)", off.join(", ")));
    }
    if r.durability.as_deref() == Some("disk") {
        s.push_str(" [disk]");
    }
    s
}

pub fn throughput(path: &Path, rows: &[Row]) -> anyhow::Result<()> {
    let rows: Vec<&Row> = rows
        .iter()
        .filter(|r| r.killed_primary_at_s.is_none())
        .collect();
    let mut names: Vec<String> = Vec::new();
    for r in &rows {
        let n = series_name(r);
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let x_max = rows.iter().map(|r| r.clients).max().unwrap_or(1) as f64;
    let y_max = rows.iter().map(|r| r.throughput_ops_s).fold(1.0, f64::max) * 1.1;
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("cannot draw {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "ByzFS throughput vs clients (null operation)",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max * 1.02, 0.0..y_max)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("clients")
        .y_desc("operations per second")
        .draw()
        .map_err(|e| err(&e))?;
    for (i, name) in names.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let mut pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| &series_name(r) == name)
            .map(|r| (r.clients as f64, r.throughput_ops_s))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| err(&e))?;
    root.present()
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
