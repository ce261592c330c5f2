//! `byzfs unreplicated`: the unreplicated baseline of the benchmarks — one process serving
//! the null (or key-value) service over the same transport as a replica, with or without
//! MACs (issue #3 item 7).

use crate::replica::ServiceKind;
use byzfs_bft::services::kv::KvService;
use byzfs_bft::services::null::NullService;
use byzfs_bft::Service;
use byzfs_net::cluster::ClusterConfig;
use byzfs_net::keygen::replica_key_path;
use byzfs_net::node::UnreplicatedNode;
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
    match a.service {
        ServiceKind::Null => serve(cluster, secret, NullService::default(), &a),
        ServiceKind::Kv => serve(cluster, secret, KvService::new(), &a),
        // NO-REP of the file benchmarks (issue #4 item 4). In memory for now: the replicas'
        // `disk` mode has no unreplicated counterpart yet.
        ServiceKind::Fs => serve(
            cluster,
            secret,
            byzfs_fs::FileService::in_memory(byzfs_fs::FsConfig::default()),
            &a,
        ),
    }
}

fn serve<S: Service>(
    cluster: ClusterConfig,
    secret: ReplicaSecret,
    service: S,
    a: &UnreplicatedArgs,
) -> anyhow::Result<ExitCode> {
    let mut node = UnreplicatedNode::new(cluster, secret, service, !a.no_macs)?;
    let addr = node.bind()?;
    tracing::info!(%addr, macs = !a.no_macs, service = a.service.name(), "listening");
    let rt = crate::runtime()?;
    let exit_with_parent = a.exit_with_parent;
    let result = rt.block_on(node.run(async move {
        let why = crate::signals::shutdown(exit_with_parent).await;
        tracing::info!(why, "shutting down");
    }));
    rt.shutdown_background();
    result?;
    Ok(ExitCode::SUCCESS)
}
