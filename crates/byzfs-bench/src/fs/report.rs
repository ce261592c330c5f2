//! Running every target, and the results: tables, ratios, `--json` rows, SVG bar charts.

use super::diskio;
use super::target::{Mounted, ServerCounts, TargetSpec, Targets};
use super::CommonArgs;
use crate::cpu;
use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// Ratios printed when both targets were measured: (numerator, denominator).
const RATIOS: [(&str, &str); 9] = [
    ("byzfs", "norep"),
    ("byzfs-ro", "norep"),
    ("byzfs-ro", "byzfs"),
    ("byzfs", "local"),
    ("byzfs-ro", "local"),
    ("byzfs", "passthrough"),
    ("byzfs-ro", "passthrough"),
    ("norep", "passthrough"),
    ("passthrough", "local"),
];

/// One measured quantity, e.g. the Andrew "copy" phase in seconds.
#[derive(Debug, Clone)]
pub struct Metric {
    pub name: &'static str,
    pub unit: &'static str,
}

/// Everything one benchmark measured.
pub struct Results {
    pub bench: &'static str,
    pub metrics: Vec<Metric>,
    /// Targets that ran, in order.
    pub targets: Vec<String>,
    /// (target, metric) → one sample per run.
    pub samples: BTreeMap<(String, &'static str), Vec<f64>>,
    /// Benchmark parameters, copied into every JSON row.
    pub params: serde_json::Value,
}

/// Measures one started target; returns one value per metric (in `metrics` order).
pub type Measure<'a> = dyn FnMut(&TargetSpec, &Path, &ProgressBar) -> anyhow::Result<Vec<f64>> + 'a;

/// Runs `measure` on every target, `--warmup` times unrecorded then `--runs` times,
/// interleaving targets within each run (so a slow drift of a shared machine hits every
/// target alike). Each target is started fresh for each run. Targets that cannot start in
/// the first run are skipped with a warning.
pub fn run_targets(
    args: &CommonArgs,
    bench: &'static str,
    metrics: Vec<Metric>,
    params: serde_json::Value,
    measure: &mut Measure<'_>,
) -> anyhow::Result<Results> {
    run_targets_prepared(args, bench, metrics, params, &mut |_, _, _| Ok(()), measure)
}

/// Readies one started target before it is measured (untimed, its CPU and bytes not
/// counted): e.g. writes the files a workload reads, then remounts.
pub type Prepare<'a> =
    dyn FnMut(&TargetSpec, &mut Mounted, &ProgressBar) -> anyhow::Result<()> + 'a;

/// [`run_targets`] with `prepare` run on each started target first.
pub fn run_targets_prepared(
    args: &CommonArgs,
    bench: &'static str,
    mut metrics: Vec<Metric>,
    params: serde_json::Value,
    prepare: &mut Prepare<'_>,
    measure: &mut Measure<'_>,
) -> anyhow::Result<Results> {
    let measured = metrics.len();
    // CPU seconds beside wall time (BENCHMARKS.md): the client (this process and the
    // programs it ran, e.g. make, postmark), the target's server processes, and the part
    // of those that is the FUSE daemon (for ByzFS the BFT client; the rest are replicas).
    metrics.extend([
        Metric {
            name: "client cpu",
            unit: "cpu-s",
        },
        Metric {
            name: "server cpu",
            unit: "cpu-s",
        },
        Metric {
            name: "mount cpu",
            unit: "cpu-s",
        },
        Metric {
            name: "disk written",
            unit: "MiB",
        },
        // Per operation at each server (ByzFS's replicas, NO-REP's server; bindfs counts
        // none): operations and syncs as the servers count them (`byzfs status`), bytes
        // and CPU as above without the mount's. Each replica executes every operation, so
        // a sum over the servers divided by the operations they executed is the mean
        // over servers.
        Metric {
            name: "server ops",
            unit: "ops",
        },
        Metric {
            name: "syncs/op",
            unit: "syncs",
        },
        Metric {
            name: "written/op",
            unit: "KiB",
        },
        Metric {
            name: "server cpu/op",
            unit: "µs",
        },
        // Event-loop steps of at least 50 ms at each server (`busy_steps`: a long request's
        // execution, or disk work done on the loop), the mean over servers: the stalls
        // another client waits behind (docs/PROTOCOL.md §2.7).
        Metric {
            name: "long steps",
            unit: "steps",
        },
    ]);
    let targets = Targets::new(args)?;
    let mut specs = targets.specs.clone();
    let mut samples: BTreeMap<(String, &'static str), Vec<f64>> = BTreeMap::new();
    let runs = args.warmup + args.runs.max(1);
    for run in 0..runs {
        let warmup = run < args.warmup;
        let mut kept = Vec::new();
        for spec in specs {
            let label = spec.label();
            let Some(mut mounted) = targets.start(&spec, run)? else {
                continue;
            };
            let what = if warmup { "warm-up" } else { "run" };
            let pb = ProgressBar::new(0).with_prefix(format!("{label} {what} {}/{runs}", run + 1));
            pb.set_style(
                ProgressStyle::with_template(
                    "{prefix:>16.bold} {msg:<14} [{bar:30}] {pos}/{len} {elapsed}",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            prepare(&spec, &mut mounted, &pb)
                .with_context(|| format!("{bench}: readying {label}"))?;
            let client0 = cpu::client_secs();
            let server0 = cpu::process_secs(&mounted.servers);
            let fuse0 = cpu::process_secs(&mounted.fuse);
            let disk0 = diskio::written(&mounted.servers);
            let counts0 = mounted.server_counts();
            let mut values = measure(&spec, &mounted.dir, &pb)
                .with_context(|| format!("{bench} on {label} (in {})", mounted.dir.display()))?;
            assert_eq!(values.len(), measured, "one value per metric");
            values.push(cpu::client_secs() - client0);
            values.push(cpu::process_secs(&mounted.servers) - server0);
            values.push(cpu::process_secs(&mounted.fuse) - fuse0);
            // Before the target is stopped: its processes' counts go with them.
            let disk = diskio::written(&mounted.servers).saturating_sub(disk0);
            values.push(disk as f64 / f64::from(1 << 20));
            let server_cpu = values[measured + 1] - values[measured + 2];
            values.extend(per_op(counts0, mounted.server_counts(), disk, server_cpu));
            pb.finish_and_clear();
            drop(mounted);
            let summary: Vec<String> = metrics
                .iter()
                .zip(&values)
                .filter(|(_, v)| !v.is_nan())
                .map(|(m, v)| format!("{} {}", m.name, fmt_value(*v, m.unit)))
                .collect();
            eprintln!("{label} {what} {}/{runs}: {}", run + 1, summary.join(", "));
            if !warmup {
                // NaN: not counted by this target (shown as `-`).
                for (m, v) in metrics.iter().zip(values).filter(|(_, v)| !v.is_nan()) {
                    samples.entry((label.clone(), m.name)).or_default().push(v);
                }
            }
            kept.push(spec);
        }
        specs = kept;
        if specs.is_empty() {
            anyhow::bail!("no target could be started (see the warnings above)");
        }
    }
    Ok(Results {
        bench,
        metrics,
        targets: specs.iter().map(TargetSpec::label).collect(),
        samples,
        params,
    })
}

/// The per-operation metrics of [`run_targets`] (server ops, syncs/op, KiB written/op,
/// server µs/op) from the servers' counts before and after the workload, the bytes the
/// servers wrote and their CPU seconds (the mount's excluded); NaN where the target does
/// not count operations.
fn per_op(
    before: Option<ServerCounts>,
    after: Option<ServerCounts>,
    written: u64,
    cpu_secs: f64,
) -> [f64; 5] {
    match (before, after) {
        (Some(b), Some(a)) if a.since(&b).ops > 0 => {
            let d = a.since(&b);
            let ops = d.ops as f64;
            let servers = d.servers as f64;
            [
                ops / servers,
                d.syncs as f64 / ops,
                written as f64 / 1024.0 / ops,
                cpu_secs * 1e6 / ops,
                d.long_steps as f64 / servers,
            ]
        }
        _ => [f64::NAN; 5],
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn fmt_value(v: f64, unit: &str) -> String {
    match unit {
        "s" if v < 10.0 => format!("{v:.3} s"),
        "s" => format!("{v:.1} s"),
        _ if v >= 100.0 => format!("{v:.0} {unit}"),
        _ => format!("{v:.2} {unit}"),
    }
}

impl Results {
    /// Median over runs.
    pub fn value(&self, target: &str, metric: &str) -> Option<f64> {
        self.samples
            .iter()
            .find(|((t, m), _)| t == target && *m == metric)
            .map(|(_, v)| median(v))
    }

    /// The ratios among [`RATIOS`] whose targets were both measured.
    fn ratios(&self) -> Vec<(&'static str, &'static str)> {
        RATIOS
            .iter()
            .copied()
            .filter(|(a, b)| {
                self.targets.iter().any(|t| t == a) && self.targets.iter().any(|t| t == b)
            })
            .collect()
    }

    /// A table with one row per metric and one column per target, then the ratios
    /// (the layout of PBFT Tables 2–3 and Pangaea Table 2).
    pub fn table_metrics_as_rows(&self, title: &str) -> String {
        let ratios = self.ratios();
        let mut head = vec![String::new()];
        head.extend(self.targets.iter().cloned());
        head.extend(ratios.iter().map(|(a, b)| format!("{a}/{b}")));
        let mut rows = vec![head];
        for m in &self.metrics {
            let mut r = vec![format!("{} ({})", m.name, m.unit)];
            for t in &self.targets {
                r.push(
                    self.value(t, m.name)
                        .map_or("-".into(), |v| fmt_num(v, m.unit)),
                );
            }
            for (a, b) in &ratios {
                r.push(
                    self.ratio(a, b, m.name)
                        .map_or("-".into(), |x| format!("{x:.2}")),
                );
            }
            rows.push(r);
        }
        format!("{title}\n{}", render(&rows))
    }

    /// A table with one row per target and one column per metric, then one ratio row per
    /// pair (the layout of Plutus Table 5 and of PostMark results).
    pub fn table_targets_as_rows(&self, title: &str) -> String {
        let mut head = vec![String::new()];
        head.extend(
            self.metrics
                .iter()
                .map(|m| format!("{} ({})", m.name, m.unit)),
        );
        let mut rows = vec![head];
        for t in &self.targets {
            let mut r = vec![t.clone()];
            for m in &self.metrics {
                r.push(
                    self.value(t, m.name)
                        .map_or("-".into(), |v| fmt_num(v, m.unit)),
                );
            }
            rows.push(r);
        }
        for (a, b) in self.ratios() {
            let mut r = vec![format!("{a}/{b}")];
            for m in &self.metrics {
                r.push(
                    self.ratio(a, b, m.name)
                        .map_or("-".into(), |x| format!("{x:.2}")),
                );
            }
            rows.push(r);
        }
        format!("{title}\n{}", render(&rows))
    }

    /// Lines checking the performance targets, `ratio(byzfs*, norep) ≤ max` (or
    /// `≥ min`), for every ByzFS variant measured beside NO-REP.
    pub fn target_checks(&self, metric: &str, bound: Bound) -> String {
        let mut out = String::new();
        for a in ["byzfs", "byzfs-ro"] {
            let Some(x) = self.ratio(a, "norep", metric) else {
                continue;
            };
            let (ok, want) = match bound {
                Bound::AtMost(m) => (x <= m, format!("<= {m:.2}")),
                Bound::AtLeast(m) => (x >= m, format!(">= {m:.2}")),
            };
            let _ = writeln!(
                out,
                "target (issue #4): {metric} {a}/norep = {x:.3}, wanted {want}: {}",
                if ok { "met" } else { "MISSED" }
            );
        }
        out
    }

    fn ratio(&self, a: &str, b: &str, metric: &str) -> Option<f64> {
        let (x, y) = (self.value(a, metric)?, self.value(b, metric)?);
        (y > 0.0).then(|| x / y)
    }

    /// The JSON rows: one per (target, metric) and one per (ratio, metric).
    pub fn rows(&self) -> Vec<Row> {
        let mut out = Vec::new();
        for t in &self.targets {
            for m in &self.metrics {
                let Some(runs) = self.samples.get(&(t.clone(), m.name)) else {
                    continue;
                };
                out.push(Row {
                    bench: self.bench,
                    target: t.clone(),
                    metric: m.name,
                    unit: m.unit,
                    median: median(runs),
                    min: runs.iter().copied().fold(f64::INFINITY, f64::min),
                    max: runs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    runs: runs.clone(),
                    params: self.params.clone(),
                });
            }
        }
        for (a, b) in self.ratios() {
            for m in &self.metrics {
                if let Some(x) = self.ratio(a, b, m.name) {
                    out.push(Row {
                        bench: self.bench,
                        target: format!("{a}/{b}"),
                        metric: m.name,
                        unit: "ratio",
                        median: x,
                        min: x,
                        max: x,
                        runs: vec![x],
                        params: self.params.clone(),
                    });
                }
            }
        }
        out
    }

    /// Writes `--json` and `--svg` if asked for.
    pub fn write_outputs(&self, args: &CommonArgs, svg_title: &str) -> anyhow::Result<()> {
        if let Some(p) = &args.json {
            let report = Report {
                bench: self.bench,
                command: std::env::args().collect::<Vec<_>>().join(" "),
                machine: Machine::here(),
                rows: self.rows(),
            };
            let text = serde_json::to_string_pretty(&report)?;
            std::fs::write(p, text + "\n").with_context(|| format!("writing {}", p.display()))?;
            eprintln!("wrote {}", p.display());
        }
        if let Some(p) = &args.svg {
            self.svg(p, svg_title)?;
            eprintln!("wrote {}", p.display());
        }
        Ok(())
    }

    /// Draws the grouped bar chart of `--svg` at `path` ([`crate::plot::bars`]): one group
    /// per metric, one bar per target, each group scaled to its own maximum.
    fn svg(&self, path: &Path, title: &str) -> anyhow::Result<()> {
        let groups: Vec<crate::plot::Group> = self
            .metrics
            .iter()
            .map(|m| crate::plot::Group {
                label: format!("{} ({})", m.name, m.unit),
                bars: self
                    .targets
                    .iter()
                    .map(|t| self.value(t, m.name).map(|v| (v, short(v))))
                    .collect(),
            })
            .collect();
        crate::plot::bars(
            path,
            title,
            "each group scaled to its largest bar; lower is better for s, higher for /s",
            &self.targets,
            &groups,
        )
    }
}

fn fmt_num(v: f64, unit: &str) -> String {
    match unit {
        "s" if v < 10.0 => format!("{v:.3}"),
        "s" => format!("{v:.1}"),
        _ if v >= 100.0 => format!("{v:.0}"),
        _ => format!("{v:.2}"),
    }
}

fn short(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Left column left-aligned, the others right-aligned.
fn render(rows: &[Vec<String>]) -> String {
    let ncol = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..ncol)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        for (c, cell) in r.iter().enumerate() {
            if c == 0 {
                let _ = write!(out, "{cell:<w$}", w = widths[c]);
            } else {
                let _ = write!(out, "  {cell:>w$}", w = widths[c]);
            }
        }
        out.push('\n');
    }
    out
}

/// A performance target on a ratio.
#[derive(Debug, Clone, Copy)]
pub enum Bound {
    AtMost(f64),
    AtLeast(f64),
}

/// One `--json` row.
#[derive(Debug, Serialize)]
pub struct Row {
    pub bench: &'static str,
    /// A target label (`byzfs`, `byzfs-ro`, `norep`, `local`, `passthrough`) or a ratio
    /// `a/b` of two of them.
    pub target: String,
    pub metric: &'static str,
    /// `s` (wall time), `tx/s`, `cpu-s` (CPU seconds) or `ratio`.
    pub unit: &'static str,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Every run's value.
    pub runs: Vec<f64>,
    pub params: serde_json::Value,
}

/// The file written by `--json`: the same shape as `bench micro|throughput` write.
#[derive(Debug, Serialize)]
pub struct Report {
    pub bench: &'static str,
    pub command: String,
    pub machine: Machine,
    pub rows: Vec<Row>,
}

/// The machine a result was measured on (field names as in `bench`'s JSON).
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: String,
    pub mem_gib: f64,
    pub kernel: String,
    pub date_unix_s: u64,
}

impl Machine {
    fn here() -> Machine {
        let field = |file: &str, key: &str| -> String {
            std::fs::read_to_string(file)
                .unwrap_or_default()
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_string())
                .unwrap_or_default()
        };
        let mem_kib: f64 = field("/proc/meminfo", "MemTotal:")
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        Machine {
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_model: field("/proc/cpuinfo", "model name"),
            mem_gib: (mem_kib / 1024.0 / 1024.0 * 10.0).round() / 10.0,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            date_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(servers: u64, ops: u64, syncs: u64) -> Option<ServerCounts> {
        Some(ServerCounts {
            servers,
            ops,
            syncs,
            long_steps: ops / 100,
        })
    }

    /// Four replicas that each executed 500 operations with 250 syncs and 5 long steps,
    /// wrote 2,000 × 4 KiB between them and spent 2 CPU-seconds: per operation at a
    /// replica, 0.5 syncs, 4 KiB, 1 ms; 5 long steps each.
    #[test]
    fn per_operation_figures_are_means_over_the_servers() {
        let got = per_op(
            counts(4, 100, 40),
            counts(4, 2_100, 1_040),
            2_000 << 12,
            2.0,
        );
        assert_eq!(got, [500.0, 0.5, 4.0, 1_000.0, 5.0]);
    }

    #[test]
    fn a_target_without_counts_or_operations_has_none() {
        for (b, a) in [
            (None, None),
            (counts(1, 5, 0), None),
            (counts(1, 5, 0), counts(1, 5, 2)),
        ] {
            assert!(
                per_op(b, a, 1, 1.0).iter().all(|v| v.is_nan()),
                "{b:?} {a:?}"
            );
        }
    }
}
