//! Sites on one machine (issue #30): each replica, the client and the unreplicated server in
//! a network namespace of its own, the sites joined by shaped links with a wide-area delay.
//!
//! Topology (addresses `10.P.…`, `P` one free prefix per running harness, held by a lock
//! file, so harnesses may run side by side):
//!
//! ```text
//!  node ns ──veth── site router ns ──veth (tbf both ways)── hub ns ──┐
//!  10.P.S.H         10.P.S.1           access link of site S         │ delay stage (TUN)
//!                                                                    └ control link ── root ns
//! ```
//!
//! * Nodes at one site meet through their site's router, unshaped and without delay.
//! * Each site's access link is a veth pair between its router and the hub, with a `tbf`
//!   qdisc on both ends: the profile's rate in each direction.
//! * The hub sends every packet from a site through the delay stage ([`delay`]), which holds
//!   it for the profile's one-way delay between the two sites.
//! * The harness's own process (status queries, the mount's control) reaches every node
//!   through a control link into the hub that skips the delay stage.
//!
//! The namespaces cannot be left behind ([`netns`]): they die with the harness.

pub mod bandwidth;
pub mod check;
pub mod delay;
pub mod netns;
pub mod profile;

use anyhow::{bail, Context as _};
use delay::DelayStage;
use netns::Netns;
pub use profile::{Node, Profile};
use std::collections::BTreeMap;
use std::fs::File;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd as _;
use std::process::Command;

/// The prefixes harnesses may take (`10.P.0.0/16`).
const PREFIXES: std::ops::RangeInclusive<u8> = 64..=95;
/// Where the prefix locks live.
const LOCK_DIR: &str = "/run/byzfs-sites";
/// The routing table the hub uses for packets from the sites.
const WAN_TABLE: &str = "100";
/// Ethernet frame bytes of a full-size packet (what `tbf` counts).
const FRAME: u64 = 1514;

/// A running set of sites; dropping it stops the delay stage and frees every namespace.
pub struct Sites {
    pub profile: Profile,
    // Dropped first: its threads hold the hub's TUN device.
    stage: Option<DelayStage>,
    nodes: BTreeMap<Node, Netns>,
    routers: Vec<Netns>,
    hub: Netns,
    prefix: u8,
    root_link: String,
    _lock: File,
}

impl Sites {
    /// Builds the sites of `profile`: namespaces, links, shaping, routes, the delay stage.
    pub fn start(profile: &Profile) -> anyhow::Result<Sites> {
        // SAFETY: a plain query.
        if unsafe { libc::geteuid() } != 0 {
            bail!(
                "the site harness (--sites {}) creates network namespaces and links, which \
                 needs root; run it as root, or leave out --sites",
                profile.name
            );
        }
        let (prefix, lock) = take_prefix()?;
        let root_link = format!("bz{prefix}ctl");
        // A link left by an earlier harness that held this prefix (it dies with its hub,
        // but the kernel frees namespaces lazily).
        let _ = Command::new("ip")
            .args(["link", "del", &root_link])
            .stderr(std::process::Stdio::null())
            .status();
        let hub = Netns::new("the hub")?;
        let mut routers = Vec::new();
        for s in 0..profile.sites() {
            routers.push(Netns::new(&format!("site {s}"))?);
        }
        let mut nodes = BTreeMap::new();
        for n in profile.nodes() {
            nodes.insert(n, Netns::new(&n.name())?);
        }
        let mut sites = Sites {
            profile: profile.clone(),
            stage: None,
            nodes,
            routers,
            hub,
            prefix,
            root_link,
            _lock: lock,
        };
        sites
            .wire()
            .with_context(|| format!("cannot build the sites of profile {}", sites.profile.name))?;
        Ok(sites)
    }

    /// `10.P.a.b`.
    fn ip(&self, a: u8, b: u8) -> String {
        format!("10.{}.{a}.{b}", self.prefix)
    }

    fn wire(&mut self) -> anyhow::Result<()> {
        let hub = &self.hub;
        for key in [
            "net.ipv4.conf.all.rp_filter",
            "net.ipv4.conf.default.rp_filter",
        ] {
            hub.sysctl(key, "0")?;
        }
        hub.sysctl("net.ipv4.ip_forward", "1")?;
        for (s, r) in self.routers.iter().enumerate() {
            let s8 = u8::try_from(s).context("too many sites")?;
            let (hub_addr, site_addr) = (self.ip(250, s8), self.ip(251, s8));
            let hub_dev = format!("s{s}");
            hub.ip(&[
                "link",
                "add",
                &hub_dev,
                "type",
                "veth",
                "peer",
                "name",
                "wan",
                "netns",
                &r.pid().to_string(),
            ])?;
            hub.ip(&["addr", "add", &format!("{hub_addr}/32"), "dev", &hub_dev])?;
            hub.ip(&["link", "set", &hub_dev, "up"])?;
            hub.ip(&["route", "add", &format!("{site_addr}/32"), "dev", &hub_dev])?;
            hub.ip(&[
                "route",
                "add",
                &format!("{}/24", self.ip(s8, 0)),
                "via",
                &site_addr,
                "dev",
                &hub_dev,
                "onlink",
            ])?;
            r.sysctl("net.ipv4.ip_forward", "1")?;
            r.ip(&["addr", "add", &format!("{site_addr}/32"), "dev", "wan"])?;
            r.ip(&["link", "set", "wan", "up"])?;
            r.ip(&["route", "add", &format!("{hub_addr}/32"), "dev", "wan"])?;
            r.ip(&[
                "route", "add", "default", "via", &hub_addr, "dev", "wan", "onlink",
            ])?;
            if let Some(w) = self.profile.wan {
                for (ns, dev) in [(r, "wan"), (hub, hub_dev.as_str())] {
                    shape(ns, dev, w.rate_bps)?;
                }
            }
        }
        for (&node, ns) in &self.nodes {
            let s = self.profile.site_of(node);
            let r = &self.routers[s];
            let s8 = s as u8;
            let host = host_of(node);
            let (addr, gw) = (self.ip(s8, host), self.ip(s8, 1));
            let dev = format!("n{host}");
            r.ip(&[
                "link",
                "add",
                &dev,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                &ns.pid().to_string(),
            ])?;
            r.ip(&["addr", "add", &format!("{gw}/32"), "dev", &dev])?;
            r.ip(&["link", "set", &dev, "up"])?;
            r.ip(&["route", "add", &format!("{addr}/32"), "dev", &dev])?;
            ns.ip(&["addr", "add", &format!("{addr}/32"), "dev", "eth0"])?;
            ns.ip(&["link", "set", "eth0", "up"])?;
            ns.ip(&["route", "add", &format!("{gw}/32"), "dev", "eth0"])?;
            ns.ip(&[
                "route", "add", "default", "via", &gw, "dev", "eth0", "onlink",
            ])?;
        }
        // The control link: root namespace ↔ hub, past the delay stage.
        let (root_addr, hub_ctl) = (self.ip(255, 1), self.ip(255, 2));
        run_root(&[
            "link",
            "add",
            &self.root_link,
            "type",
            "veth",
            "peer",
            "name",
            "ctl",
            "netns",
            &hub.pid().to_string(),
        ])?;
        run_root(&[
            "addr",
            "add",
            &format!("{root_addr}/32"),
            "dev",
            &self.root_link,
        ])?;
        run_root(&["link", "set", &self.root_link, "up"])?;
        run_root(&[
            "route",
            "add",
            &format!("{hub_ctl}/32"),
            "dev",
            &self.root_link,
        ])?;
        run_root(&[
            "route",
            "add",
            &format!("10.{}.0.0/16", self.prefix),
            "via",
            &hub_ctl,
            "dev",
            &self.root_link,
            "onlink",
        ])?;
        hub.ip(&["addr", "add", &format!("{hub_ctl}/32"), "dev", "ctl"])?;
        hub.ip(&["link", "set", "ctl", "up"])?;
        hub.ip(&["route", "add", &format!("{root_addr}/32"), "dev", "ctl"])?;
        // Packets from the sites go through the delay stage; what it writes back (and what
        // comes from the control link) takes the main table to its site.
        if self.profile.wan.is_some() {
            self.stage = Some(DelayStage::start(hub, &self.profile)?);
            hub.sysctl(&format!("net.ipv4.conf.{}.rp_filter", delay::DEVICE), "0")?;
            hub.ip(&["link", "set", delay::DEVICE, "up"])?;
            hub.ip(&[
                "route",
                "add",
                "default",
                "dev",
                delay::DEVICE,
                "table",
                WAN_TABLE,
            ])?;
            hub.ip(&[
                "route",
                "add",
                &format!("{root_addr}/32"),
                "dev",
                "ctl",
                "table",
                WAN_TABLE,
            ])?;
            for s in 0..self.routers.len() {
                hub.ip(&[
                    "rule",
                    "add",
                    "iif",
                    &format!("s{s}"),
                    "lookup",
                    WAN_TABLE,
                    "pref",
                    "100",
                ])?;
            }
        }
        Ok(())
    }

    /// The address `node` has (and listens on) in its namespace.
    pub fn addr(&self, node: Node) -> Ipv4Addr {
        let s = self.profile.site_of(node) as u8;
        Ipv4Addr::new(10, self.prefix, s, host_of(node))
    }

    fn ns(&self, node: Node) -> anyhow::Result<&Netns> {
        self.nodes
            .get(&node)
            .with_context(|| format!("{} has no namespace in this profile", node.name()))
    }

    /// Makes `cmd` start in `node`'s namespace (its network only: its mounts are the
    /// harness's).
    pub fn enter(&self, node: Node, cmd: &mut Command) -> anyhow::Result<()> {
        self.ns(node)?.enter(cmd);
        Ok(())
    }

    /// Runs `f` on a thread inside `node`'s namespace.
    pub fn in_node<T: Send + 'static>(
        &self,
        node: Node,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> anyhow::Result<T> {
        self.ns(node)?.in_ns(f)
    }

    /// `(received, sent)` bytes on `node`'s link (frames, headers included), read from its
    /// namespace's `/proc/thread-self/net/dev`.
    pub fn link_bytes(&self, node: Node) -> anyhow::Result<(u64, u64)> {
        self.ns(node)?.in_ns(|| device_bytes("eth0"))?
    }

    /// What each site sent to the others, by site: what the hub received on its access
    /// link (the link whose rate the profile shapes).
    pub fn site_uplink_bytes(&self) -> anyhow::Result<Vec<u64>> {
        let n = self.routers.len();
        self.hub.in_ns(move || -> anyhow::Result<Vec<u64>> {
            (0..n)
                .map(|s| Ok(device_bytes(&format!("s{s}"))?.0))
                .collect()
        })?
    }

    /// Bytes that crossed between sites: the sum over the sites' access links of what the
    /// hub delivered into each (every transmission between two sites once).
    pub fn between_sites_bytes(&self) -> anyhow::Result<u64> {
        let n = self.routers.len();
        self.hub.in_ns(move || -> anyhow::Result<u64> {
            let mut sum = 0;
            for s in 0..n {
                sum += device_bytes(&format!("s{s}"))?.1;
            }
            Ok(sum)
        })?
    }
}

impl std::fmt::Debug for Sites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sites")
            .field("profile", &self.profile.name)
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl Drop for Sites {
    fn drop(&mut self) {
        self.stage = None;
        // The namespaces go with their holders (fields); the control link with the hub.
        let _ = Command::new("ip")
            .args(["link", "del", &self.root_link])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// The host byte of `node`'s address at its site.
fn host_of(node: Node) -> u8 {
    match node {
        Node::Replica(i) => 10 + i as u8,
        Node::Client => 100,
        Node::Server => 101,
    }
}

/// `tbf` on `dev`: `rate` bits per second; a burst of 5 ms at that rate (at least two
/// frames) and a queue of 100 ms more (at least 32 KiB) before drops.
fn shape(ns: &Netns, dev: &str, rate_bps: u64) -> anyhow::Result<()> {
    let bytes_per_s = rate_bps / 8;
    let burst = (bytes_per_s / 200).max(2 * FRAME);
    let limit = (bytes_per_s / 10 + burst).max(32 << 10);
    ns.tc(&[
        "qdisc",
        "add",
        "dev",
        dev,
        "root",
        "tbf",
        "rate",
        &format!("{rate_bps}bit"),
        "burst",
        &burst.to_string(),
        "limit",
        &limit.to_string(),
    ])
}

/// `ip ARGS` in the harness's own namespace.
fn run_root(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("cannot run ip (the site harness needs iproute2)")?;
    if !out.status.success() {
        bail!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Takes the first free prefix: an exclusive lock on `LOCK_DIR/P.lock`, held while the
/// returned file is open (the kernel drops it when the process ends, however it ends).
fn take_prefix() -> anyhow::Result<(u8, File)> {
    std::fs::create_dir_all(LOCK_DIR).with_context(|| format!("cannot create {LOCK_DIR}"))?;
    for p in PREFIXES {
        let path = format!("{LOCK_DIR}/{p}.lock");
        let f = File::create(&path).with_context(|| format!("cannot create {path}"))?;
        // SAFETY: flock on an open descriptor.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok((p, f));
        }
    }
    bail!(
        "every site prefix (10.{}–{}.0.0/16) is taken by a running harness",
        PREFIXES.start(),
        PREFIXES.end()
    )
}

/// `(received, sent)` bytes of `dev` in the calling thread's namespace.
fn device_bytes(dev: &str) -> anyhow::Result<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/net/dev")
        .context("cannot read /proc/thread-self/net/dev")?;
    for line in text.lines() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        if name.trim() == dev {
            let f: Vec<u64> = rest
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            if let (Some(&rx), Some(&tx)) = (f.first(), f.get(8)) {
                return Ok((rx, tx));
            }
        }
    }
    bail!("no device {dev} in /proc/thread-self/net/dev")
}
