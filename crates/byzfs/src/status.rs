//! `byzfs status`: asks every replica for its status over the handshake's status request
//! (unauthenticated, read-only; see byzfs-net's README).

use byzfs_net::cluster::ClusterConfig;
use byzfs_net::handshake::query_status;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The cluster file.
    #[arg(long)]
    config: PathBuf,
    /// Per-replica timeout.
    #[arg(long, default_value_t = 2_000)]
    timeout_ms: u64,
}

pub fn run(a: StatusArgs) -> anyhow::Result<ExitCode> {
    crate::logging::init("warn");
    let cluster = ClusterConfig::load(&a.config)?;
    let timeout = Duration::from_millis(a.timeout_ms);
    let results = crate::runtime()?.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for r in &cluster.replicas {
            let (c, id) = (cluster.clone(), r.id);
            set.spawn(async move { (id, query_status(&c, id, timeout).await) });
        }
        let mut out = Vec::new();
        while let Some(Ok(r)) = set.join_next().await {
            out.push(r);
        }
        out.sort_by_key(|(id, _)| *id);
        out
    });
    println!(
        "{:<8} {:<22} {:<10} {:>6} {:>8} {:>14} {:>12} {:>6} {:>8} {:<11} {:<16} {:<16}",
        "replica",
        "address",
        "reachable",
        "view",
        "primary",
        "last_executed",
        "last_stable",
        "peers",
        "clients",
        "durability",
        "state_digest",
        "stable_digest"
    );
    let mut reachable = 0;
    for (id, r) in &results {
        let addr = &cluster.replicas[*id as usize].address;
        match r {
            Ok(s) => {
                reachable += 1;
                let view = if s.has_new_view {
                    s.view.to_string()
                } else {
                    format!("{}*", s.view)
                };
                println!(
                    "{:<8} {:<22} {:<10} {:>6} {:>8} {:>14} {:>12} {:>6} {:>8} {:<11} {:<16} {:<16}",
                    id,
                    addr,
                    "yes",
                    view,
                    s.primary,
                    s.last_executed,
                    s.last_stable,
                    format!("{}/{}", s.peers_connected, cluster.n() - 1),
                    s.clients_connected,
                    s.durability,
                    short(&s.state_digest),
                    short(&s.stable_digest)
                );
            }
            Err(e) => println!("{id:<8} {addr:<22} no ({e})"),
        }
    }
    if results
        .iter()
        .any(|(_, r)| r.as_ref().is_ok_and(|s| !s.has_new_view))
    {
        println!("* view change in progress");
    }
    println!("state_digest: live state (service and reply cache) at the last status tick; stable_digest: last stable checkpoint (first 16 hex digits)");
    let quorum = cluster.bft.quorum();
    println!(
        "{reachable} of {} replicas reachable; the cluster needs {quorum} to make progress",
        cluster.n()
    );
    Ok(if reachable >= quorum {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The first 16 hex digits of a digest (enough to compare replicas by eye).
fn short(hex: &str) -> &str {
    hex.get(..16).unwrap_or(hex)
}
