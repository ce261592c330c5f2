//! `byzfs bench bandwidth`: bytes on the wire per file-system update (Pangaea's Table 3,
//! issue #30 item 2), for ByzFS and NO-REP mounted across sites.
//!
//! Each operation runs on a mount whose every node has a link of its own
//! ([`super::Sites`]), so the bytes are the kernel's counts of the frames each link carried
//! (headers included, as on a wire). The client's link carries all client↔replica traffic;
//! every replica↔replica byte crosses two replica links (out of one, into the other), so
//! `replica↔replica = (Σ replica links − client link) / 2`. Between sites counts what
//! crossed the sites' access links (once per transmission): with the client at site 0 beside
//! replica 0, what the client sends replica 0 stays in the site. Before each operation the
//! links' idle traffic (STATUS messages, the mount's keep-alives) is measured for a second
//! and subtracted at that rate.
//!
//! The operations: `create` (a new empty file, then `fsync` of its directory, so the
//! creation has reached the replicas even with a directory delegation), and `write N`
//! (N bytes at offset 0 of an existing empty file, then `fsync`).

use super::{Node, Profile, Sites};
use crate::fs::target::{mount_cluster, ClusterMountOptions, Mounted};
use crate::fs::Durability;
use anyhow::Context as _;
use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The operations of Pangaea's Table 3 (its KB and MB are binary: pang-1 carried 26.22M
/// bytes for a 25 MB write).
const OPS: [(&str, u64); 4] = [
    ("create", 0),
    ("write 1B", 1),
    ("write 50KB", 50 << 10),
    ("write 25MB", 25 << 20),
];

/// How long the links' idle traffic is measured, and how long after an operation returns
/// its messages may still be on the way (commits after a tentative reply).
const IDLE: Duration = Duration::from_secs(1);
const SETTLE: Duration = Duration::from_millis(700);

/// `byzfs bench bandwidth`.
#[derive(clap::Args, Debug)]
pub struct BandwidthArgs {
    /// Systems: byzfs, byzfs-all (big bodies sent by the client to every replica, as
    /// before issue #30: `relay_big_requests = false`), norep.
    #[arg(long, value_delimiter = ',', default_value = "byzfs,byzfs-all,norep")]
    pub targets: Vec<String>,
    /// The site profile (bytes do not depend on delay; `lan` is quickest).
    #[arg(long, default_value = "lan", value_parser = Profile::parse)]
    pub sites: Profile,
    /// Runs of each operation; the table shows the median.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Where servers keep their state.
    #[arg(long, value_enum, default_value_t = Durability::Memory)]
    pub durability: Durability,
    /// Directory for the clusters and mount points (default: the system temporary
    /// directory).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Write the rows as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw the table as a bar chart (SVG) here.
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

/// One measured operation (the median run by total bytes).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub target: String,
    pub op: String,
    pub profile: String,
    /// Bytes the operation asked to write.
    pub payload: u64,
    /// All links: client↔replicas plus replica↔replica.
    pub total_bytes: u64,
    pub client_bytes: u64,
    /// Of `client_bytes`, what the client sent (its uplink).
    pub client_sent_bytes: u64,
    pub replica_bytes: u64,
    /// What crossed from one site to another (each transmission once).
    pub between_sites_bytes: u64,
    /// What the busiest site sent to the others (the primary's, unless the relay's fan-out
    /// spreads it: docs/PROTOCOL.md §1.10).
    pub busiest_uplink_bytes: u64,
    /// `total_bytes / payload` (`None` for `create`).
    pub total_over_payload: Option<f64>,
    /// `client_sent_bytes / payload`.
    pub uplink_over_payload: Option<f64>,
    /// `between_sites_bytes / payload`.
    pub between_sites_over_payload: Option<f64>,
    /// `busiest_uplink_bytes / payload`.
    pub busiest_uplink_over_payload: Option<f64>,
    pub runs: usize,
}

/// Every node's link counters, `(received, sent)` by node, then each site's uplink as
/// `(0, bytes)`, then the bytes between sites as `(0, bytes)`.
fn counters(sites: &Sites, nodes: &[Node]) -> anyhow::Result<Vec<(u64, u64)>> {
    let mut v: Vec<(u64, u64)> = nodes
        .iter()
        .map(|&n| sites.link_bytes(n))
        .collect::<anyhow::Result<_>>()?;
    v.extend(sites.site_uplink_bytes()?.into_iter().map(|b| (0, b)));
    v.push((0, sites.between_sites_bytes()?));
    Ok(v)
}

fn delta(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(f64, f64)> {
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            (
                y.0.saturating_sub(x.0) as f64,
                y.1.saturating_sub(x.1) as f64,
            )
        })
        .collect()
}

/// One operation on `dir`, file `name`.
fn run_op(dir: &Path, name: &str, size: u64) -> anyhow::Result<()> {
    let path = dir.join(name);
    if size == 0 {
        File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
        File::open(dir)?.sync_all()?;
        return Ok(());
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let chunk = vec![0x5au8; 1 << 20];
    let mut left = size as usize;
    while left > 0 {
        let n = left.min(chunk.len());
        f.write_all(&chunk[..n])?;
        left -= n;
    }
    f.sync_all()?;
    Ok(())
}

/// Measures every operation `runs` times on one mounted target.
fn measure(target: &str, m: &Mounted, profile: &Profile, runs: usize) -> anyhow::Result<Vec<Row>> {
    let sites = m.sites().context("the target runs without sites")?;
    let replicated = target != "norep";
    let servers: Vec<Node> = if replicated {
        (0..super::profile::REPLICAS).map(Node::Replica).collect()
    } else {
        vec![Node::Server]
    };
    let nodes: Vec<Node> = std::iter::once(Node::Client).chain(servers).collect();
    let mut rows = Vec::new();
    for (op, size) in OPS {
        let mut got: Vec<(f64, f64, f64, f64, f64, f64)> = Vec::new();
        for run in 0..runs {
            let name = format!("{}-{run}", op.replace(' ', "-"));
            if size > 0 {
                run_op(&m.dir, &name, 0)?;
            }
            std::thread::sleep(SETTLE);
            let i0 = counters(&sites, &nodes)?;
            std::thread::sleep(IDLE);
            let i1 = counters(&sites, &nodes)?;
            let idle = delta(&i0, &i1);
            let t = Instant::now();
            run_op(&m.dir, &name, size)?;
            std::thread::sleep(SETTLE);
            let i2 = counters(&sites, &nodes)?;
            let scale = t.elapsed().as_secs_f64() / IDLE.as_secs_f64();
            let d: Vec<(f64, f64)> = delta(&i1, &i2)
                .iter()
                .zip(&idle)
                .map(|(x, z)| ((x.0 - z.0 * scale).max(0.0), (x.1 - z.1 * scale).max(0.0)))
                .collect();
            let (between, d) = d.split_last().context("no counters")?;
            let (d, uplinks) = d.split_at(nodes.len());
            let busiest = uplinks.iter().map(|u| u.1).fold(0.0, f64::max);
            let client = d[0].0 + d[0].1;
            let client_sent = d[0].1;
            let servers_sum: f64 = d[1..].iter().map(|x| x.0 + x.1).sum();
            let replica = ((servers_sum - client) / 2.0).max(0.0);
            got.push((
                client + replica,
                client,
                client_sent,
                replica,
                between.1,
                busiest,
            ));
        }
        got.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (total, client, client_sent, replica, between, busiest) = got[got.len() / 2];
        let ratio = |b: f64| (size > 0).then(|| b / size as f64);
        rows.push(Row {
            target: target.into(),
            op: op.into(),
            profile: profile.name.clone(),
            payload: size,
            total_bytes: total as u64,
            client_bytes: client as u64,
            client_sent_bytes: client_sent as u64,
            replica_bytes: replica as u64,
            between_sites_bytes: between as u64,
            busiest_uplink_bytes: busiest as u64,
            total_over_payload: ratio(total),
            uplink_over_payload: ratio(client_sent),
            between_sites_over_payload: ratio(between),
            busiest_uplink_over_payload: ratio(busiest),
            runs,
        });
    }
    Ok(rows)
}

/// Bytes as Pangaea prints them (248, 1.29K, 52.04K, 26.22M).
fn human(b: u64) -> String {
    match b {
        0..=999 => b.to_string(),
        1_000..=999_999 => format!("{:.2}K", b as f64 / 1e3),
        _ => format!("{:.2}M", b as f64 / 1e6),
    }
}

pub fn run(a: BandwidthArgs) -> anyhow::Result<std::process::ExitCode> {
    let work = match &a.work_dir {
        Some(d) => tempfile::Builder::new()
            .prefix("bandwidth-")
            .tempdir_in(d)?,
        None => tempfile::Builder::new()
            .prefix("byzfs-bandwidth-")
            .tempdir()?,
    };
    let mut rows = Vec::new();
    for target in &a.targets {
        let (replicated, relay) = match target.as_str() {
            "byzfs" => (true, true),
            "byzfs-all" => (true, false),
            "norep" => (false, true),
            t => anyhow::bail!("unknown target {t:?}; use byzfs, byzfs-all or norep"),
        };
        let dir = work.path().join(target);
        std::fs::create_dir_all(&dir)?;
        let m = mount_cluster(&ClusterMountOptions {
            replicated,
            encrypted: false,
            ro_lookups: true,
            durability: a.durability,
            tcp_only: true,
            dir_delegations: true,
            dir: dir.clone(),
            sites: Some(a.sites.clone()),
            protocol: byzfs_net::cluster::ProtocolParams {
                relay_big_requests: relay,
                ..Default::default()
            },
            clock_lag_tolerance_ms: None,
            cache_timeout: None,
            threads: None,
        })?;
        rows.extend(measure(target, &m, &a.sites, a.runs.max(1))?);
    }
    print_table(&rows);
    if let Some(p) = &a.json {
        crate::loopback::json::write(p, "bandwidth", &rows)?;
    }
    if let Some(p) = &a.svg {
        draw(p, &rows, &a.sites)?;
    }
    Ok(std::process::ExitCode::SUCCESS)
}

fn print_table(rows: &[Row]) {
    println!(
        "{:<9} {:<11} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>8} {:>9} {:>10}",
        "target",
        "op",
        "total",
        "client",
        "(sent)",
        "replicas",
        "sites",
        "total/B",
        "sent/B",
        "sites/B",
        "busiest/B"
    );
    for r in rows {
        let f = |x: Option<f64>| x.map(|v| format!("{v:.3}")).unwrap_or_else(|| "-".into());
        println!(
            "{:<9} {:<11} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>8} {:>9} {:>10}",
            r.target,
            r.op,
            human(r.total_bytes),
            human(r.client_bytes),
            human(r.client_sent_bytes),
            human(r.replica_bytes),
            human(r.between_sites_bytes),
            f(r.total_over_payload),
            f(r.uplink_over_payload),
            f(r.between_sites_over_payload),
            f(r.busiest_uplink_over_payload)
        );
    }
}

fn draw(path: &Path, rows: &[Row], p: &Profile) -> anyhow::Result<()> {
    let targets: Vec<String> = {
        let mut t: Vec<String> = rows.iter().map(|r| r.target.clone()).collect();
        t.dedup();
        t
    };
    let series: Vec<String> = targets
        .iter()
        .flat_map(|t| [format!("{t} total"), format!("{t} client sent")])
        .collect();
    let groups: Vec<crate::plot::Group> = OPS
        .iter()
        .map(|(op, _)| crate::plot::Group {
            label: (*op).to_string(),
            bars: targets
                .iter()
                .flat_map(|t| {
                    let r = rows.iter().find(|r| &r.target == t && r.op == *op);
                    [
                        r.map(|r| (r.total_bytes as f64, human(r.total_bytes))),
                        r.map(|r| (r.client_sent_bytes as f64, human(r.client_sent_bytes))),
                    ]
                })
                .collect(),
        })
        .collect();
    crate::plot::bars(
        path,
        "Bytes on the wire per update (Pangaea Table 3)",
        &format!(
            "sites {}, all links; each group scaled to its largest bar",
            p.name
        ),
        &series,
        &groups,
    )
}
