//! `byzfs`: the ByzFS command line.
//!
//! ```text
//! byzfs keygen --replicas 4 --out DIR        keys and cluster.toml for a new cluster
//! byzfs client-key --config C --admin-key A --id ID --out FILE
//! byzfs replica --config C --id I [--key K] [--data DIR] [--service null|kv|fs] [--metrics ADDR]
//! byzfs up [--replicas N] [--dir D] [--service kv] [--mount MNT]   a local cluster of child
//!                                            processes, restarted when they exit; --mount:
//!                                            the file service, mounted
//! byzfs kv --config C [--key K] put KEY VALUE | get KEY | delete KEY | append KEY VALUE
//! byzfs mount --config C [--key K] MOUNTPOINT   mount the file service (--service fs) with FUSE
//! byzfs status --config C                    per replica: reachable, view, primary, …; exits 0,
//!                                            2 (no fault to spare) or 1 (cannot serve)
//! byzfs identity new|show FILE               a member identity for encrypted trees
//! byzfs group --config C --identity F create NAME | add G --member K [--writer] | remove G --member K | list G
//! byzfs unreplicated --config C [--no-macs]  the unreplicated baseline server
//! byzfs bench micro|throughput [--json P]    benchmarks on loopback (PBFT Table 1, BFT Fig. 6-7)
//! byzfs bench attack [--json P]              throughput under Aardvark's attacks (test builds)
//! byzfs bench andrew|postmark|largefile      file-system benchmarks (ByzFS, NO-REP, local, bindfs)
//! byzfs bench store                          the file service's store alone against ext4 via bindfs
//! byzfs bench crypt                          the cost of each step of an encrypted mount
//! byzfs bench sites --sites wan               check the sites harness's links (root)
//! byzfs bench bandwidth                      bytes on the wire per update (root)
//! ```
//!
//! Errors print as one line, `error: …`, and exit non-zero.

#![forbid(unsafe_code)]

#[cfg(feature = "byzantine")]
mod byzantine;
mod capacity_report;
mod group;
mod identity;
mod keygen;
mod kv;
mod logging;
mod mount;
#[cfg(feature = "byzantine")]
mod old_snapshot;
mod replica;
mod restart_policy;
mod run_file;
mod status;
mod unreplicated;
mod up;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// ByzFS: a Byzantine-fault-tolerant replicated file system.
#[derive(Parser, Debug)]
#[command(name = "byzfs", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Generate cluster.toml, replica keys, the admin key and a client credential.
    Keygen(keygen::KeygenArgs),
    /// Issue a credential for another client (no replica restart needed).
    ClientKey(keygen::ClientKeyArgs),
    /// Run one replica.
    Replica(replica::ReplicaArgs),
    /// Run a local cluster: 3f+1 replica processes on loopback.
    Up(up::UpArgs),
    /// Use the key-value service of a cluster.
    Kv(kv::KvArgs),
    /// Show every replica's state.
    Status(status::StatusArgs),
    /// Serve the null service unreplicated (the benchmarks' baseline).
    Unreplicated(unreplicated::UnreplicatedArgs),
    /// Run a benchmark: starts what it needs (processes on loopback, mounts), prints a table, writes JSON.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Mount the file service of a cluster (replicas run with `--service fs`).
    Mount(mount::MountArgs),
    /// Make or show a member identity for encrypted trees.
    Identity(identity::IdentityArgs),
    /// Create encryption groups and change their members.
    Group(group::GroupArgs),
}

/// `byzfs bench …`: the loopback benchmarks and the file-system ones (`crates/byzfs-bench`).
#[derive(Subcommand, Debug)]
enum BenchCommand {
    #[command(flatten)]
    Loopback(byzfs_bench::loopback::BenchCommand),
    #[command(flatten)]
    Fs(byzfs_bench::fs::FsbenchCommand),
    /// The cost of each cryptographic step of an encrypted mount (one thread).
    Crypt(byzfs_bench::crypt::CryptArgs),
    /// Sites on one machine (root): measures each site link of the profiles (rate, round trip).
    Sites(byzfs_bench::sites::check::SitesArgs),
    /// Bytes on the wire per file-system update, ByzFS and NO-REP across sites (root;
    /// Pangaea's Table 3).
    Bandwidth(byzfs_bench::sites::bandwidth::BandwidthArgs),
}

fn main() -> ExitCode {
    // Before any thread starts: a parent's blocked SIGTERM must not outlive `exec`.
    byzfs_net::signals::unblock_shutdown_signals();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Keygen(a) => keygen::keygen(a),
        Command::ClientKey(a) => keygen::client_key(a),
        Command::Replica(a) => replica::run(a),
        Command::Up(a) => up::run(a),
        Command::Kv(a) => kv::run(a),
        Command::Status(a) => status::run(a),
        Command::Unreplicated(a) => unreplicated::run(a),
        Command::Bench(BenchCommand::Loopback(c)) => {
            logging::init("warn");
            if matches!(c, byzfs_bench::loopback::BenchCommand::Attack(_))
                && !cfg!(feature = "byzantine")
            {
                Err(anyhow::anyhow!(
                    "`byzfs bench attack` starts replicas in a test-only Byzantine mode, which \
                     this build lacks: build with `cargo build --release --features \
                     byzfs/byzantine` (or run `bash scripts/bench.sh`)"
                ))
            } else {
                byzfs_bench::loopback::run(c)
            }
        }
        Command::Bench(BenchCommand::Crypt(a)) => byzfs_bench::crypt::run(a),
        Command::Bench(BenchCommand::Sites(a)) => byzfs_bench::sites::check::run(a),
        Command::Bench(BenchCommand::Bandwidth(a)) => {
            logging::init("warn");
            byzfs_bench::sites::bandwidth::run(a)
        }
        Command::Bench(BenchCommand::Fs(c)) => {
            logging::init("warn");
            byzfs_bench::fs::run_command(c)
        }
        Command::Mount(a) => mount::run(a),
        Command::Identity(a) => identity::run(a),
        Command::Group(a) => group::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // `{:#}` joins the context chain on one line.
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `dir/name`, where `dir` is the directory holding `config`.
fn beside(config: &std::path::Path, name: &str) -> std::path::PathBuf {
    config
        .parent()
        .unwrap_or_else(|| std::path::Path::new("."))
        .join(name)
}
