//! `byzfs replica`: one replica process.

use anyhow::Context as _;
use byzfs_bft::services::kv::KvService;
use byzfs_bft::services::null::NullService;
use byzfs_bft::{Seq, Service};
use byzfs_fs::store::LogStore;
use byzfs_fs::{FileService, FsConfig};
use byzfs_net::cluster::ClusterConfig;
use byzfs_net::keygen::replica_key_path;
use byzfs_net::storage::{DiskDurability, Durability, MemoryDurability};
use byzfs_net::{NodeOptions, ReplicaNode, ReplicaSecret};
use clap::{Args, ValueEnum};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where a replica keeps what it promised and its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DurabilityMode {
    /// Promises and the service state are on disk (redb, fsync per group commit) before they
    /// are relied on: a replica survives a crash of every replica at once.
    Disk,
    /// Nothing on disk (the BFS choice: stability through replication); a restarted replica
    /// starts empty and catches up through state transfer.
    Memory,
}

impl DurabilityMode {
    pub fn name(self) -> &'static str {
        match self {
            DurabilityMode::Disk => "disk",
            DurabilityMode::Memory => "memory",
        }
    }
}

/// The replicated service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ServiceKind {
    /// The null service of the micro-benchmarks.
    Null,
    /// The key-value store (`byzfs kv`).
    Kv,
    /// The file service (`byzfs mount`), state in a log store under `--data` (`fs-state/`).
    Fs,
}

impl ServiceKind {
    pub fn name(self) -> &'static str {
        match self {
            ServiceKind::Null => "null",
            ServiceKind::Kv => "kv",
            ServiceKind::Fs => "fs",
        }
    }
}

#[derive(Args, Debug)]
pub struct ReplicaArgs {
    /// The cluster file.
    #[arg(long)]
    config: PathBuf,
    /// This replica's id.
    #[arg(long)]
    id: u32,
    /// This replica's key file (default: `replica-<id>.key` beside the config).
    #[arg(long)]
    key: Option<PathBuf>,
    /// Data directory (created if needed; default: `data/replica-ID` beside the config): the
    /// `disk` mode's promises and checkpoints, and the file service's store.
    #[arg(long)]
    data: Option<PathBuf>,
    /// `disk`: promises and state are fsync'd (group commit) before they are relied on;
    /// `memory`: nothing is kept across a restart (a restarted replica rejoins through state
    /// transfer; the file service's store is then scratch space on disk, where in `disk`
    /// mode it persists and is reopened at start).
    #[arg(long, value_enum, default_value_t = DurabilityMode::Disk)]
    durability: DurabilityMode,
    /// The service to replicate; every replica of a cluster must run the same one.
    #[arg(long, value_enum, default_value_t = ServiceKind::Kv)]
    service: ServiceKind,
    /// `--service fs`: owner of the file system's root directory, `UID:GID` (default
    /// 0:0). Part of the replicated configuration: every replica must get the same.
    #[arg(long, value_name = "UID:GID", value_parser = parse_owner)]
    fs_root_owner: Option<(u32, u32)>,
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9100).
    #[arg(long)]
    metrics: Option<SocketAddr>,
    /// Listen on this address instead of the one the cluster file gives this replica: for a
    /// host behind NAT, whose public address is not its own (`0.0.0.0:7000`). Peers and
    /// clients still dial the cluster file's address.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Stop when stdin closes (set by `byzfs up` so replicas never outlive it).
    #[arg(long, hide = true)]
    exit_with_parent: bool,
    /// TEST-ONLY fault injection: make this replica Byzantine (see `byzantine.rs`; only in
    /// builds with the feature `byzantine`).
    #[cfg(feature = "byzantine")]
    #[arg(long, value_enum, hide = true)]
    byzantine: Option<crate::byzantine::Byzantine>,
    /// TEST-ONLY fault injection: make this replica attack the others' throughput (see
    /// `byzfs_net::ReplicaAttack`; `byzfs bench attack`; only in builds with the feature
    /// `byzantine`).
    #[cfg(feature = "byzantine")]
    #[arg(long, value_enum, hide = true)]
    attack: Option<crate::byzantine::Attack>,
}

/// Parses `UID:GID`.
fn parse_owner(s: &str) -> Result<(u32, u32), String> {
    let (u, g) = s.split_once(':').ok_or("expected UID:GID")?;
    Ok((
        u.parse().map_err(|e| format!("uid: {e}"))?,
        g.parse().map_err(|e| format!("gid: {e}"))?,
    ))
}

pub fn run(a: ReplicaArgs) -> anyhow::Result<ExitCode> {
    crate::logging::init("info");
    let cluster = ClusterConfig::load(&a.config)?;
    cluster.replica(a.id)?;
    let key = a.key.clone().unwrap_or_else(|| {
        replica_key_path(a.config.parent().unwrap_or_else(|| ".".as_ref()), a.id)
    });
    let secret = ReplicaSecret::load(&key, &cluster, a.id)?;
    // In `disk` mode, the stable checkpoint the replica's database names (if any).
    let mut stored = None;
    let durability: Box<dyn Durability> = match a.durability {
        DurabilityMode::Memory => Box::new(MemoryDurability),
        DurabilityMode::Disk => {
            let dir = data_dir(&a);
            let identity = format!(
                "replica {} of cluster {} (service {})",
                a.id,
                hex_id(&cluster.cluster_id),
                a.service.name()
            );
            let disk = DiskDurability::open(&dir, &identity)?;
            stored = Some(disk.stored_checkpoint());
            Box::new(disk)
        }
    };
    if let Some(addr) = a.metrics {
        install_metrics(addr)?;
    }
    match a.service {
        ServiceKind::Null => serve(cluster, secret, NullService::default(), durability, &a),
        ServiceKind::Kv => serve(cluster, secret, KvService::new(), durability, &a),
        ServiceKind::Fs => {
            let mut cfg = fs_config(&cluster);
            if let Some((uid, gid)) = a.fs_root_owner {
                (cfg.root_uid, cfg.root_gid) = (uid, gid);
            }
            let fs = file_service(&data_dir(&a), cfg, stored)?;
            // `df` and ENOSPC never promise more than the disks hold (`capacity_report`).
            // Started once the store's directory exists: measured before, a disk that
            // cannot be found reported no room, and two such reports made the cluster
            // answer ENOSPC to everything until the next report, 30 s later.
            crate::capacity_report::Reporter::new(&cluster, &secret, &data_dir(&a))?.spawn()?;
            #[cfg(feature = "byzantine")]
            if a.byzantine == Some(crate::byzantine::Byzantine::OldSnapshot) {
                tracing::warn!(
                    replica = a.id,
                    "TEST-ONLY fault injection: this replica answers reads from an old snapshot"
                );
                let liar = crate::old_snapshot::OldSnapshot::new(fs);
                return serve(cluster, secret, liar, durability, &a);
            }
            serve(cluster, secret, fs, durability, &a)
        }
    }
}

/// The file service's configuration from the cluster file's `[fs]` limits (the same at
/// every replica, and at NO-REP), taking from each client only the credentials its
/// admin-signed grant allows (`byzfs_fs::proto::grant`).
pub(crate) fn fs_config(cluster: &ClusterConfig) -> FsConfig {
    FsConfig {
        capacity_bytes: cluster.fs.capacity_bytes,
        max_inodes: cluster.fs.max_inodes,
        reporters: Some(byzfs_fs::config::Reporters {
            first: byzfs_net::cert::REPLICA_CLIENT_FIRST,
            session_bits: byzfs_net::cert::SESSION_BITS,
            replicas: cluster.replicas.len() as u32,
        }),
        client_policy: byzfs_fs::ClientPolicy::Certified(Box::new(byzfs_fs::policy::Certified {
            admin: cluster.admin_public,
            cluster_id: cluster.cluster_id,
            session_bits: byzfs_net::cert::SESSION_BITS,
            replica_clients: byzfs_net::cert::REPLICA_CLIENT_FIRST,
        })),
        // Group records and writer proofs name the cluster (`byzfs_fs::crypt_group`).
        cluster_id: cluster.cluster_id,
        clock_lag_tolerance: std::time::Duration::from_millis(cluster.fs.clock_lag_tolerance_ms),
        ..FsConfig::default()
    }
}

/// The file service on its log store `fs-state/` in `dir` (created), for a replica or the
/// unreplicated server. `stored` is `None` in `memory` mode, else the stable checkpoint the
/// data directory's own database names (`None` if none yet):
/// * `disk`: the store persists. `Replica::restore` (or NO-REP's restore) returns it to
///   that checkpoint and replays the executed batches after it; the database keeps only the
///   checkpoint's digests and the reply cache. With no checkpoint named yet, the store
///   starts empty.
/// * `memory`: it starts empty and catches up by state transfer, so the store is scratch
///   space, emptied here and never synced.
///
/// A directory that still holds the store of an older byzfs (`fs-state.redb`) is refused.
pub(crate) fn file_service(
    dir: &Path,
    cfg: FsConfig,
    stored: Option<Option<Seq>>,
) -> anyhow::Result<FileService<LogStore>> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the data directory {}", dir.display()))?;
    let old = dir.join("fs-state.redb");
    if old.exists() {
        anyhow::bail!(
            "{} holds the file service's state in the store of an older byzfs, which this one \
             does not read; move the data directory away and start the replica again: it \
             rejoins empty and catches up from the others by state transfer (a whole cluster \
             of older replicas upgrades as docs/DEPLOY.md \"Upgrades\" says)",
            old.display()
        );
    }
    let path = dir.join("fs-state");
    let store = match stored {
        Some(seq) => LogStore::open_persistent(&path, cfg.partitions, seq.is_none()),
        None => LogStore::create_scratch(&path, cfg.partitions),
    }
    .with_context(|| format!("cannot open the store in {}", path.display()))?;
    FileService::with_store(store, cfg)
        .with_context(|| format!("cannot initialise the store in {}", path.display()))
}

/// `--data`, or `data/replica-<id>` beside the config.
fn data_dir(a: &ReplicaArgs) -> PathBuf {
    a.data.clone().unwrap_or_else(|| {
        a.config
            .parent()
            .unwrap_or_else(|| ".".as_ref())
            .join("data")
            .join(format!("replica-{}", a.id))
    })
}

fn hex_id(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

fn serve<S: Service>(
    cluster: ClusterConfig,
    secret: ReplicaSecret,
    service: S,
    durability: Box<dyn Durability>,
    a: &ReplicaArgs,
) -> anyhow::Result<ExitCode> {
    #[cfg(feature = "byzantine")]
    let liar = crate::byzantine::chosen(a.byzantine, a.service.name(), a.id);
    let mut node = ReplicaNode::new(cluster, secret, service)?
        .with_durability(durability)
        .with_options(NodeOptions {
            #[cfg(feature = "byzantine")]
            lie_to_clients: liar.clone(),
            #[cfg(feature = "byzantine")]
            attack: a.attack.map(crate::byzantine::Attack::runtime),
            listen: a.listen.map(|l| l.to_string()),
            ..NodeOptions::default()
        });
    let addr = node.bind()?;
    tracing::info!(
        replica = a.id,
        %addr,
        service = a.service.name(),
        durability = a.durability.name(),
        metrics = ?a.metrics,
        "listening"
    );
    let rt = byzfs_net::signals::runtime()?;
    let exit_with_parent = a.exit_with_parent;
    let result = rt.block_on(node.run(async move {
        let why = byzfs_net::signals::shutdown(exit_with_parent).await;
        tracing::info!(replica = a.id, why, "shutting down");
    }));
    #[cfg(feature = "byzantine")]
    crate::byzantine::report(liar.as_ref(), a.id);
    // Do not wait for the blocking stdin reader: it only returns when the parent exits.
    rt.shutdown_background();
    result?;
    Ok(ExitCode::SUCCESS)
}

/// Installs the Prometheus exporter (its HTTP listener runs on its own thread, so scrapes
/// never delay the replica's event loop).
fn install_metrics(addr: SocketAddr) -> anyhow::Result<()> {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    let batch_buckets = [
        1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
    ];
    // 25 µs … 6.4 s, doubling: loopback round trips to view-change timeouts.
    let latency_buckets: Vec<f64> = (0..19).map(|i| 25e-6 * f64::from(1u32 << i)).collect();
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(
            Matcher::Full(byzfs_net::node::BATCH_SIZE_METRIC.to_string()),
            &batch_buckets,
        )?
        .set_buckets_for_metric(
            Matcher::Full(byzfs_net::node::REQUEST_LATENCY_METRIC.to_string()),
            &latency_buckets,
        )?
        .set_buckets_for_metric(
            Matcher::Full(byzfs_net::node::TURN_DURATION_METRIC.to_string()),
            &latency_buckets,
        )?
        .set_buckets_for_metric(
            Matcher::Full(byzfs_net::node::DISK_WORK_DURATION_METRIC.to_string()),
            &latency_buckets,
        )?
        .install()
        .with_context(|| format!("cannot serve metrics on {addr}"))?;
    Ok(())
}
