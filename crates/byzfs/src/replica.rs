//! `byzfs replica`: one replica process.

use anyhow::Context as _;
use byzfs_bft::services::kv::KvService;
use byzfs_bft::services::null::NullService;
use byzfs_bft::Service;
use byzfs_net::cluster::ClusterConfig;
use byzfs_net::keygen::replica_key_path;
use byzfs_net::{ReplicaNode, ReplicaSecret};
use clap::{Args, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

/// The replicated service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ServiceKind {
    /// The null service of the micro-benchmarks.
    Null,
    /// The key-value store (`byzfs kv`).
    Kv,
}

impl ServiceKind {
    pub fn name(self) -> &'static str {
        match self {
            ServiceKind::Null => "null",
            ServiceKind::Kv => "kv",
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
    /// This replica's key file (default: replica-<id>.key beside the config).
    #[arg(long)]
    key: Option<PathBuf>,
    /// Data directory (created if needed). Durability is `memory` for now: promises and
    /// state survive through replication, not on disk.
    #[arg(long)]
    data: Option<PathBuf>,
    /// The service to replicate; every replica of a cluster must run the same one.
    #[arg(long, value_enum, default_value_t = ServiceKind::Kv)]
    service: ServiceKind,
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9100).
    #[arg(long)]
    metrics: Option<SocketAddr>,
    /// Stop when stdin closes (set by `byzfs up` so replicas never outlive it).
    #[arg(long, hide = true)]
    exit_with_parent: bool,
}

pub fn run(a: ReplicaArgs) -> anyhow::Result<ExitCode> {
    crate::logging::init("info");
    let cluster = ClusterConfig::load(&a.config)?;
    cluster.replica(a.id)?;
    let key = a.key.clone().unwrap_or_else(|| {
        replica_key_path(a.config.parent().unwrap_or_else(|| ".".as_ref()), a.id)
    });
    let secret = ReplicaSecret::load(&key, &cluster, a.id)?;
    if let Some(d) = &a.data {
        std::fs::create_dir_all(d)
            .with_context(|| format!("cannot create the data directory {}", d.display()))?;
    }
    if let Some(addr) = a.metrics {
        install_metrics(addr)?;
    }
    match a.service {
        ServiceKind::Null => serve(cluster, secret, NullService::default(), &a),
        ServiceKind::Kv => serve(cluster, secret, KvService::new(), &a),
    }
}

fn serve<S: Service>(
    cluster: ClusterConfig,
    secret: ReplicaSecret,
    service: S,
    a: &ReplicaArgs,
) -> anyhow::Result<ExitCode> {
    let mut node = ReplicaNode::new(cluster, secret, service)?;
    let addr = node.bind()?;
    tracing::info!(
        replica = a.id,
        %addr,
        service = a.service.name(),
        metrics = ?a.metrics,
        "listening"
    );
    let rt = crate::runtime()?;
    let exit_with_parent = a.exit_with_parent;
    let result = rt.block_on(node.run(async move {
        let why = crate::signals::shutdown(exit_with_parent).await;
        tracing::info!(replica = a.id, why, "shutting down");
    }));
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
        .install()
        .with_context(|| format!("cannot serve metrics on {addr}"))?;
    Ok(())
}
