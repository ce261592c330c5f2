//! `byzfs unreplicated`: the unreplicated baseline of the benchmarks — one process serving
//! the null, key-value or file service (NO-REP) over the same transport as a replica, with
//! or without MACs (issue #3 item 7), with the replicas' durability modes (issue #4 item 4).

use crate::replica::{file_service, DurabilityMode, ServiceKind};
use anyhow::Context as _;
use byzfs_bft::services::kv::KvService;
use byzfs_bft::services::null::NullService;
use byzfs_bft::Service;
use byzfs_net::cluster::ClusterConfig;
use byzfs_net::keygen::replica_key_path;
use byzfs_net::node::UnreplicatedNode;
use byzfs_net::storage::{DiskDurability, Durability, MemoryDurability};
use byzfs_net::ReplicaSecret;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct UnreplicatedArgs {
    /// A cluster file; the server listens at replica 0's address with replica 0's key, so
    /// the cluster's client credentials work unchanged.
    #[arg(long)]
    config: PathBuf,
    /// Replica 0's key file (default: replica-0.key beside the config).
    #[arg(long)]
    key: Option<PathBuf>,
    /// Plain requests and replies (no MACs); clients must use the same setting.
    #[arg(long)]
    no_macs: bool,
    /// The service.
    #[arg(long, value_enum, default_value_t = ServiceKind::Null)]
    service: ServiceKind,
    /// `disk`: every executed request is fsync'd (one group commit per event-loop turn, as a
    /// replica's) before it is answered, and the state survives a restart; `memory`:
    /// nothing is kept across a restart (the file service's store is then scratch space on
    /// disk, as a replica's).
    #[arg(long, value_enum, default_value_t = DurabilityMode::Disk)]
    durability: DurabilityMode,
    /// Data directory (created if needed; default: data/unreplicated beside the config): the
    /// `disk` mode's log and checkpoints, and the file service's store.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Stop when stdin closes (set by `byzfs bench` so servers never outlive it).
    #[arg(long, hide = true)]
    exit_with_parent: bool,
}

pub fn run(a: UnreplicatedArgs) -> anyhow::Result<ExitCode> {
    crate::logging::init("info");
    let cluster = ClusterConfig::load(&a.config)?;
    let key = a
        .key
        .clone()
        .unwrap_or_else(|| replica_key_path(a.config.parent().unwrap_or_else(|| ".".as_ref()), 0));
    let secret = ReplicaSecret::load(&key, &cluster, 0)?;
    let dir = a.data.clone().unwrap_or_else(|| {
        a.config
            .parent()
            .unwrap_or_else(|| ".".as_ref())
            .join("data")
            .join("unreplicated")
    });
    // In `disk` mode, the checkpoint the server's database names (if any).
    let mut stored = None;
    let durability: Box<dyn Durability> = match a.durability {
        DurabilityMode::Memory => Box::new(MemoryDurability),
        DurabilityMode::Disk => {
            let identity = format!(
                "unreplicated server of cluster {} (service {})",
                cluster
                    .cluster_id
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>(),
                a.service.name()
            );
            let disk = DiskDurability::open(&dir, &identity)
                .with_context(|| format!("data directory {}", dir.display()))?;
            stored = Some(disk.stored_checkpoint());
            Box::new(disk)
        }
    };
    match a.service {
        ServiceKind::Null => serve(cluster, secret, NullService::default(), durability, &a),
        ServiceKind::Kv => serve(cluster, secret, KvService::new(), durability, &a),
        // NO-REP of the file benchmarks (issue #4 item 4): the same file service on the same
        // store as a replica's, so that files of many GB do not need memory and the baseline
        // does the same work per operation: in `disk` mode a persistent log store, reopened
        // at the checkpoint the log names; in `memory` mode a scratch one.
        ServiceKind::Fs => {
            let cfg = crate::replica::fs_config(&cluster);
            let fs = file_service(&dir, cfg, stored)?;
            serve(cluster, secret, fs, durability, &a)
        }
    }
}

fn serve<S: Service>(
    cluster: ClusterConfig,
    secret: ReplicaSecret,
    service: S,
    durability: Box<dyn Durability>,
    a: &UnreplicatedArgs,
) -> anyhow::Result<ExitCode> {
    let mut node =
        UnreplicatedNode::new(cluster, secret, service, !a.no_macs)?.with_durability(durability);
    let addr = node.bind()?;
    tracing::info!(%addr, macs = !a.no_macs, service = a.service.name(),
        durability = a.durability.name(), "listening");
    let rt = byzfs_net::signals::runtime()?;
    let exit_with_parent = a.exit_with_parent;
    let result = rt.block_on(node.run(async move {
        let why = byzfs_net::signals::shutdown(exit_with_parent).await;
        tracing::info!(why, "shutting down");
    }));
    rt.shutdown_background();
    result?;
    Ok(ExitCode::SUCCESS)
}
