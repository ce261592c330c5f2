//! `bench throughput`: throughput and latency vs number of clients (BFT library Figures
//! 6–7), for each operation, mode and ByzFS configuration, beside the unreplicated server;
//! `--kill-primary-after SECS` SIGKILLs the primary during each ByzFS run and reports when
//! a new view was installed and when throughput recovered.

use super::json::{self, Row};
use super::load::{self, AnyClient, Length, NullOp};
use super::stats::{self, Point};
use super::{table, Common, Switches, WorkDir};
use crate::cpu;
use crate::plot;
use crate::procs::{Launch, Servers, Service, System};
use anyhow::bail;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct ThroughputArgs {
    #[command(flatten)]
    common: Common,
    /// Numbers of concurrent closed-loop clients.
    #[arg(long, default_value = "1,5,10,25,50,100", value_delimiter = ',')]
    clients: Vec<usize>,
    /// Measured seconds per point.
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// Seconds of load before measuring each point.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// SIGKILL the primary this many seconds into each ByzFS run (counted from the start
    /// of the warm-up) and report the recovery; the cluster is restarted for every point.
    #[arg(long)]
    kill_primary_after: Option<f64>,
    /// Draw throughput vs clients as SVG here.
    #[arg(long)]
    svg: Option<PathBuf>,
}

pub fn run(a: ThroughputArgs) -> anyhow::Result<ExitCode> {
    if a.clients.is_empty() || a.clients.contains(&0) {
        bail!("--clients needs positive numbers, e.g. --clients 1,10,50");
    }
    if !(a.duration > 0.0 && a.warmup >= 0.0) {
        bail!("--duration must be positive and --warmup not negative");
    }
    if let Some(k) = a.kill_primary_after {
        if !(k > 0.0 && k < a.warmup + a.duration) {
            bail!(
                "--kill-primary-after {k} must fall inside the run (0 < SECS < warmup + duration = {})",
                a.warmup + a.duration
            );
        }
    }
    let rt = byzfs_net::signals::runtime()?;
    rt.block_on(throughput(a))
}

/// The subjects: each ByzFS configuration, then each unreplicated system.
fn subjects(c: &Common) -> anyhow::Result<Vec<(System, Option<Switches>)>> {
    let mut out = Vec::new();
    for system in c.systems()? {
        match system {
            System::Byzfs => out.extend(c.switches().into_iter().map(|s| (system, Some(s)))),
            _ => out.push((system, None)),
        }
    }
    Ok(out)
}

async fn throughput(a: ThroughputArgs) -> anyhow::Result<ExitCode> {
    let c = &a.common;
    let work = WorkDir::new(c.dir.as_deref())?;
    let ops = c.null_ops()?;
    let subjects = subjects(c)?;
    let length = Length::Time {
        warmup: Duration::from_secs_f64(a.warmup),
        secs: Duration::from_secs_f64(a.duration),
    };
    let points = subjects.len() * ops.len() * a.clients.len();
    let bar = ProgressBar::new(points as u64).with_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} points  {msg}")?
            .progress_chars("=> "),
    );
    bar.set_prefix("bench throughput");
    let mut rows = Vec::new();
    let mut n = 4;
    for (system, switches) in &subjects {
        let protocol = switches
            .map(|s| s.config(c.view_change_timeout_ms))
            .unwrap_or_else(|| byzfs_bft::Config::new(1));
        let kill = a.kill_primary_after.filter(|_| *system == System::Byzfs);
        let mut servers: Option<Servers> = None;
        let mut pool: Vec<AnyClient> = Vec::new();
        for (name, op) in &ops {
            for &clients in &a.clients {
                if servers.is_none() || kill.is_some() {
                    pool.clear();
                    drop(servers.take()); // Stops the old processes first (ports, CPU).
                    let dir = work.fresh(system.name());
                    servers = Some(
                        Servers::start(
                            *system,
                            &dir,
                            &Launch {
                                clock_lag_tolerance_ms: None,
                                protocol: protocol.clone(),
                                disk: switches.is_some_and(|w| w.disk),
                                tcp_only: c.tcp_only,
                                service: Service::Null,
                                replica_args: Vec::new(),
                                sites: None,
                            },
                        )
                        .await?,
                    );
                }
                let Some(s) = servers.as_mut() else {
                    bail!("no servers (cannot happen: started above)")
                };
                n = s.cluster.n();
                bar.set_message(format!(
                    "{} {name} {} {clients} clients{}",
                    system.name(),
                    json::mode_name(op.read_only),
                    switches
                        .map(|w| format!(" ({})", w.label()))
                        .unwrap_or_default()
                ));
                if pool.len() < clients {
                    let more = load::connect_all(s, clients - pool.len()).await?;
                    pool.extend(more);
                }
                let rest = pool.split_off(clients);
                let progress = Arc::new(AtomicU64::new(0));
                let batch0 = s.batching_counters().await;
                let frames0 = s.frames_out().await;
                let cpu0 = s.cpu_time();
                let self0 = cpu::own_time();
                let started = Instant::now();
                let (back, rec, fault) = match kill {
                    None => {
                        let (back, rec) =
                            load::run(std::mem::take(&mut pool), *op, length, progress).await?;
                        (back, rec, None)
                    }
                    Some(after) => {
                        let killer = kill_and_watch(s, started, Duration::from_secs_f64(after));
                        let (load, fault) = tokio::join!(
                            load::run(std::mem::take(&mut pool), *op, length, progress),
                            killer
                        );
                        let (back, rec) = load?;
                        (back, rec, Some(fault?))
                    }
                };
                let cpu = s.cpu_time().saturating_sub(cpu0);
                let own = cpu::own_time().saturating_sub(self0);
                // Let the replicas publish their final counters (every 100 ms).
                tokio::time::sleep(Duration::from_millis(150)).await;
                let batch1 = s.batching_counters().await;
                let frames1 = s.frames_out().await;
                pool = back;
                pool.extend(rest);
                let p = Point::of(&rec, cpu, own);
                let mut row = row(system, switches, name, op, clients, &p);
                // Per completed operation of the whole run (warm-up included, like the frames).
                let completed: u64 = rec.buckets.iter().sum();
                if let (Some(f0), Some(f1), None, true) = (frames0, frames1, kill, completed > 0) {
                    row.server_frames_per_op =
                        Some(f1.saturating_sub(f0) as f64 / completed as f64);
                }
                if let (Some(b0), Some(b1), None) = (batch0, batch1, kill) {
                    let pps = b1.0.saturating_sub(b0.0);
                    if *system == System::Byzfs && pps > 0 {
                        row.batch_size_mean = Some(b1.1.saturating_sub(b0.1) as f64 / pps as f64);
                    }
                }
                if let Some(f) = fault {
                    let (baseline, recovered) =
                        stats::recovery(&rec.buckets, f.killed_at, Duration::from_secs(1), 5, 0.8);
                    row.killed_primary_at_s = Some(f.killed_at.as_secs_f64());
                    row.new_view_after_s = f.new_view_after.map(|d| d.as_secs_f64());
                    row.recovered_after_s = recovered.map(|d| d.as_secs_f64());
                    row.longest_op_s = Some(rec.latency_us.max() as f64 / 1e6);
                    row.throughput_before_kill_ops_s = Some(baseline);
                    row.timeline_ops_per_100ms = Some(rec.buckets.clone());
                }
                rows.push(row);
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    println!(
        "bench throughput: {} s measured after {} s warm-up per point; machine: {}",
        a.duration,
        a.warmup,
        json::Machine::here().describe()
    );
    table::throughput(&rows, n);
    if let Some(p) = &c.json {
        json::write(p, "throughput", &rows)?;
        println!("wrote {}", p.display());
    }
    if let Some(p) = &a.svg {
        plot::throughput(p, &rows)?;
        println!("wrote {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn row(
    system: &System,
    switches: &Option<Switches>,
    name: &str,
    op: &NullOp,
    clients: usize,
    p: &Point,
) -> Row {
    Row::of_point(
        "throughput",
        system,
        *switches,
        (name, op.read_only),
        clients,
        p,
    )
}

/// What the kill-primary experiment observed.
struct Fault {
    /// When the primary was killed, from the run's start.
    killed_at: Duration,
    /// From the kill until a live replica reported a new view installed.
    new_view_after: Option<Duration>,
}

/// Sleeps until `after`, SIGKILLs the primary, then polls the live replicas until one has
/// installed a higher view (at most 30 s).
async fn kill_and_watch(
    s: &mut Servers,
    started: Instant,
    after: Duration,
) -> anyhow::Result<Fault> {
    tokio::time::sleep_until((started + after).into()).await;
    let view0 = {
        let mut v = 0;
        for id in s.live() {
            if let Some(st) = s.status(id).await {
                v = st.view;
                break;
            }
        }
        v
    };
    let primary = s.kill_primary().await?;
    let killed = Instant::now();
    tracing::info!(primary, "primary killed");
    let deadline = killed + Duration::from_secs(30);
    while Instant::now() < deadline {
        for id in s.live() {
            if let Some(st) = s.status(id).await {
                if st.view > view0 && st.has_new_view {
                    return Ok(Fault {
                        killed_at: killed - started,
                        new_view_after: Some(killed.elapsed()),
                    });
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(Fault {
        killed_at: killed - started,
        new_view_after: None,
    })
}
