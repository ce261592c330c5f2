//! Every benchmark's SVG plots (plotters, SVG backend only): throughput vs clients, one line
//! per system, configuration, operation and mode — the shape of BFT library Figures 6 and
//! 7b ([`throughput`]); and the file-system benchmarks' grouped bars ([`bars`]).

use crate::loopback::json::Row;
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
    legend_and_write(&mut chart, &root, SeriesLabelPosition::UpperLeft, path)
}

/// A chart of this file: f64 × f64 coordinates on the SVG backend.
type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// Draws `chart`'s legend at `at` and writes `root` to `path`.
fn legend_and_write<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    root: &DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    at: SeriesLabelPosition,
    path: &Path,
) -> anyhow::Result<()> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(at)
        .draw()
        .map_err(|e| anyhow::anyhow!("cannot draw {}: {e}", path.display()))?;
    root.present()
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// One group of [`bars`]: its label, and one bar per series (`None`: no value), each a
/// value and the text printed on it.
pub struct Group {
    /// Shown under the group.
    pub label: String,
    /// By series, in the legend's order.
    pub bars: Vec<Option<(f64, String)>>,
}

/// A grouped bar chart at `path`: one group per metric, one bar per series (`series`, named
/// in the legend), each group scaled to its own largest bar (metrics differ by orders of
/// magnitude), values printed on the bars.
pub fn bars(
    path: &Path,
    title: &str,
    note: &str,
    series: &[String],
    groups: &[Group],
) -> anyhow::Result<()> {
    let per_group = (series.len().max(1) as u32 * 26 + 30).max(110);
    // The legend takes the last 1.8 group widths, right of the bars.
    let slots = groups.len().max(1) as f64 + 1.8;
    let width = ((40.0 + slots * f64::from(per_group)) as u32).max(title.len() as u32 * 9 + 40);
    let root = SVGBackend::new(path, (width, 420)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("cannot draw {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(12)
        .build_cartesian_2d(0.0..slots, -0.12..1.12)
        .map_err(|e| err(&e))?;
    let width_of_bar = 0.8 / series.len().max(1) as f64;
    // Each bar's height, its group scaled to the group's largest value.
    let heights: Vec<Vec<Option<f64>>> = groups
        .iter()
        .map(|g| {
            let max = g.bars.iter().flatten().map(|b| b.0).fold(0.0, f64::max);
            g.bars
                .iter()
                .map(|b| {
                    b.as_ref()
                        .map(|(v, _)| if max > 0.0 { v / max } else { 0.0 })
                })
                .collect()
        })
        .collect();
    for (si, name) in series.iter().enumerate() {
        let color = Palette99::pick(si).to_rgba();
        let mut rects = Vec::new();
        for (gi, g) in heights.iter().enumerate() {
            let Some(Some(h)) = g.get(si).copied() else {
                continue;
            };
            let x = gi as f64 + 0.1 + si as f64 * width_of_bar;
            rects.push(Rectangle::new(
                [(x, 0.0), (x + width_of_bar * 0.9, h)],
                color.filled(),
            ));
        }
        chart
            .draw_series(rects)
            .map_err(|e| err(&e))?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    let mut texts = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        for (si, bar) in g.bars.iter().enumerate() {
            let (Some((_, text)), Some(Some(h))) = (bar, heights[gi].get(si).copied()) else {
                continue;
            };
            let x = gi as f64 + 0.1 + si as f64 * width_of_bar;
            texts.push(Text::new(text.clone(), (x, h + 0.05), ("sans-serif", 9)));
        }
        texts.push(Text::new(
            g.label.clone(),
            (gi as f64 + 0.1, -0.05),
            ("sans-serif", 11),
        ));
    }
    texts.push(Text::new(note.to_string(), (0.0, 1.1), ("sans-serif", 10)));
    chart.draw_series(texts).map_err(|e| err(&e))?;
    legend_and_write(&mut chart, &root, SeriesLabelPosition::UpperRight, path)
}
