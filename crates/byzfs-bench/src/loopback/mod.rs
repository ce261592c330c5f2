//! `byzfs bench`: benchmarks that start their own processes on loopback and measure ByzFS
//! beside its comparison systems in one run (shared/design/BENCHMARKS.md).
//!
//! * `bench micro` — PBFT OSDI'99 Table 1: null-operation latency for 0/0, 0/4, 4/0 (KiB),
//!   read-write and read-only, ByzFS vs unreplicated with and without MACs.
//! * `bench throughput` — BFT library Figures 6–7: throughput and latency vs clients, with
//!   the protocol switches on or off; `--kill-primary-after` measures recovery.
//! * `bench attack` — Aardvark's Table 1: throughput at 50 clients, fault-free and under
//!   each attack (a Byzantine replica's `--attack` mode, or faulty clients).
//!
//! One file per concept: `procs` (processes), `load` (clients), `stats`, `table`, `json`,
//! `plot`; `micro` and `throughput` put them together.

mod attack;
mod faulty_client;
pub(crate) mod json;
mod load;
mod micro;
mod stats;
mod table;
mod throughput;

use anyhow::{bail, Context as _};
use byzfs_bft::Config;
use clap::{Args, Subcommand};
use load::NullOp;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Null-operation latency (PBFT OSDI'99 Table 1 layout).
    Micro(Box<micro::MicroArgs>),
    /// Throughput and latency vs number of clients (BFT library Figures 6-7).
    Throughput(Box<throughput::ThroughputArgs>),
    /// Throughput under Aardvark's attacks (needs a build with the feature `byzantine`).
    Attack(Box<attack::AttackArgs>),
}

pub fn run(c: BenchCommand) -> anyhow::Result<ExitCode> {
    match c {
        BenchCommand::Micro(a) => micro::run(*a),
        BenchCommand::Throughput(a) => throughput::run(*a),
        BenchCommand::Attack(a) => attack::run(*a),
    }
}

/// Options shared by both benchmarks.
#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Operations as `arg/result` sizes in KiB, comma-separated.
    #[arg(long, default_value = "0/0,0/4,4/0", value_delimiter = ',')]
    op: Vec<String>,
    /// Modes: rw (read-write) and/or ro (read-only).
    #[arg(long, default_value = "rw,ro", value_delimiter = ',')]
    mode: Vec<String>,
    /// Systems: byzfs, unreplicated (no MACs), unreplicated-mac.
    #[arg(
        long,
        default_value = "byzfs,unreplicated,unreplicated-mac",
        value_delimiter = ','
    )]
    systems: Vec<String>,
    /// Request batching (on: batches fill while one is in flight; off: one request per
    /// batch, up to 128 instances in parallel).
    #[arg(long, default_value = "on", value_delimiter = ',')]
    batching: Vec<OnOff>,
    /// Separate request transmission (requests above 1 KiB go to every replica and are
    /// ordered by digest).
    #[arg(long, default_value = "on", value_delimiter = ',')]
    srt: Vec<OnOff>,
    /// Tentative execution (reply after prepare).
    #[arg(long, default_value = "on", value_delimiter = ',')]
    tentative: Vec<OnOff>,
    /// The read-only optimisation (read-only requests answered without ordering).
    #[arg(long, default_value = "on", value_delimiter = ',')]
    read_only: Vec<OnOff>,
    /// Replica durability: memory (the seeds' BFS setting, the default here) and/or disk
    /// (promises and state fsync'd with group commit before they are relied on).
    #[arg(long, default_value = "memory", value_delimiter = ',')]
    durability: Vec<crate::fs::Durability>,
    /// Every link over TCP: the replicas get no Unix sockets (by default the co-located
    /// replicas and clients connect over Unix sockets).
    #[arg(long)]
    tcp_only: bool,
    /// Base view-change timeout of the benchmark clusters, in ms.
    #[arg(long, default_value_t = 5000)]
    view_change_timeout_ms: u64,
    /// Write the rows as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Working directory for cluster files and server logs (default: a fresh temporary
    /// directory, removed afterwards).
    #[arg(long)]
    dir: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

impl OnOff {
    fn on(self) -> bool {
        self == OnOff::On
    }
}

/// The ByzFS protocol switches of one configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Switches {
    pub batching: bool,
    pub srt: bool,
    pub tentative: bool,
    pub read_only: bool,
    /// `disk` durability (else `memory`).
    pub disk: bool,
}

/// The JSON name of a durability mode.
pub fn durability_name(disk: bool) -> String {
    if disk { "disk" } else { "memory" }.to_string()
}

impl Switches {
    /// The protocol parameters these switches select (everything else: `Config::new`).
    pub fn config(&self, view_change_timeout_ms: u64) -> Config {
        let mut c = Config::new(1);
        if !self.batching {
            // One request per batch (the first request always fits), and many instances in
            // flight so requests still proceed in parallel (BFT library Fig. 6, "no
            // batching"): W at its maximum, L - K.
            c.batch_bytes_max = 1;
            c.batch_window = c.log_window - c.checkpoint_interval;
        }
        if !self.srt {
            c.big_request_threshold = usize::MAX;
        }
        c.tentative_execution = self.tentative;
        c.read_only_optimisation = self.read_only;
        c.view_change_timeout = std::time::Duration::from_millis(view_change_timeout_ms);
        c
    }

    pub fn label(&self) -> String {
        let f = |on: bool, name: &str| format!("{name}={}", if on { "on" } else { "off" });
        [
            f(self.batching, "batching"),
            f(self.srt, "srt"),
            f(self.tentative, "tentative"),
            f(self.read_only, "ro-opt"),
            format!("durability={}", if self.disk { "disk" } else { "memory" }),
        ]
        .join(" ")
    }
}

impl Common {
    fn ops(&self) -> anyhow::Result<Vec<(String, usize, u32)>> {
        self.op
            .iter()
            .map(|s| {
                let (a, b) = s
                    .split_once('/')
                    .with_context(|| format!("--op {s:?}: expected ARG/RESULT in KiB, e.g. 0/4"))?;
                let kib = |x: &str| -> anyhow::Result<u32> {
                    let k: u32 = x
                        .trim()
                        .parse()
                        .with_context(|| format!("--op {s:?}: {x:?} is not a size in KiB"))?;
                    if k > 512 {
                        bail!("--op {s:?}: sizes above 512 KiB are not supported");
                    }
                    Ok(k * 1024)
                };
                Ok((s.trim().to_string(), kib(a)? as usize, kib(b)?))
            })
            .collect()
    }

    fn modes(&self) -> anyhow::Result<Vec<bool>> {
        self.mode
            .iter()
            .map(|m| match m.as_str() {
                "rw" => Ok(false),
                "ro" => Ok(true),
                _ => bail!("--mode {m:?}: use rw or ro"),
            })
            .collect()
    }

    fn systems(&self) -> anyhow::Result<Vec<crate::procs::System>> {
        self.systems
            .iter()
            .map(|s| crate::procs::System::parse(s))
            .collect()
    }

    fn switches(&self) -> Vec<Switches> {
        let mut out = Vec::new();
        for &batching in &self.batching {
            for &srt in &self.srt {
                for &tentative in &self.tentative {
                    for &read_only in &self.read_only {
                        for &d in &self.durability {
                            out.push(Switches {
                                batching: batching.on(),
                                srt: srt.on(),
                                tentative: tentative.on(),
                                read_only: read_only.on(),
                                disk: d == crate::fs::Durability::Disk,
                            });
                        }
                    }
                }
            }
        }
        out
    }

    fn null_ops(&self) -> anyhow::Result<Vec<(String, NullOp)>> {
        let mut out = Vec::new();
        for (name, arg, result) in self.ops()? {
            for ro in self.modes()? {
                out.push((
                    name.clone(),
                    NullOp {
                        arg_bytes: arg,
                        result_bytes: result,
                        read_only: ro,
                    },
                ));
            }
        }
        Ok(out)
    }
}

/// The working directory: the given one, or a temporary one removed on drop.
pub struct WorkDir {
    path: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

impl WorkDir {
    fn new(given: Option<&Path>) -> anyhow::Result<WorkDir> {
        match given {
            Some(p) => {
                std::fs::create_dir_all(p)
                    .with_context(|| format!("cannot create {}", p.display()))?;
                Ok(WorkDir {
                    path: p.to_path_buf(),
                    _temp: None,
                })
            }
            None => {
                let t = tempfile::Builder::new().prefix("byzfs-bench-").tempdir()?;
                Ok(WorkDir {
                    path: t.path().to_path_buf(),
                    _temp: Some(t),
                })
            }
        }
    }

    /// A fresh subdirectory for one cluster.
    fn fresh(&self, name: &str) -> PathBuf {
        let mut i = 0;
        loop {
            let p = self.path.join(format!("{name}-{i}"));
            if !p.exists() {
                return p;
            }
            i += 1;
        }
    }
}
