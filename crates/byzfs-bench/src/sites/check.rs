//! `byzfs bench sites`: checks that the harness shapes what its profile says, by measuring
//! each site's access link — the round-trip time (TCP, one byte each way, median of 20) and
//! the rate (one TCP stream out of the site for a few seconds, counted by the receiver).
//!
//! The measured rate is TCP payload: `tbf` counts whole frames, so a full link carries
//! 1448 payload bytes per 1514-byte frame (95.6 % of the configured rate).

use super::{Node, Profile, Sites};
use anyhow::Context as _;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// What one site's link measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LinkCheck {
    pub site: usize,
    /// The node measured from and the one it talked to (at another site).
    pub from: String,
    pub to: String,
    pub rtt_configured_ms: f64,
    pub rtt_measured_ms: f64,
    /// `None` for an unshaped link (`lan`).
    pub rate_configured_mbps: Option<f64>,
    pub rate_measured_mbps: f64,
}

/// A node at `site`, and one at another site to talk to.
fn pair(p: &Profile, site: usize) -> (Node, Node) {
    let here = p
        .nodes()
        .into_iter()
        .find(|&n| p.site_of(n) == site)
        .unwrap_or(Node::Client);
    let other = Node::Replica(((site + 1) % super::profile::REPLICAS as usize) as u32);
    (here, other)
}

/// Measures every site's link, one at a time (`seconds` of streaming each).
pub fn check(sites: &Sites, seconds: f64) -> anyhow::Result<Vec<LinkCheck>> {
    let p = &sites.profile;
    let mut out = Vec::new();
    for site in 0..p.sites() {
        let (from, to) = pair(p, site);
        let dst = SocketAddr::from((sites.addr(to), 0));
        let listener = sites
            .in_node(to, move || TcpListener::bind(dst))?
            .with_context(|| format!("cannot listen at {}", to.name()))?;
        let addr = listener.local_addr()?;
        let server = std::thread::spawn(move || serve(listener));
        let rtt = sites.in_node(from, move || client(addr, seconds))??;
        let (bytes, elapsed) = server
            .join()
            .map_err(|_| anyhow::anyhow!("the measuring server panicked"))??;
        let rtt_configured = 2.0 * p.delay(site, p.site_of(to)).as_secs_f64() * 1e3;
        out.push(LinkCheck {
            site,
            from: from.name(),
            to: to.name(),
            rtt_configured_ms: rtt_configured,
            rtt_measured_ms: rtt.as_secs_f64() * 1e3,
            rate_configured_mbps: p.wan.map(|w| w.rate_bps as f64 / 1e6),
            rate_measured_mbps: bytes as f64 * 8.0 / elapsed.as_secs_f64() / 1e6,
        });
    }
    Ok(out)
}

/// Echoes 20 single bytes, then counts a stream until EOF: `(bytes, first byte → EOF)`.
fn serve(l: TcpListener) -> anyhow::Result<(u64, Duration)> {
    let (mut s, _) = l.accept().context("accept")?;
    s.set_nodelay(true)?;
    let mut b = [0u8; 1];
    for _ in 0..20 {
        s.read_exact(&mut b)?;
        s.write_all(&b)?;
    }
    let mut buf = vec![0u8; 1 << 16];
    let n = s.read(&mut buf)?;
    let start = Instant::now();
    let mut total = n as u64;
    loop {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    Ok((total, start.elapsed()))
}

/// The median of 20 one-byte round trips, then `seconds` of streaming.
fn client(addr: SocketAddr, seconds: f64) -> anyhow::Result<Duration> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
        .with_context(|| format!("cannot connect to {addr}"))?;
    s.set_nodelay(true)?;
    let mut rtts = Vec::new();
    let mut b = [7u8; 1];
    for _ in 0..20 {
        let t = Instant::now();
        s.write_all(&b)?;
        s.read_exact(&mut b)?;
        rtts.push(t.elapsed());
    }
    rtts.sort();
    let buf = vec![0x5au8; 1 << 16];
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    while Instant::now() < end {
        s.write_all(&buf)?;
    }
    s.shutdown(std::net::Shutdown::Write)?;
    // Wait for the receiver to see EOF (it closes after counting).
    let _ = s.read(&mut b);
    Ok(rtts[rtts.len() / 2])
}

/// `byzfs bench sites`.
#[derive(clap::Args, Debug)]
pub struct SitesArgs {
    /// Site profiles to check, comma-separated: lan, wan, slow-5, slow-1, each also with
    /// -apart (the client at a fifth site).
    #[arg(long, default_value = "wan,slow-5,slow-1", value_delimiter = ',')]
    pub sites: Vec<String>,
    /// Seconds of streaming per link.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Write the rows as JSON here (one row per profile and site).
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

/// One JSON row.
#[derive(serde::Serialize)]
struct Row<'a> {
    profile: &'a str,
    #[serde(flatten)]
    link: &'a LinkCheck,
}

pub fn run(a: SitesArgs) -> anyhow::Result<std::process::ExitCode> {
    let profiles = a
        .sites
        .iter()
        .map(|s| Profile::parse(s))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut all = Vec::new();
    println!(
        "{:<14} {:>4}  {:<10} {:<10} {:>9} {:>9}  {:>9} {:>9} {:>6}",
        "profile", "site", "from", "to", "rtt set", "rtt got", "rate set", "rate got", "got"
    );
    for p in &profiles {
        let sites = Sites::start(p)?;
        for l in check(&sites, a.seconds)? {
            let ratio = l
                .rate_configured_mbps
                .map(|c| format!("{:.0} %", 100.0 * l.rate_measured_mbps / c))
                .unwrap_or_else(|| "-".into());
            println!(
                "{:<14} {:>4}  {:<10} {:<10} {:>6.1} ms {:>6.1} ms  {:>9} {:>4.1} Mb/s {:>6}",
                p.name,
                l.site,
                l.from,
                l.to,
                l.rtt_configured_ms,
                l.rtt_measured_ms,
                l.rate_configured_mbps
                    .map(|r| format!("{r:.0} Mb/s"))
                    .unwrap_or_else(|| "none".into()),
                l.rate_measured_mbps,
                ratio
            );
            all.push((p.name.clone(), l));
        }
    }
    if let Some(path) = &a.json {
        let rows: Vec<Row> = all
            .iter()
            .map(|(p, l)| Row {
                profile: p,
                link: l,
            })
            .collect();
        crate::loopback::json::write(path, "sites", &rows)?;
    }
    Ok(std::process::ExitCode::SUCCESS)
}
