//! Benchmark targets: where a workload runs, started fresh and stopped on drop.
//!
//! - `local`: a directory on local disk (under `--work-dir`).
//! - `passthrough`: `bindfs BACKING MNT`, a plain FUSE passthrough of a local directory: the
//!   cost of going through FUSE at all, with no replication and no network.
//! - `norep`, `byzfs`: servers started by the benchmarks' one launcher (`crate::procs`) and
//!   mounted through FUSE by `byzfs mount` ([`mount_cluster`]).
//! - `byzfs-encrypted`: ByzFS mounted encrypted (`byzfs mount --identity`, issue #28): a
//!   fresh identity and group `default`, every name and byte sealed in the mount.
//!
//! Every target is a [`Mounted`]: a directory plus a guard that unmounts and stops what was
//! started, and removes the backing store, when dropped, so every error path cleans up.

use anyhow::{bail, Context as _};
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{CommonArgs, OnOff};
use crate::procs::{Launch, Servers, Service, System};
use byzfs_net::cluster::ProtocolParams;

/// How long a FUSE mount gets to appear.
const MOUNT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a stopped `byzfs mount` gets to exit (and unmount) after SIGTERM before it is
/// killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// A kind of target.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    /// ByzFS: the replicated file service mounted through FUSE.
    Byzfs,
    /// ByzFS mounted encrypted (a group's tree, sealed in the mount).
    ByzfsEncrypted,
    /// NO-REP: the same file service and FUSE client, one unreplicated server.
    Norep,
    /// Local disk.
    Local,
    /// bindfs over local disk: the FUSE cost floor.
    Passthrough,
}

/// Where ByzFS and NO-REP servers keep their state.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// On disk, synced before replying (the seed's BFS with NFS semantics).
    Disk,
    /// In memory only (the seed's BFS-nr writes nothing to disk before replying).
    Memory,
}

/// One target to measure: a kind and its options.
#[derive(Debug, Clone)]
pub struct TargetSpec {
    pub kind: TargetKind,
    /// ByzFS only: lookups use the read-only optimisation.
    pub ro_lookups: bool,
    pub durability: Durability,
    /// ByzFS and NO-REP: TCP only, no Unix sockets.
    pub tcp_only: bool,
    /// ByzFS and NO-REP: the mount holds directory delegations.
    pub dir_delegations: bool,
    /// ByzFS and NO-REP: across these sites (`None`: on loopback).
    pub sites: Option<crate::sites::Profile>,
    /// ByzFS and NO-REP: the cluster file's `[protocol]` (`--protocol`).
    pub protocol: ProtocolParams,
    /// ByzFS and NO-REP: the cluster file's `[fs] clock_lag_tolerance_ms` (`None`: default).
    pub clock_lag_tolerance_ms: Option<u64>,
    /// FUSE targets: how long the kernel (and ByzFS's mount) may cache attributes and
    /// names, in seconds (`byzfs mount --cache-timeout`, bindfs's `attr_timeout`,
    /// `entry_timeout` and `negative_timeout`); `None`: each one's default.
    pub cache_timeout: Option<f64>,
    /// ByzFS and NO-REP: `byzfs mount --threads` (`None`: its default).
    pub mount_threads: Option<u16>,
}

impl TargetSpec {
    /// The name used in tables, JSON rows and ratios: `byzfs`, `byzfs-ro`, `norep`, `local`,
    /// `passthrough`.
    pub fn label(&self) -> String {
        let base = match self.kind {
            TargetKind::Byzfs if self.ro_lookups => "byzfs-ro",
            TargetKind::Byzfs => "byzfs",
            TargetKind::ByzfsEncrypted => "byzfs-encrypted",
            TargetKind::Norep => "norep",
            TargetKind::Local => "local",
            TargetKind::Passthrough => "passthrough",
        };
        let cluster = matches!(
            self.kind,
            TargetKind::Byzfs | TargetKind::ByzfsEncrypted | TargetKind::Norep
        );
        if cluster && !self.dir_delegations {
            format!("{base}-nodeleg")
        } else {
            base.into()
        }
    }

    /// The specs `--targets` and `--ro-lookups` ask for, in the order given.
    pub fn from_args(args: &CommonArgs) -> Vec<TargetSpec> {
        let mut out = Vec::new();
        let mut protocol = ProtocolParams::default();
        for kv in &args.protocol {
            // Checked by the argument's parser already.
            let _ = protocol.set(kv);
        }
        // The cluster file states the links' rate, as an operator's across sites would
        // (docs/DEPLOY.md), unless `--protocol` does.
        let kbps = args
            .sites
            .as_ref()
            .and_then(|p| p.wan.as_ref())
            .map(|w| w.rate_bps / 1000);
        let given = args
            .protocol
            .iter()
            .any(|kv| kv.trim_start().starts_with("link_rate_kbps"));
        if let Some(kbps) = kbps.filter(|_| !given) {
            protocol.link_rate_kbps = kbps;
            println!("cluster files' [protocol]: link_rate_kbps={kbps} (the sites' links)");
        }
        if !args.protocol.is_empty() {
            println!("cluster files' [protocol]: {}", args.protocol.join(", "));
        }
        for &kind in &args.targets {
            let ros: Vec<bool> = match kind {
                TargetKind::Byzfs => args.ro_lookups.iter().map(|&o| o == OnOff::On).collect(),
                // As a user mounts it: read-only lookups.
                TargetKind::ByzfsEncrypted => vec![true],
                _ => vec![false],
            };
            let delegs: Vec<bool> = args
                .dir_delegations
                .iter()
                .map(|&o| o == OnOff::On)
                .collect();
            for ro_lookups in ros {
                for &dir_delegations in &delegs {
                    let spec = TargetSpec {
                        kind,
                        ro_lookups,
                        durability: args.durability,
                        tcp_only: args.tcp_only,
                        dir_delegations,
                        sites: args.sites.clone(),
                        protocol: protocol.clone(),
                        clock_lag_tolerance_ms: args.clock_lag_tolerance_ms,
                        cache_timeout: args.cache_timeout,
                        mount_threads: args.mount_threads,
                    };
                    if !out.iter().any(|s: &TargetSpec| s.label() == spec.label()) {
                        out.push(spec);
                    }
                }
            }
        }
        out
    }

    /// Starts this target in a fresh directory under `work`.
    pub fn start(&self, work: &Path, run: u32) -> anyhow::Result<Mounted> {
        let inst = work.join(format!("{}-{run}", self.label()));
        fs::create_dir_all(&inst).with_context(|| format!("creating {}", inst.display()))?;
        let mounted = match self.kind {
            TargetKind::Local => {
                let dir = inst.join("data");
                fs::create_dir(&dir)?;
                Ok(Mounted {
                    dir,
                    servers: Vec::new(),
                    fuse: Vec::new(),
                    guard: Guard::Dir(inst.clone()),
                })
            }
            TargetKind::Passthrough => start_bindfs(&inst, self.cache_timeout),
            TargetKind::Byzfs | TargetKind::ByzfsEncrypted | TargetKind::Norep => {
                mount_cluster(&ClusterMountOptions {
                    replicated: self.kind != TargetKind::Norep,
                    encrypted: self.kind == TargetKind::ByzfsEncrypted,
                    ro_lookups: self.ro_lookups,
                    durability: self.durability,
                    tcp_only: self.tcp_only,
                    dir_delegations: self.dir_delegations,
                    dir: inst.clone(),
                    sites: self.sites.clone(),
                    protocol: self.protocol.clone(),
                    clock_lag_tolerance_ms: self.clock_lag_tolerance_ms,
                    cache_timeout: self.cache_timeout,
                    threads: self.mount_threads,
                })
            }
        };
        if mounted.is_err() {
            let _ = fs::remove_dir_all(&inst);
        }
        mounted
    }
}

/// A started target: benchmark in `dir`; dropping it unmounts, stops and cleans up.
pub struct Mounted {
    /// The directory to run the workload in (empty when started).
    pub dir: PathBuf,
    /// The server processes (bindfs; the replicas or the NO-REP server, and the `byzfs
    /// mount` daemon), whose CPU time is charged to the target.
    pub servers: Vec<i32>,
    /// Those of `servers` that are the FUSE daemon (bindfs; `byzfs mount`, where the BFT
    /// or plain client runs), so that tables can tell the client side of a mount from the
    /// replicas behind it.
    pub fuse: Vec<i32>,
    guard: Guard,
}

/// Starts `byzfs mount` on a cluster's servers and waits until it is mounted.
type MountCommand = dyn Fn(&Servers) -> anyhow::Result<Child> + Send;
/// Mounts bindfs and returns its processes.
type BindfsMount = dyn Fn() -> anyhow::Result<Vec<i32>> + Send;

enum Guard {
    /// Remove this directory.
    Dir(PathBuf),
    /// Unmount `mnt` (FUSE), then remove `inst`. `remount` mounts it again.
    Fuse {
        mnt: PathBuf,
        inst: PathBuf,
        remount: Box<BindfsMount>,
    },
    /// Stop `byzfs mount` (which unmounts), make sure `mnt` is unmounted, stop the
    /// servers, remove `inst`. `mount_cmd` starts `byzfs mount` again.
    Cluster {
        servers: Box<Servers>,
        mount: Option<Child>,
        mnt: PathBuf,
        inst: PathBuf,
        mount_cmd: Box<MountCommand>,
    },
}

/// What the servers of a ByzFS or NO-REP target counted, summed over the live ones
/// (`byzfs status` shows each one's): see [`Mounted::server_counts`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerCounts {
    /// Servers that answered.
    pub servers: u64,
    /// Requests executed, read-only ones included.
    pub ops: u64,
    /// Synchronous writes: log `fdatasync`s, database commits and the service's store syncs.
    pub syncs: u64,
    /// Event-loop steps of at least 50 ms (`busy_steps`).
    pub long_steps: u64,
}

impl ServerCounts {
    /// What rose from `before` to `self` (same servers: nothing restarts in a benchmark).
    pub fn since(&self, before: &ServerCounts) -> ServerCounts {
        ServerCounts {
            servers: self.servers.min(before.servers),
            ops: self.ops.saturating_sub(before.ops),
            syncs: self.syncs.saturating_sub(before.syncs),
            long_steps: self.long_steps.saturating_sub(before.long_steps),
        }
    }
}

impl Mounted {
    /// The servers' own counts of operations and syncs, for a ByzFS or NO-REP target
    /// (`None` for the others, or if a server did not answer). Waits 400 ms first, more
    /// than two status intervals (150 ms by default), so that what the servers did up to
    /// now is in what they publish.
    pub fn server_counts(&self) -> Option<ServerCounts> {
        let Guard::Cluster { servers, .. } = &self.guard else {
            return None;
        };
        std::thread::sleep(std::time::Duration::from_millis(400));
        let rt = byzfs_net::signals::runtime().ok()?;
        let mut sum = ServerCounts::default();
        for id in servers.live() {
            let s = rt.block_on(servers.status(id))?;
            let store_syncs = s.service.get("store_syncs").copied().unwrap_or(0);
            sum.servers += 1;
            sum.ops += s.core.requests_executed + s.core.read_only_executed;
            sum.syncs += s.disk.syncs() + store_syncs;
            sum.long_steps += s.core.busy_steps;
        }
        Some(sum)
    }

    /// The sites a ByzFS or NO-REP target runs across, if it was started with some.
    pub fn sites(&self) -> Option<std::sync::Arc<crate::sites::Sites>> {
        match &self.guard {
            Guard::Cluster { servers, .. } => servers.sites().cloned(),
            _ => None,
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        match &mut self.guard {
            Guard::Dir(d) => remove_tree(d),
            Guard::Fuse { mnt, inst, .. } => {
                fuse_unmount(mnt);
                live_mounts().retain(|m| m.dir != *mnt);
                remove_tree(inst);
            }
            Guard::Cluster {
                servers,
                mount,
                mnt,
                inst,
                ..
            } => {
                if let Some(m) = mount {
                    stop_child(m);
                }
                fuse_unmount(mnt);
                live_mounts().retain(|m| m.dir != *mnt);
                servers.stop();
                remove_tree(inst);
            }
        }
    }
}

fn remove_tree(d: &Path) {
    if let Err(e) = fs::remove_dir_all(d) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!("could not remove {}: {e}", d.display());
        }
    }
}

/// Whether a file system is mounted at `path` (from `/proc/self/mountinfo`).
pub fn is_mounted(path: &Path) -> bool {
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let want = path.to_string_lossy();
    info.lines().any(|l| {
        l.split(' ')
            .nth(4)
            .is_some_and(|m| m.replace("\\040", " ") == want)
    })
}

/// The FUSE connection number (the device's minor number, its directory under
/// `/sys/fs/fuse/connections`) of the FUSE file system mounted at `mnt`, from `mountinfo`.
fn fuse_connection(mountinfo: &str, mnt: &Path) -> Option<u32> {
    let want = mnt.to_string_lossy();
    mountinfo.lines().find_map(|l| {
        let fields: Vec<&str> = l.split(' ').collect();
        let point = fields.get(4)?.replace("\\040", " ");
        // After the optional fields, " - " then the file system type.
        let fstype = fields.iter().skip_while(|f| **f != "-").nth(1)?;
        if point != want || !(*fstype == "fuse" || fstype.starts_with("fuse.")) {
            return None;
        }
        fields.get(2)?.split_once(':')?.1.parse().ok()
    })
}

/// Aborts the FUSE connection of the mount at `mnt` (as `umount -f` would, but without
/// waiting): every operation blocked on it fails at once with `ENOTCONN`. A mount of a
/// cluster that no longer answers is "hard" and would otherwise hold the interrupted
/// benchmark, and whatever removes the work tree, in the kernel for ever.
fn abort_fuse(mnt: &Path) {
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let Some(conn) = fuse_connection(&info, mnt) else {
        return;
    };
    let dir = Path::new("/sys/fs/fuse/connections");
    if !dir.join(conn.to_string()).exists() {
        // fusectl is not always mounted; root can mount it (failure leaves the unmount
        // below to do what it can).
        let _ = Command::new("mount")
            .args(["-t", "fusectl", "fusectl"])
            .arg(dir)
            .stderr(Stdio::null())
            .status();
    }
    if let Err(e) = fs::write(dir.join(conn.to_string()).join("abort"), "1") {
        tracing::warn!(
            "could not abort the FUSE connection of {}: {e}",
            mnt.display()
        );
    }
}

/// `fusermount3 -u MNT`, retried while busy, then lazily (`-z`) as a last resort.
fn fuse_unmount(mnt: &Path) {
    for attempt in 0..20 {
        if !is_mounted(mnt) {
            return;
        }
        let lazy = attempt == 19;
        let mut cmd = Command::new("fusermount3");
        cmd.arg(if lazy { "-uz" } else { "-u" }).arg(mnt);
        let ok = cmd
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    tracing::warn!("could not unmount {}", mnt.display());
}

/// Checks that FUSE is usable: `/dev/fuse` and `fusermount3`.
fn check_fuse() -> anyhow::Result<()> {
    if !Path::new("/dev/fuse").exists() {
        bail!("/dev/fuse is missing: FUSE targets need the fuse kernel module (or a container with /dev/fuse)");
    }
    if Command::new("fusermount3")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_err()
    {
        bail!("fusermount3 not found: install it with `apt-get install -y fuse3`");
    }
    Ok(())
}

/// Waits until `mnt` is a mount point; fails early if `child` exits.
fn wait_mounted(mnt: &Path, mut child: Option<&mut Child>, log: &Path) -> anyhow::Result<()> {
    let start = Instant::now();
    while !is_mounted(mnt) {
        if let Some(c) = child.as_deref_mut() {
            if let Some(status) = c.try_wait()? {
                bail!(
                    "the mount process exited ({status}) before mounting {}: {}",
                    mnt.display(),
                    last_line(log)
                );
            }
        }
        if start.elapsed() > MOUNT_TIMEOUT {
            bail!(
                "{} not mounted after {MOUNT_TIMEOUT:?}: {}",
                mnt.display(),
                last_line(log)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// The last non-empty line of a log file, for one-line errors.
pub fn last_line(log: &Path) -> String {
    fs::read_to_string(log)
        .ok()
        .and_then(|s| {
            s.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(String::from)
        })
        .unwrap_or_else(|| format!("(see {})", log.display()))
}

/// A `bindfs` mount of a fresh directory under `work` (made here), for a benchmark that
/// runs its own workload through the passthrough (`byzfs bench store`).
pub fn start_passthrough(work: &Path) -> anyhow::Result<Mounted> {
    fs::create_dir_all(work)?;
    start_bindfs(work, None)
}

/// `bindfs INST/backing INST/mnt`.
fn start_bindfs(inst: &Path, cache_timeout: Option<f64>) -> anyhow::Result<Mounted> {
    check_fuse()?;
    let backing = inst.join("backing");
    let mnt = inst.join("mnt");
    fs::create_dir(&backing)?;
    fs::create_dir(&mnt)?;
    let log = inst.join("bindfs.log");
    let point = mnt.clone();
    let remount = move || bindfs_mount(&backing, &point, &log, cache_timeout);
    let pids = remount()?;
    Ok(Mounted {
        dir: mnt.clone(),
        servers: pids.clone(),
        fuse: pids,
        guard: Guard::Fuse {
            mnt,
            inst: inst.to_path_buf(),
            remount: Box::new(remount),
        },
    })
}

/// Mounts `backing` on `mnt` with bindfs (caching attributes and names for `cache_timeout`
/// seconds if given) and returns the bindfs processes.
fn bindfs_mount(
    backing: &Path,
    mnt: &Path,
    log: &Path,
    cache_timeout: Option<f64>,
) -> anyhow::Result<Vec<i32>> {
    let mut cmd = Command::new("bindfs");
    if let Some(t) = cache_timeout {
        cmd.arg("-o").arg(format!(
            "attr_timeout={t},entry_timeout={t},negative_timeout={t}"
        ));
    }
    let out = match cmd.arg(backing).arg(mnt).output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("bindfs not found: the passthrough target needs it (`apt-get install -y bindfs fuse3`)")
        }
        Err(e) => return Err(e).context("running bindfs"),
    };
    fs::File::create(log)?.write_all(&out.stderr)?;
    if !out.status.success() {
        bail!(
            "bindfs failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    live_mounts().push(LiveMount {
        dir: mnt.to_path_buf(),
        daemon: None,
    });
    // bindfs daemonises after mounting; wait anyway in case it returns early.
    wait_mounted(mnt, None, log)?;
    // bindfs forked into the background: find it by its command line.
    let want = mnt.to_string_lossy().into_owned();
    Ok(crate::cpu::pids_where(|argv| {
        argv.first().is_some_and(|a| a.ends_with("bindfs")) && argv.contains(&want)
    }))
}

/// Environment variable naming the program [`mount_cluster`] runs as `byzfs mount` instead
/// of this binary (the tests use a stand-in).
pub const MOUNT_ENV: &str = "BYZFS_FSBENCH_MOUNT";

/// What the ByzFS/NO-REP target is asked for.
#[derive(Debug, Clone)]
pub struct ClusterMountOptions {
    /// `true`: ByzFS (3f+1 replicas, f = 1); `false`: NO-REP (one unreplicated server, same
    /// file service and FUSE client).
    pub replicated: bool,
    /// Mounted encrypted: a fresh identity and its group `default` (ByzFS only).
    pub encrypted: bool,
    /// Read-only optimisation for lookups (ByzFS only).
    pub ro_lookups: bool,
    /// Where servers keep their state.
    pub durability: Durability,
    /// No Unix sockets: every link over TCP.
    pub tcp_only: bool,
    /// The mount holds directory delegations (else `--no-dir-delegations`).
    pub dir_delegations: bool,
    /// A fresh, empty directory owned by this target (cluster files, logs, mount point).
    pub dir: PathBuf,
    /// Servers and mount each in their node's namespace of these sites (`None`: loopback).
    pub sites: Option<crate::sites::Profile>,
    /// The cluster file's `[protocol]` (e.g. `relay_big_requests = false`: the client sends
    /// a big body to every replica rather than to the primary, which relays it).
    pub protocol: ProtocolParams,
    /// The cluster file's `[fs] clock_lag_tolerance_ms` (`None`: its default).
    pub clock_lag_tolerance_ms: Option<u64>,
    /// `byzfs mount --cache-timeout` (`None`: its default).
    pub cache_timeout: Option<f64>,
    /// `byzfs mount --threads` (`None`: its default).
    pub threads: Option<u16>,
}

/// The ByzFS and NO-REP targets: starts the servers with the benchmarks' one launcher
/// ([`Servers`], the file service, in `DIR/cluster`), then mounts them through FUSE with
/// `byzfs mount --config DIR/cluster/cluster.toml DIR/mnt` (`--strict` when lookups are
/// ordered, `--unreplicated` for NO-REP) until the mount point appears. On drop: SIGTERM
/// to `byzfs mount` (it unmounts), `fusermount3 -u` if the mount is still there, then the
/// servers stop. The mount program is this binary, or `$BYZFS_FSBENCH_MOUNT` if set.
///
/// NO-REP is `byzfs unreplicated --service fs` with MACs, as the mount's plain client
/// expects: the same file service, transport, wire format and FUSE adapter as ByzFS, one
/// process, with the same `--durability` as the replicas (in `disk` mode it stores and
/// fsyncs every executed request before replying, one group commit per turn).
pub fn mount_cluster(opts: &ClusterMountOptions) -> anyhow::Result<Mounted> {
    let exe = match std::env::var_os(MOUNT_ENV) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => std::env::current_exe().context("locating the byzfs binary")?,
    };
    check_fuse()?;
    let system = if opts.replicated {
        System::Byzfs
    } else {
        System::UnreplicatedMac
    };
    let protocol = opts.protocol.to_config(1, byzfs_bft::Config::new(1).epoch);
    let launch = Launch {
        protocol,
        clock_lag_tolerance_ms: opts.clock_lag_tolerance_ms,
        disk: opts.durability == Durability::Disk,
        tcp_only: opts.tcp_only,
        service: Service::Fs,
        replica_args: Vec::new(),
        sites: match &opts.sites {
            Some(p) => Some(std::sync::Arc::new(crate::sites::Sites::start(p)?)),
            None => None,
        },
    };
    let cdir = opts.dir.join("cluster");
    fs::create_dir_all(&cdir)?;
    let servers =
        byzfs_net::signals::runtime()?.block_on(Servers::start(system, &cdir, &launch))?;
    let mnt = opts.dir.join("mnt");
    fs::create_dir_all(&mnt)?;
    let mount_log = opts.dir.join("mount.log");
    let mut args: Vec<std::ffi::OsString> = vec!["mount".into()];
    if opts.encrypted {
        let identity = opts.dir.join("identity.id");
        setup_encryption(servers.config_path(), &identity)?;
        args.extend(["--identity".into(), identity.into_os_string()]);
    }
    if !opts.replicated {
        args.push("--unreplicated".into());
    }
    if opts.replicated && !opts.ro_lookups {
        args.push("--strict".into());
    }
    if !opts.dir_delegations {
        args.push("--no-dir-delegations".into());
    }
    if let Some(t) = opts.cache_timeout {
        args.extend(["--cache-timeout".into(), t.to_string().into()]);
    }
    if let Some(n) = opts.threads {
        args.extend(["--threads".into(), n.to_string().into()]);
    }
    args.extend(["--config".into(), servers.config_path().into()]);
    args.push(mnt.clone().into_os_string());
    let (log, point) = (mount_log.clone(), mnt.clone());
    let mount_cmd = move |servers: &Servers| -> anyhow::Result<Child> {
        let logf = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let mut cmd = Command::new(&exe);
        if let Some(sites) = servers.sites() {
            sites.enter(crate::sites::Node::Client, &mut cmd)?;
        }
        let mut child = cmd
            .args(&args)
            .stdin(Stdio::null())
            .stdout(logf.try_clone()?)
            .stderr(logf)
            .spawn()
            .context("starting `byzfs mount`")?;
        live_mounts().push(LiveMount {
            dir: point.clone(),
            daemon: Some(child.id() as i32),
        });
        wait_mounted(&point, Some(&mut child), &log)?;
        Ok(child)
    };
    let child = mount_cmd(&servers);
    let mut mounted = Mounted {
        dir: mnt.clone(),
        servers: servers.pids(),
        fuse: Vec::new(),
        guard: Guard::Cluster {
            servers: Box::new(servers),
            mount: None,
            mnt,
            inst: opts.dir.clone(),
            mount_cmd: Box::new(mount_cmd),
        },
    };
    let Guard::Cluster { mount, .. } = &mut mounted.guard else {
        unreachable!("built just above")
    };
    // On an error, dropping `mounted` stops the servers.
    let m = mount.insert(child?);
    let mount_pid = m.id() as i32;
    // Everything serving the mount: the replicas (or the server) and the FUSE daemon.
    mounted.servers.push(mount_pid);
    mounted.fuse = vec![mount_pid];
    Ok(mounted)
}

impl Mounted {
    /// Unmounts and mounts the target again, as a new mount would find it (nothing cached
    /// in the kernel or the mount, no delegation held): ByzFS and NO-REP restart `byzfs
    /// mount`, the passthrough restarts bindfs; local disk has nothing to do. The servers
    /// keep running.
    pub fn remount(&mut self) -> anyhow::Result<()> {
        match &mut self.guard {
            Guard::Dir(_) => Ok(()),
            Guard::Fuse { mnt, remount, .. } => {
                fuse_unmount(mnt);
                live_mounts().retain(|m| m.dir != *mnt);
                self.servers = remount()?;
                self.fuse = self.servers.clone();
                Ok(())
            }
            Guard::Cluster {
                servers,
                mount,
                mnt,
                mount_cmd,
                ..
            } => {
                let old = mount.as_ref().map(|m| m.id() as i32);
                if let Some(m) = mount {
                    stop_child(m);
                }
                fuse_unmount(mnt);
                live_mounts().retain(|m| m.dir != *mnt);
                *mount = None;
                let child = mount.insert(mount_cmd(servers)?);
                let pid = child.id() as i32;
                self.servers.retain(|p| Some(*p) != old);
                self.servers.push(pid);
                self.fuse = vec![pid];
                Ok(())
            }
        }
    }
}

/// A new identity at `identity` and its group `default` on the cluster of `config`, with
/// this binary's `byzfs identity new` and `byzfs group create` (as a user would).
fn setup_encryption(config: &Path, identity: &Path) -> anyhow::Result<()> {
    let byzfs = std::env::current_exe().context("locating the byzfs binary")?;
    for args in [
        vec![
            "identity".into(),
            "new".into(),
            identity.as_os_str().to_owned(),
        ],
        vec![
            "group".into(),
            "--config".into(),
            config.as_os_str().to_owned(),
            "--identity".into(),
            identity.as_os_str().to_owned(),
            "create".into(),
            "default".into(),
        ],
    ] {
        let out = Command::new(&byzfs)
            .args(&args)
            .output()
            .context("running byzfs")?;
        if !out.status.success() {
            bail!(
                "byzfs {:?}: {}",
                args,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    Ok(())
}

/// SIGTERM, wait up to [`STOP_TIMEOUT`], then SIGKILL.
fn stop_child(child: &mut Child) {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    let pid = Pid::from_raw(child.id() as i32);
    let _ = kill(pid, Signal::SIGTERM);
    let start = Instant::now();
    while start.elapsed() < STOP_TIMEOUT {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Flushes dirty data and drops the kernel's page, dentry and inode caches
/// (`sync; echo 3 > /proc/sys/vm/drop_caches`). Needs root; returns whether it worked.
pub fn drop_caches() -> bool {
    let _ = Command::new("sync").status();
    fs::write("/proc/sys/vm/drop_caches", "3\n").is_ok()
}

/// Starts each target in turn for one run; a target that cannot start is skipped with a
/// warning (and left out of later runs).
pub struct Targets {
    pub specs: Vec<TargetSpec>,
    pub work: tempfile::TempDir,
}

impl Targets {
    /// The targets of `args`, with a fresh work directory under `--work-dir`.
    pub fn new(args: &CommonArgs) -> anyhow::Result<Targets> {
        let base = args.work_dir.clone().unwrap_or_else(std::env::temp_dir);
        fs::create_dir_all(&base)?;
        // Absolute and without symlinks, as mount points appear in /proc/self/mountinfo.
        let base = fs::canonicalize(&base)?;
        let work = tempfile::Builder::new()
            .prefix("byzfs-fsbench-")
            .tempdir_in(&base)
            .with_context(|| format!("creating a work directory in {}", base.display()))?;
        install_interrupt_cleanup(work.path());
        Ok(Targets {
            specs: TargetSpec::from_args(args),
            work,
        })
    }

    /// Starts `spec`, or prints why it cannot be and returns `None`.
    pub fn start(&self, spec: &TargetSpec, run: u32) -> anyhow::Result<Option<Mounted>> {
        match spec.start(self.work.path(), run) {
            Ok(m) => Ok(Some(m)),
            Err(e) if run == 0 => {
                eprintln!("warning: skipping target {}: {e:#}", spec.label());
                Ok(None)
            }
            // A target that worked in run 0 and fails later is an error.
            Err(e) => Err(e.context(format!("starting target {}", spec.label()))),
        }
    }
}

/// A FUSE mount started here and not yet unmounted.
#[derive(Clone)]
struct LiveMount {
    dir: PathBuf,
    /// Our `byzfs mount` child serving it (bindfs daemonises: not ours to stop).
    daemon: Option<i32>,
}

/// FUSE mounts started here and not yet unmounted (for the interrupt handler).
fn live_mounts() -> std::sync::MutexGuard<'static, Vec<LiveMount>> {
    static MOUNTS: std::sync::Mutex<Vec<LiveMount>> = std::sync::Mutex::new(Vec::new());
    MOUNTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// On SIGINT or SIGTERM: unmount the FUSE mounts started here (bindfs runs in its own
/// session, so Ctrl-C does not reach it and its mount would outlive us), stop our `byzfs
/// mount` children, remove `work`, and exit with status 130. `make` and `postmark` are in
/// our process group and get the terminal's SIGINT themselves; a SIGTERM (`kill`, `pkill`)
/// reaches us alone, and a `byzfs mount` whose cluster no longer answers outlived its
/// aborted connection, so it is sent SIGTERM, then SIGKILL ([`stop_daemons`]). The servers
/// stop when our exit closes their stdin (`--exit-with-parent`).
///
/// The signals are then blocked in the calling thread (and so in the threads it starts,
/// and in the processes they start: a mask outlives `exec`, so `byzfs` unblocks them first
/// thing, `byzfs_net::signals::unblock_shutdown_signals`): a process-directed signal goes to
/// a thread that does not block it, and the kernel had picked the benchmark's thread while
/// it was blocked in a request to a mount whose cluster no longer answered, where the
/// handler never ran and nothing was cleaned up.
fn install_interrupt_cleanup(work: &Path) {
    use nix::sys::signal::{pthread_sigmask, SigSet, SigmaskHow, Signal};
    let work = work.to_path_buf();
    std::thread::spawn(move || {
        let Ok(rt) = byzfs_net::signals::runtime() else {
            return;
        };
        let why = rt.block_on(byzfs_net::signals::shutdown(false));
        let mounts: Vec<LiveMount> = live_mounts().clone();
        // First, even before printing (the benchmark thread may hold stderr while blocked
        // in the mount), so that nothing stays blocked on a cluster that is being torn down
        // or changing views.
        for m in &mounts {
            abort_fuse(&m.dir);
        }
        eprintln!("\n{why}: unmounting and cleaning up {}", work.display());
        for m in &mounts {
            fuse_unmount(&m.dir);
        }
        stop_daemons(mounts.iter().filter_map(|m| m.daemon), DAEMON_GRACE);
        remove_tree(&work);
        std::process::exit(130);
    });
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    if let Err(e) = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&signals), None) {
        tracing::warn!("cannot leave SIGINT and SIGTERM to the cleanup thread: {e}");
    }
}

/// How long an interrupted run's `byzfs mount` gets to exit after SIGTERM.
const DAEMON_GRACE: Duration = Duration::from_secs(3);

/// SIGTERM to each of `pids`, then SIGKILL to those still running after `grace`. They
/// are our children but not reaped here (the benchmark thread owns their `Child`): a
/// zombie counts as gone, and our exit right after reparents it.
fn stop_daemons(pids: impl Iterator<Item = i32>, grace: Duration) {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let pids: Vec<Pid> = pids.map(Pid::from_raw).collect();
    for &p in &pids {
        let _ = kill(p, Signal::SIGTERM);
    }
    let start = Instant::now();
    let mut left = pids;
    loop {
        left.retain(|p| running(p.as_raw()));
        if left.is_empty() || start.elapsed() >= grace {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for p in left {
        tracing::warn!("byzfs mount {p} did not exit on SIGTERM: killing it");
        let _ = kill(p, Signal::SIGKILL);
    }
}

/// Whether process `pid` exists and is not a zombie (`/proc/PID/stat`'s state).
fn running(pid: i32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command's closing parenthesis (the command may hold spaces).
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state != "Z" && state != "X")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child that ignores SIGTERM is killed after the grace; one that exits on it is
    /// not waited for longer than it takes.
    #[test]
    fn daemons_are_terminated_then_killed() {
        use std::io::BufRead;
        let mut polite = Command::new("sleep").arg("60").spawn().expect("sleep");
        let mut stubborn = Command::new("sh")
            .args([
                "-c",
                "trap '' TERM; echo ready; while :; do sleep 0.1; done",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .expect("sh");
        // The signal must come after the shell installed its trap: it says so.
        let mut ready = String::new();
        let out = stubborn.stdout.take().expect("piped");
        std::io::BufReader::new(out)
            .read_line(&mut ready)
            .expect("read");
        assert_eq!(ready, "ready\n");
        let pids = [polite.id() as i32, stubborn.id() as i32];
        stop_daemons(pids.into_iter(), Duration::from_millis(500));
        let polite = polite.wait().expect("wait");
        let stubborn = stubborn.wait().expect("wait");
        use nix::sys::signal::Signal;
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            (polite.signal(), stubborn.signal()),
            (Some(Signal::SIGTERM as i32), Some(Signal::SIGKILL as i32))
        );
        assert!(!running(pids[0]) && !running(pids[1]));
    }

    /// The connection to abort is the FUSE mount's minor device number; other mounts at
    /// other points, or not FUSE, are not touched.
    #[test]
    fn the_fuse_connection_is_found_by_mount_point() {
        let info = "\
25 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
611 25 0:44 / /tmp/bench\\040x/mnt rw,nosuid,nodev,relatime shared:300 - fuse byzfs rw,user_id=0
612 25 0:45 / /tmp/other rw - fuse.bindfs bindfs rw
613 25 0:46 / /sys/fs/fuse/connections rw - fusectl fusectl rw
";
        let found = |p: &str| fuse_connection(info, Path::new(p));
        assert_eq!(
            [
                found("/tmp/bench x/mnt"),
                found("/tmp/other"),
                found("/"),
                found("/tmp/nothing"),
            ],
            [Some(44), Some(45), None, None]
        );
    }
}
