//! `bench attack`: throughput of the 0/0 benchmark at 50 closed-loop clients, fault-free and
//! under each of Aardvark's attacks (NSDI'09, Table 1's layout; docs/PROTOCOL.md §5.3), on real
//! processes: a Byzantine replica started with the test-only `--attack MODE` (builds with the
//! feature `byzantine` only), or faulty clients in a thread of this process. Every attack
//! gets a fresh cluster.

use super::faulty_client::{ClientAttack, FaultyClient};
use super::load::{self, NullOp};
use super::stats::Point;
use super::WorkDir;
use crate::cpu;
use crate::plot;
use crate::procs::{Launch, Servers, Service, System};
use anyhow::{bail, Context as _};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The certificate id the faulty clients are issued.
const FAULTY_CERT: u64 = 666;

/// One attack (or none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Attack {
    /// The fault-free run.
    None,
    /// A faulty client floods every replica (replayed requests, bad MACs, garbage).
    ClientFlood,
    /// A faulty client's requests carry MACs good for the primary only.
    PartialMacs,
    /// A faulty client floods requests with good MACs over bad signatures.
    BadSignatures,
    /// The primary holds every batch for 90 % of the view-change timeout.
    SlowPrimary,
    /// The primary sends half the backups a different PRE-PREPARE for each slot.
    Equivocate,
    /// A backup floods the other replicas with garbage.
    ReplicaFlood,
    /// A backup floods the other replicas with replays of its old, genuine frames.
    ReplayFlood,
    /// A backup sends VIEW-CHANGEs for ever higher views.
    VcSpam,
}

impl Attack {
    fn name(self) -> &'static str {
        match self {
            Attack::None => "none",
            Attack::ClientFlood => "client-flood",
            Attack::PartialMacs => "partial-macs",
            Attack::BadSignatures => "bad-signatures",
            Attack::SlowPrimary => "slow-primary",
            Attack::Equivocate => "equivocate",
            Attack::ReplicaFlood => "replica-flood",
            Attack::ReplayFlood => "replay-flood",
            Attack::VcSpam => "vc-spam",
        }
    }

    /// The Byzantine replica and its `--attack` mode, for replica attacks.
    fn replica(self) -> Option<(u32, &'static str)> {
        match self {
            // The primary of view 0.
            Attack::SlowPrimary => Some((0, "slow-primary")),
            Attack::Equivocate => Some((0, "equivocate")),
            // A backup: it attacks the primary too.
            Attack::ReplicaFlood => Some((1, "garbage")),
            Attack::ReplayFlood => Some((1, "replay")),
            Attack::VcSpam => Some((1, "vc-spam")),
            _ => None,
        }
    }

    fn client(self) -> Option<ClientAttack> {
        match self {
            Attack::ClientFlood => Some(ClientAttack::Flood),
            Attack::PartialMacs => Some(ClientAttack::PartialMacs),
            Attack::BadSignatures => Some(ClientAttack::BadSignatures),
            _ => None,
        }
    }

    /// Who attacks, for the table.
    fn who(self) -> &'static str {
        match self {
            Attack::None => "-",
            Attack::ClientFlood | Attack::PartialMacs | Attack::BadSignatures => "client",
            Attack::SlowPrimary | Attack::Equivocate => "primary (r0)",
            Attack::ReplicaFlood | Attack::ReplayFlood | Attack::VcSpam => "backup (r1)",
        }
    }
}

#[derive(Args, Debug)]
pub struct AttackArgs {
    /// Attacks to run, each on a fresh cluster (`none` is the fault-free run every ratio
    /// is taken against).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "none,client-flood,partial-macs,bad-signatures,slow-primary,equivocate,replica-flood,replay-flood,vc-spam"
    )]
    attacks: Vec<Attack>,
    /// Correct closed-loop clients (0/0 read-write operations).
    #[arg(long, default_value_t = 50)]
    clients: usize,
    /// Faulty clients of the client attacks (each connects to every replica it attacks).
    #[arg(long, default_value_t = 1)]
    faulty_clients: usize,
    /// Measured seconds per attack.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Seconds of load (and attack) before measuring.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Base view-change timeout of the clusters, in ms (the slow primary holds each batch
    /// for 90 % of it).
    #[arg(long, default_value_t = 5000)]
    view_change_timeout_ms: u64,
    /// Write one row per attack as JSON here (`attack`, `throughput` in operations per
    /// second, and context).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Draw the throughput under each attack as SVG here.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Working directory for cluster files and server logs (default: a fresh temporary
    /// directory, removed afterwards).
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// One row of `--json`.
#[derive(Clone, Debug, Serialize)]
pub struct AttackRow {
    pub attack: &'static str,
    /// Operations per second completed by the correct clients in the measured window.
    pub throughput: f64,
    /// `throughput` over the fault-free run's (absent without a `none` run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub of_fault_free: Option<f64>,
    /// The protocol mode (the fast path does not exist yet).
    pub mode: &'static str,
    pub attacker: &'static str,
    pub clients: usize,
    pub faulty_clients: usize,
    pub latency_us_p50: f64,
    pub latency_us_p99: f64,
    pub server_cpu_us_per_op: f64,
    /// Highest view any replica reached by the end.
    pub final_view: u64,
    /// View changes the replicas started because the primary's throughput fell short
    /// (the throughput watch), summed over the replicas.
    pub monitor_complaints: u64,
    /// Frames the faulty clients sent.
    pub faulty_frames: u64,
    /// Sessions the faulty clients opened (a shed one comes back under a new session).
    pub faulty_sessions: u64,
    /// CPU time of the correct replicas per measured operation (µs), and of the Byzantine
    /// replica in all (s; it shares this machine's cores with them).
    pub correct_cpu_us_per_op: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub byzantine_replica_cpu_s: Option<f64>,
    /// What the correct replicas dropped during the run, by layer and reason (non-zero).
    pub dropped: std::collections::BTreeMap<String, u64>,
    /// Frames the correct replicas received during the run.
    pub frames_in: u64,
    /// Completions per second over the whole run, warm-up included.
    pub timeline_ops_per_s: Vec<u64>,
}

pub fn run(a: AttackArgs) -> anyhow::Result<ExitCode> {
    if a.clients == 0 || a.attacks.is_empty() {
        bail!("--clients and --attacks need at least one");
    }
    if !(a.duration > 0.0 && a.warmup >= 0.0) {
        bail!("--duration must be positive and --warmup not negative");
    }
    let rt = byzfs_net::signals::runtime()?;
    rt.block_on(attack_all(a))
}

async fn attack_all(a: AttackArgs) -> anyhow::Result<ExitCode> {
    let work = WorkDir::new(a.dir.as_deref())?;
    let bar = ProgressBar::new(a.attacks.len() as u64).with_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} attacks  {msg}")?
            .progress_chars("=> "),
    );
    bar.set_prefix("bench attack");
    let mut rows: Vec<AttackRow> = Vec::new();
    for &attack in &a.attacks {
        bar.set_message(attack.name());
        let row = one(&a, &work, attack)
            .await
            .with_context(|| format!("attack {}", attack.name()))?;
        rows.push(row);
        bar.inc(1);
    }
    bar.finish_and_clear();
    if let Some(base) = rows
        .iter()
        .find(|r| r.attack == "none")
        .map(|r| r.throughput)
    {
        for r in &mut rows {
            r.of_fault_free = (base > 0.0).then(|| r.throughput / base);
        }
    }
    println!(
        "bench attack: 0/0 read-write, {} clients, {} s measured after {} s warm-up per attack, T = {} ms; machine: {}",
        a.clients,
        a.duration,
        a.warmup,
        a.view_change_timeout_ms,
        super::json::Machine::here().describe()
    );
    print!("{}", table(&rows));
    if let Some(p) = &a.json {
        super::json::write(p, "attack", &rows)?;
        println!("wrote {}", p.display());
    }
    if let Some(p) = &a.svg {
        draw(p, &rows)?;
        println!("wrote {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// One attack on a fresh cluster.
async fn one(a: &AttackArgs, work: &WorkDir, attack: Attack) -> anyhow::Result<AttackRow> {
    let mut protocol = byzfs_bft::Config::new(1);
    protocol.view_change_timeout = Duration::from_millis(a.view_change_timeout_ms);
    let replica_args = attack
        .replica()
        .map(|(id, mode)| vec![(id, vec!["--attack".to_string(), mode.to_string()])])
        .unwrap_or_default();
    let dir = work.fresh(attack.name());
    let servers = Servers::start(
        System::Byzfs,
        &dir,
        &Launch {
            clock_lag_tolerance_ms: None,
            protocol,
            disk: false,
            tcp_only: false,
            service: Service::Null,
            replica_args,
            sites: None,
        },
    )
    .await?;
    let pool = load::connect_all(&servers, a.clients).await?;
    // The faulty clients run on a thread (and runtime) of their own, so their work does
    // not slow the correct clients' event loop in this process.
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let attacker = match attack.client() {
        None => None,
        Some(kind) => {
            let to: Vec<u32> = match kind {
                ClientAttack::PartialMacs => vec![0],
                _ => (0..servers.cluster.n() as u32).collect(),
            };
            // The faulty clients hold a certificate of their own, as a faulty user would
            // (the correct clients share the default one).
            let admin = byzfs_net::AdminSecret::load(&dir.join("admin.key"), &servers.cluster)?;
            let cred = byzfs_net::ClientCredential::issue(&servers.cluster, &admin, FAULTY_CERT)?;
            let cluster = servers.cluster.clone();
            let (stop, sent, faulty) = (stop.clone(), sent.clone(), a.faulty_clients);
            Some(std::thread::spawn(move || -> anyhow::Result<u64> {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                rt.block_on(async move {
                    let mut tasks = Vec::new();
                    for i in 0..faulty {
                        let (cluster, cred, to) = (cluster.clone(), cred.clone(), to.clone());
                        let (stop, sent) = (stop.clone(), sent.clone());
                        // A persistent attacker: when a replica sheds its connection it comes
                        // back at once under a new session (its own choice of number).
                        tasks.push(tokio::spawn(async move {
                            let mut session = 0xA77A_0000 + ((i as u64) << 16);
                            let mut connected = 0u64;
                            while !stop.load(Ordering::Relaxed) {
                                session += 1;
                                match FaultyClient::connect(&cluster, &cred, session, &to).await {
                                    Ok(c) => {
                                        connected += 1;
                                        let _ = c.run(kind, stop.clone(), sent.clone()).await;
                                    }
                                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                                }
                            }
                            connected
                        }));
                    }
                    let mut sessions = 0;
                    for t in tasks {
                        sessions += t.await?;
                    }
                    anyhow::Ok(sessions)
                })
            }))
        }
    };
    let byzantine = attack.replica().map(|(id, _)| id);
    let n = servers.cluster.n() as u32;
    let correct: Vec<i32> = (0..n)
        .filter(|&i| Some(i) != byzantine)
        .filter_map(|i| servers.pid_of(i))
        .collect();
    let byz_pid: Vec<i32> = byzantine
        .and_then(|i| servers.pid_of(i))
        .into_iter()
        .collect();
    let counts0 = counters(&servers, byzantine).await;
    let (correct0, byz0) = (cpu::process_time(&correct), cpu::process_time(&byz_pid));
    let cpu0 = servers.cpu_time();
    let self0 = cpu::own_time();
    let op = NullOp {
        arg_bytes: 0,
        result_bytes: 0,
        read_only: false,
    };
    let length = load::Length::Time {
        warmup: Duration::from_secs_f64(a.warmup),
        secs: Duration::from_secs_f64(a.duration),
    };
    let result = load::run(pool, op, length, Arc::new(AtomicU64::new(0))).await;
    stop.store(true, Ordering::Relaxed);
    let faulty_sessions = match attacker {
        Some(t) => match t.join() {
            Ok(r) => r.context("the faulty clients failed")?,
            Err(_) => bail!("the faulty clients' thread panicked"),
        },
        None => 0,
    };
    let (_back, rec) = result?;
    let cpu = servers.cpu_time().saturating_sub(cpu0);
    let own = cpu::own_time().saturating_sub(self0);
    let correct_cpu = cpu::process_time(&correct).saturating_sub(correct0);
    let byz_cpu = cpu::process_time(&byz_pid).saturating_sub(byz0);
    let p = Point::of(&rec, cpu, own);
    // Let the replicas publish their final counters (every 100 ms).
    tokio::time::sleep(Duration::from_millis(150)).await;
    let counts1 = counters(&servers, byzantine).await;
    let dropped = counts1
        .0
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                v.saturating_sub(counts0.0.get(k).copied().unwrap_or(0)),
            )
        })
        .filter(|(_, v)| *v > 0)
        .collect();
    let (mut final_view, mut complaints) = (0, 0);
    for id in servers.live() {
        if let Some(s) = servers.status(id).await {
            final_view = final_view.max(s.view);
            complaints += s.core.monitor_complaints;
        }
    }
    let per_s = rec
        .buckets
        .chunks(10)
        .map(|c| c.iter().sum::<u64>())
        .collect();
    Ok(AttackRow {
        attack: attack.name(),
        throughput: p.throughput_ops_s,
        of_fault_free: None,
        mode: "pbft",
        attacker: attack.who(),
        clients: a.clients,
        faulty_clients: if attack.client().is_some() {
            a.faulty_clients
        } else {
            0
        },
        latency_us_p50: p.latency_us_p50,
        latency_us_p99: p.latency_us_p99,
        server_cpu_us_per_op: p.server_cpu_us_per_op,
        final_view,
        monitor_complaints: complaints,
        faulty_frames: sent.load(Ordering::Relaxed),
        faulty_sessions,
        correct_cpu_us_per_op: if rec.ops == 0 {
            0.0
        } else {
            correct_cpu.as_secs_f64() * 1e6 / rec.ops as f64
        },
        byzantine_replica_cpu_s: byzantine.map(|_| byz_cpu.as_secs_f64()),
        dropped,
        frames_in: counts1.1.saturating_sub(counts0.1),
        timeline_ops_per_s: per_s,
    })
}

/// The correct replicas' drops (`core.REASON`, `net.REASON`) and frames received, summed.
async fn counters(
    servers: &Servers,
    byzantine: Option<u32>,
) -> (std::collections::BTreeMap<String, u64>, u64) {
    let mut drops = std::collections::BTreeMap::new();
    let mut frames = 0;
    for id in servers.live() {
        if Some(id) == byzantine {
            continue;
        }
        if let Some(s) = servers.status(id).await {
            for (k, v) in &s.core.dropped {
                *drops.entry(format!("core.{k}")).or_insert(0) += v;
            }
            for (k, v) in &s.net.dropped {
                *drops.entry(format!("net.{k}")).or_insert(0) += v;
            }
            frames += s.net.frames_in;
        }
    }
    (drops, frames)
}

/// The table: one row per attack (Aardvark's Table 1 has one column per fault; with one
/// system and mode here the attacks run down the page).
fn table(rows: &[AttackRow]) -> String {
    let mut s = format!(
        "{:<16} {:<14} {:>12} {:>8} {:>10} {:>10} {:>6} {:>10}\n",
        "attack", "attacker", "ops/s", "of none", "p50 µs", "p99 µs", "view", "complaints"
    );
    for r in rows {
        s += &format!(
            "{:<16} {:<14} {:>12.0} {:>8} {:>10.0} {:>10.0} {:>6} {:>10}\n",
            r.attack,
            r.attacker,
            r.throughput,
            r.of_fault_free
                .map_or("-".to_string(), |f| format!("{:.0} %", f * 100.0)),
            r.latency_us_p50,
            r.latency_us_p99,
            r.final_view,
            r.monitor_complaints
        );
    }
    s
}

fn draw(path: &std::path::Path, rows: &[AttackRow]) -> anyhow::Result<()> {
    let groups: Vec<plot::Group> = rows
        .iter()
        .map(|r| plot::Group {
            label: r.attack.to_string(),
            bars: vec![Some((
                r.throughput,
                r.of_fault_free.map_or(format!("{:.0}", r.throughput), |f| {
                    format!("{:.0} ({:.0}%)", r.throughput, f * 100.0)
                }),
            ))],
        })
        .collect();
    // One series; every group is scaled to the fault-free run.
    let base = rows.iter().map(|r| r.throughput).fold(0.0, f64::max);
    let groups: Vec<plot::Group> = groups
        .into_iter()
        .map(|mut g| {
            // A second, invisible bar at the fault-free height keeps the groups comparable.
            g.bars.push(Some((base, String::new())));
            g
        })
        .collect();
    plot::bars(
        path,
        "ByzFS 0/0 throughput under attack (ops/s)",
        "left bar: ops/s of the correct clients (share of fault-free); right bar: the table's highest, for scale",
        &["under attack".to_string(), "best run".to_string()],
        &groups,
    )
}
