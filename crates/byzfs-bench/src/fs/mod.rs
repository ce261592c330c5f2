//! `byzfs bench andrew|postmark|largefile|parallel|store`: file-system benchmarks (issue #4
//! item 5; `parallel`, several processes on one mount, issue #45; `store`, the file
//! service's store alone, issue #46).
//!
//! Each benchmark runs the same workload against several *targets* (see `target.rs`): ByzFS and
//! NO-REP (an unreplicated ByzFS) mounted through FUSE, local disk, and a plain FUSE
//! passthrough of local disk (`bindfs`, the FUSE cost floor). Every target is started fresh
//! for every run and stopped afterwards. Each benchmark prints a table in its seed's layout,
//! with ratios between targets measured in the same run and CPU seconds beside wall time
//! (client: this process and the programs it runs; server: bindfs or the cluster's
//! processes), and can write `--json` rows and an SVG bar chart (`--svg`).
//!
//! The seeds (`shared/seeds/`) and what each command redraws:
//! - `andrew`: PBFT OSDI'99 Tables 2–3 and Pangaea Table 2 (Andrew-Tcl, five phases), and the
//!   BFT library's Figure 8 (Andrew-N with `--copies N`);
//! - `postmark`: the BFT library's Figure 9 (PostMark, 10,000 files of 512 B–16 KiB,
//!   100,000 transactions);
//! - `largefile`: Plutus Table 5 (40 MB files, sequential and random read and write);
//! - `parallel`: no seed; issue #45's four processes on four directories.
//!
//! The commands sit beside `bench micro|throughput` under `byzfs bench`: `main.rs` flattens
//! [`FsbenchCommand`] and `bench::BenchCommand` into one subcommand enum.

mod andrew;
mod diskio;
mod largefile;
mod parallel;
mod postmark;
mod report;
mod store;
pub(crate) mod target;

use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

pub use target::Durability;

/// The file-system benchmarks (`byzfs bench andrew|postmark|largefile`).
#[derive(Subcommand, Debug)]
pub enum FsbenchCommand {
    /// Andrew benchmark: mkdir, copy, stat, read, compile a real C source tree (Tcl 8.6).
    Andrew(Box<andrew::AndrewArgs>),
    /// PostMark (Debian package `postmark`): small-file transactions per second.
    Postmark(Box<postmark::PostmarkArgs>),
    /// 40 MB files: sequential and random read and write (Plutus Table 5).
    Largefile(Box<largefile::LargefileArgs>),
    /// Several processes on one mount: small files another mount wrote, stat and read by
    /// one process, then by several at once (issue #45).
    Parallel(Box<parallel::ParallelArgs>),
    /// The file service's store alone: create, write 4 KiB and remove, against ext4
    /// through the passthrough (issue #46).
    Store(store::StoreArgs),
}

/// Options shared by every file-system benchmark.
#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    /// Targets, in order: byzfs, norep, local, passthrough. Targets that cannot be started
    /// (e.g. FUSE missing) are skipped with a warning.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "byzfs,norep,local,passthrough"
    )]
    pub targets: Vec<target::TargetKind>,
    /// ByzFS read-only optimisation for lookups (the seed's BFS r/o lookup vs BFS-strict);
    /// `on,off` measures both as two targets (`off`: `byzfs mount --strict`).
    #[arg(long, value_delimiter = ',', default_value = "on")]
    pub ro_lookups: Vec<OnOff>,
    /// ByzFS and NO-REP mounts holding directory delegations (creations and removals
    /// answered at once, sent in batches); `on,off` measures both (`off`: `byzfs mount
    /// --no-dir-delegations`, targets labelled `…-nodeleg`).
    #[arg(long, value_delimiter = ',', default_value = "on")]
    pub dir_delegations: Vec<OnOff>,
    /// Where ByzFS and NO-REP replicas keep their state.
    #[arg(long, value_enum, default_value_t = Durability::Disk)]
    pub durability: Durability,
    /// ByzFS and NO-REP over TCP only: no Unix sockets between the co-located processes
    /// (`byzfs up --tcp-only`, `byzfs keygen --tcp-only`).
    #[arg(long)]
    pub tcp_only: bool,
    /// Runs ByzFS and NO-REP across sites on this machine (needs root): each replica, the
    /// mount and the NO-REP server in a network namespace of its own, joined by shaped,
    /// delayed links (profiles: lan, wan, slow-5, slow-1, each also with -apart; README
    /// "Sites on one machine"). Local and passthrough targets have no network and ignore it.
    #[arg(long, value_parser = crate::sites::Profile::parse)]
    pub sites: Option<crate::sites::Profile>,
    /// A `[protocol]` parameter of the ByzFS and NO-REP cluster files, as KEY=VALUE
    /// (repeatable; names as in the cluster file, e.g. `monitor_period_ms=10000`).
    #[arg(long = "protocol", value_name = "KEY=VALUE", value_parser = parse_protocol)]
    pub protocol: Vec<String>,
    /// The ByzFS and NO-REP cluster files' `[fs] clock_lag_tolerance_ms` (how far behind
    /// its clock a replica takes the agreed time; raise it on slow links between sites).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1_000..=600_000))]
    pub clock_lag_tolerance_ms: Option<u64>,
    /// Seconds the kernel may cache attributes and names on the FUSE targets (`byzfs
    /// mount --cache-timeout`; bindfs's `attr_timeout`, `entry_timeout` and
    /// `negative_timeout`); 0 turns those caches off. Default: each target's own.
    #[arg(long, value_name = "SECONDS")]
    pub cache_timeout: Option<f64>,
    /// FUSE threads of the ByzFS and NO-REP mounts (`byzfs mount --threads`; above one,
    /// read-only operations go in lanes). Default: the mount's own.
    #[arg(long, value_name = "N")]
    pub mount_threads: Option<u16>,
    /// Runs per target; tables show the median, `--json` every run.
    #[arg(long, default_value_t = 1)]
    pub runs: u32,
    /// Unrecorded warm-up runs per target before the measured ones.
    #[arg(long, default_value_t = 0)]
    pub warmup: u32,
    /// Directory holding every target's backing store and mount point (default: the system
    /// temporary directory). Put it on the disk you mean to measure.
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Write the result rows as a JSON array to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw a bar chart (SVG) to this file.
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

/// A `--protocol` assignment, checked against the cluster file's `[protocol]` fields.
fn parse_protocol(s: &str) -> Result<String, String> {
    byzfs_net::cluster::ProtocolParams::default().set(s)?;
    Ok(s.to_string())
}

/// `on` or `off`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnOff {
    /// Disabled.
    Off,
    /// Enabled.
    On,
}

/// Runs one file-system benchmark command.
pub fn run_command(command: FsbenchCommand) -> anyhow::Result<ExitCode> {
    match command {
        FsbenchCommand::Andrew(a) => andrew::run(*a),
        FsbenchCommand::Postmark(a) => postmark::run(*a),
        FsbenchCommand::Largefile(a) => largefile::run(*a),
        FsbenchCommand::Parallel(a) => parallel::run(*a),
        FsbenchCommand::Store(a) => store::run(a),
    }?;
    Ok(ExitCode::SUCCESS)
}
