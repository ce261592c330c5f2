//! `bench micro`: null-operation latency, PBFT OSDI'99 Table 1 layout.
//!
//! Every system runs at once (idle servers cost nothing), with one client each; runs are
//! interleaved (run 1 of every point, then run 2, …) so machine noise hits all systems alike.
//! Each point reports the median of `--runs` runs of `--ops` operations after a warm-up.

use super::json::{self, Row};
use super::load::{self, AnyClient, Length};
use super::stats::{self, Point};
use super::{table, Common, WorkDir};
use crate::cpu;
use crate::procs::{Launch, Servers, Service, System};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct MicroArgs {
    #[command(flatten)]
    common: Common,
    /// Measured operations per run.
    #[arg(long, default_value_t = 2000)]
    ops: u64,
    /// Runs per point (the median is reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Unmeasured operations before each run (default: ops/10, at least 10).
    #[arg(long)]
    warmup_ops: Option<u64>,
}

pub fn run(a: MicroArgs) -> anyhow::Result<ExitCode> {
    let rt = byzfs_net::signals::runtime()?;
    rt.block_on(micro(a))
}

/// One system (a ByzFS configuration, or an unreplicated server) and its client.
struct Subject {
    system: System,
    switches: Option<super::Switches>,
    servers: Servers,
    client: Option<AnyClient>,
}

async fn micro(a: MicroArgs) -> anyhow::Result<ExitCode> {
    let c = &a.common;
    let work = WorkDir::new(c.dir.as_deref())?;
    let ops = c.null_ops()?;
    let runs = a.runs.max(1);
    let warmup_ops = a.warmup_ops.unwrap_or((a.ops / 10).max(10));

    let mut subjects = Vec::new();
    for system in c.systems()? {
        let configs: Vec<Option<super::Switches>> = match system {
            System::Byzfs => c.switches().into_iter().map(Some).collect(),
            _ => vec![None],
        };
        for switches in configs {
            let protocol = switches
                .map(|s| s.config(c.view_change_timeout_ms))
                .unwrap_or_else(|| byzfs_bft::Config::new(1));
            let dir = work.fresh(system.name());
            let servers = Servers::start(
                system,
                &dir,
                &Launch {
                    clock_lag_tolerance_ms: None,
                    protocol,
                    disk: switches.is_some_and(|w| w.disk),
                    tcp_only: c.tcp_only,
                    service: Service::Null,
                    replica_args: Vec::new(),
                    sites: None,
                },
            )
            .await?;
            let client = load::connect_all(&servers, 1).await?.pop();
            subjects.push(Subject {
                system,
                switches,
                servers,
                client,
            });
        }
    }

    let points = runs * ops.len() * subjects.len();
    let bar = ProgressBar::new(points as u64).with_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} runs  {msg}")?
            .progress_chars("=> "),
    );
    bar.set_prefix("bench micro");
    // results[op][subject] = runs
    let mut results: Vec<Vec<Vec<Point>>> = vec![vec![Vec::new(); subjects.len()]; ops.len()];
    let mut frames: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); subjects.len()]; ops.len()];
    for run in 0..runs {
        for (oi, (name, op)) in ops.iter().enumerate() {
            for (si, s) in subjects.iter_mut().enumerate() {
                bar.set_message(format!(
                    "run {}/{runs} {name} {} {}",
                    run + 1,
                    json::mode_name(op.read_only),
                    s.system.name()
                ));
                let progress = Arc::new(std::sync::atomic::AtomicU64::new(0));
                let client = s.client.take().into_iter().collect::<Vec<_>>();
                let frames0 = s.servers.frames_out().await;
                let cpu0 = s.servers.cpu_time();
                let self0 = cpu::own_time();
                let (mut back, rec) = load::run(
                    client,
                    *op,
                    Length::Ops {
                        warmup_ops: if run == 0 { warmup_ops * 2 } else { warmup_ops },
                        ops: a.ops,
                    },
                    progress.clone(),
                )
                .await?;
                let cpu = s.servers.cpu_time().saturating_sub(cpu0);
                let own = cpu::own_time().saturating_sub(self0);
                s.client = back.pop();
                debug_assert_eq!(progress.load(Ordering::Relaxed), rec.ops);
                // Let the servers publish their final counters (every 100 ms).
                tokio::time::sleep(std::time::Duration::from_millis(150)).await;
                let frames1 = s.servers.frames_out().await;
                // Warm-up operations sent frames too: count per operation of the whole run.
                let total_ops = rec.ops + if run == 0 { warmup_ops * 2 } else { warmup_ops };
                if let (Some(f0), Some(f1)) = (frames0, frames1) {
                    frames[oi][si].push(f1.saturating_sub(f0) as f64 / total_ops.max(1) as f64);
                }
                results[oi][si].push(Point::of(&rec, cpu, own));
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();

    let mut rows = Vec::new();
    for (oi, (name, op)) in ops.iter().enumerate() {
        for (si, s) in subjects.iter().enumerate() {
            let (p, spread) = stats::median(&results[oi][si]);
            let f = &frames[oi][si];
            let frames_per_op = (!f.is_empty()).then(|| f.iter().sum::<f64>() / f.len() as f64);
            rows.push(Row {
                runs,
                latency_spread: spread,
                server_frames_per_op: frames_per_op,
                ..Row::of_point("micro", &s.system, s.switches, (name, op.read_only), 1, &p)
            });
        }
    }
    drop(subjects);
    println!(
        "bench micro: median of {runs} runs of {} operations, 1 client; machine: {}",
        a.ops,
        json::Machine::here().describe()
    );
    table::micro(&rows);
    if let Some(p) = &c.json {
        json::write(p, "micro", &rows)?;
        println!("wrote {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}
