//! The one process launcher of every benchmark: generate a throw-away cluster directory,
//! start the replica (or unreplicated server) processes on loopback with the null service
//! (`bench micro|throughput`) or the file service (`bench andrew|postmark|largefile`, which
//! then mount it), wait until they answer, account their CPU time, kill one, stop them all.
//!
//! Children hold a pipe as stdin and run with `--exit-with-parent`, so none outlives the
//! benchmark however it ends; they run in their own process group, so a terminal's Ctrl-C
//! reaches only the benchmark, whose `Drop` stops them.

use anyhow::{bail, Context as _};
use byzfs_bft::Config;
use byzfs_net::cluster::{ClusterConfig, CLUSTER_FILE};
use byzfs_net::handshake::query_status;
use byzfs_net::keygen::{client_key_path, keygen, replica_key_path, KeygenOptions, DEFAULT_CLIENT};
use byzfs_net::{ClientCredential, NodeStatus};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cpu;
use crate::sites::{Node, Sites};
use std::sync::Arc;

/// How long servers get to become reachable.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long servers get to exit after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// What runs the null service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum System {
    /// 3f+1 ByzFS replica processes.
    Byzfs,
    /// One unreplicated server, no MACs.
    Unreplicated,
    /// One unreplicated server, one MAC on each request and reply.
    UnreplicatedMac,
}

impl System {
    /// The name used in tables and JSON rows.
    pub fn name(self) -> &'static str {
        match self {
            System::Byzfs => "byzfs",
            System::Unreplicated => "unreplicated",
            System::UnreplicatedMac => "unreplicated-mac",
        }
    }

    pub fn parse(s: &str) -> anyhow::Result<System> {
        Ok(match s {
            "byzfs" => System::Byzfs,
            "unreplicated" => System::Unreplicated,
            "unreplicated-mac" => System::UnreplicatedMac,
            _ => bail!("unknown system {s:?}; use byzfs, unreplicated or unreplicated-mac"),
        })
    }
}

/// The replicated service the servers run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// The null service (`bench micro|throughput`).
    Null,
    /// The file service, its root owned by whoever runs the benchmark, so the mount is
    /// usable (`bench andrew|postmark|largefile`).
    Fs,
}

/// How to start a system: everything but which one.
#[derive(Clone, Debug)]
pub struct Launch {
    /// Protocol parameters written into the cluster file.
    pub protocol: Config,
    /// The cluster file's `[fs] clock_lag_tolerance_ms` (`None`: its default).
    pub clock_lag_tolerance_ms: Option<u64>,
    /// `--durability disk` (else `memory`).
    pub disk: bool,
    /// No Unix sockets: every link over TCP.
    pub tcp_only: bool,
    pub service: Service,
    /// Extra arguments for some replicas (`byzfs bench attack`'s Byzantine one).
    pub replica_args: Vec<(u32, Vec<String>)>,
    /// Run each server in its node's namespace of these sites, on its node's address
    /// (issue #30); `None`: all on loopback.
    pub sites: Option<Arc<Sites>>,
}

/// The port every server listens on at its own address of a site harness.
pub const SITES_PORT: u16 = 7000;

struct Proc {
    id: u32,
    child: Child,
    log: PathBuf,
    killed: bool,
}

/// Running server processes of one system; dropping this stops them.
pub struct Servers {
    pub system: System,
    pub cluster: ClusterConfig,
    pub credential: ClientCredential,
    config: PathBuf,
    procs: Vec<Proc>,
    /// Kept until the processes have stopped (dropped after `Drop::drop`).
    sites: Option<Arc<Sites>>,
}

impl Servers {
    /// Generates a fresh cluster directory in `dir` (free loopback ports, `launch.protocol`
    /// parameters; the cluster file is [`Servers::config_path`]) and starts `system` on it.
    pub async fn start(system: System, dir: &Path, launch: &Launch) -> anyhow::Result<Servers> {
        let disk = launch.disk;
        let mut opts = match &launch.sites {
            None => {
                let mut o = KeygenOptions::local(4, "127.0.0.1", 0)?;
                o.local_sockets = !launch.tcp_only;
                o
            }
            Some(sites) => {
                // Each replica at its own site; NO-REP (which serves as replica 0) at the
                // server's.
                let node = |i: u32| match (system, i) {
                    (System::Byzfs, _) | (_, 1..) => Node::Replica(i),
                    (_, 0) => Node::Server,
                };
                let hosts: Vec<String> = (0..4)
                    .map(|i| format!("{}:{SITES_PORT}", sites.addr(node(i))))
                    .collect();
                let mut o = KeygenOptions::hosts(&hosts)?;
                // One disk shared by four replicas, as on loopback.
                o.fs = Some(byzfs_net::cluster::FsLimits::fitting(
                    byzfs_net::keygen::free_disk(dir),
                    4,
                ));
                o
            }
        };
        opts.protocol = launch.protocol.clone();
        if let Some(ms) = launch.clock_lag_tolerance_ms {
            // As keygen fits four local replicas to the disk when given no limits.
            let fs = opts.fs.get_or_insert_with(|| {
                byzfs_net::cluster::FsLimits::fitting(byzfs_net::keygen::free_disk(dir), 4)
            });
            fs.clock_lag_tolerance_ms = ms;
        }
        // The cluster's own client acts for every local user, root too (README "Security").
        opts.client_grant = Some(byzfs_fs::Grant::trusted_host().encode());
        keygen(dir, &opts)?;
        let config = dir.join(CLUSTER_FILE);
        let cluster = ClusterConfig::load(&config)?;
        let credential = ClientCredential::load(&client_key_path(dir, DEFAULT_CLIENT), &cluster)?;
        let exe = std::env::current_exe().context("cannot find the byzfs executable")?;
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs)
            .with_context(|| format!("cannot create {}", logs.display()))?;
        let ids: Vec<u32> = match system {
            System::Byzfs => cluster.replicas.iter().map(|r| r.id).collect(),
            System::Unreplicated | System::UnreplicatedMac => vec![0],
        };
        let mut servers = Servers {
            system,
            cluster,
            credential,
            config: config.clone(),
            procs: Vec::new(),
            sites: launch.sites.clone(),
        };
        let service = match launch.service {
            Service::Null => "null",
            Service::Fs => "fs",
        };
        for id in ids {
            let log = logs.join(format!("{}-{id}.log", system.name()));
            let file = std::fs::File::create(&log)
                .with_context(|| format!("cannot create {}", log.display()))?;
            let mut cmd = Command::new(&exe);
            match system {
                System::Byzfs => {
                    cmd.arg("replica")
                        .arg("--id")
                        .arg(id.to_string())
                        .arg("--service")
                        .arg(service)
                        .arg("--durability")
                        .arg(if disk { "disk" } else { "memory" })
                        .arg("--data")
                        .arg(dir.join("data").join(format!("replica-{id}")));
                    if launch.service == Service::Fs {
                        cmd.arg("--fs-root-owner").arg(owner()?);
                    }
                    for (_, args) in launch.replica_args.iter().filter(|(r, _)| *r == id) {
                        cmd.args(args);
                    }
                }
                System::Unreplicated | System::UnreplicatedMac => {
                    // The same durability as the replicas it is compared with.
                    cmd.arg("unreplicated")
                        .arg("--service")
                        .arg(service)
                        .arg("--durability")
                        .arg(if disk { "disk" } else { "memory" })
                        .arg("--data")
                        .arg(dir.join("data").join("unreplicated"));
                    if system == System::Unreplicated {
                        cmd.arg("--no-macs");
                    }
                }
            }
            cmd.arg("--config")
                .arg(&config)
                .arg("--key")
                .arg(replica_key_path(dir, id))
                .arg("--exit-with-parent")
                .env(
                    "RUST_LOG",
                    std::env::var("RUST_LOG").unwrap_or("warn".into()),
                )
                .stdin(Stdio::piped())
                .stdout(file.try_clone()?)
                .stderr(file)
                .process_group(0);
            if let Some(sites) = &launch.sites {
                let node = match system {
                    System::Byzfs => Node::Replica(id),
                    _ => Node::Server,
                };
                sites.enter(node, &mut cmd)?;
            }
            let child = cmd
                .spawn()
                .with_context(|| format!("cannot start {} {id}", system.name()))?;
            servers.procs.push(Proc {
                id,
                child,
                log,
                killed: false,
            });
        }
        servers.wait_ready().await?;
        Ok(servers)
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            for p in &mut self.procs {
                if let Ok(Some(status)) = p.child.try_wait() {
                    bail!(
                        "{} {} exited during startup ({status}); see {}",
                        self.system.name(),
                        p.id,
                        p.log.display()
                    );
                }
            }
            let mut ready = 0;
            for p in &self.procs {
                if query_status(&self.cluster, p.id, Duration::from_millis(500))
                    .await
                    .is_ok_and(|s| s.has_new_view || self.system != System::Byzfs)
                {
                    ready += 1;
                }
            }
            if ready == self.procs.len() {
                return Ok(());
            }
            if started.elapsed() > READY_TIMEOUT {
                bail!(
                    "only {ready} of {} {} processes became reachable within {} s; see the logs in {}",
                    self.procs.len(),
                    self.system.name(),
                    READY_TIMEOUT.as_secs(),
                    self.procs
                        .first()
                        .and_then(|p| p.log.parent())
                        .unwrap_or(Path::new("."))
                        .display()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The sites the servers run at, if any.
    pub fn sites(&self) -> Option<&Arc<Sites>> {
        self.sites.as_ref()
    }

    /// The cluster file the servers were started with (clients and mounts use it).
    pub fn config_path(&self) -> &Path {
        &self.config
    }

    /// Process ids of the live servers.
    pub fn pids(&self) -> Vec<i32> {
        self.procs
            .iter()
            .filter(|p| !p.killed)
            .filter_map(|p| i32::try_from(p.child.id()).ok())
            .collect()
    }

    /// Process id of live server `id`.
    pub fn pid_of(&self, id: u32) -> Option<i32> {
        self.procs
            .iter()
            .find(|p| p.id == id && !p.killed)
            .and_then(|p| i32::try_from(p.child.id()).ok())
    }

    /// Total CPU time (user + system) the live server processes have used so far.
    pub fn cpu_time(&self) -> Duration {
        cpu::process_time(&self.pids())
    }

    /// The status of server `id` (a replica id).
    pub async fn status(&self, id: u32) -> Option<NodeStatus> {
        query_status(&self.cluster, id, Duration::from_millis(500))
            .await
            .ok()
    }

    /// `(pre-prepares sent, requests batched)` summed over the live replicas (only a
    /// primary sends pre-prepares); `None` if a live server does not answer.
    pub async fn batching_counters(&self) -> Option<(u64, u64)> {
        let mut out = (0, 0);
        for id in self.live() {
            let s = self.status(id).await?;
            out.0 += s.core.pre_prepares_sent;
            out.1 += s.core.batched_requests;
        }
        Some(out)
    }

    /// Frames sent by all live servers so far (replicas and clients counted alike), from
    /// their published status (refreshed every 100 ms); `None` if one does not answer.
    pub async fn frames_out(&self) -> Option<u64> {
        let mut out = 0;
        for id in self.live() {
            out += self.status(id).await?.net.frames_out;
        }
        Some(out)
    }

    /// SIGKILLs the current primary (asked of a live replica); returns its id.
    pub async fn kill_primary(&mut self) -> anyhow::Result<u32> {
        let mut primary = None;
        for p in self.procs.iter().filter(|p| !p.killed) {
            if let Some(s) = self.status(p.id).await {
                primary = Some(s.primary);
                break;
            }
        }
        let Some(primary) = primary else {
            bail!("no replica answered a status query; cannot find the primary")
        };
        let p = self
            .procs
            .iter_mut()
            .find(|p| p.id == primary && !p.killed)
            .context("the primary is not one of our processes")?;
        p.child.kill().context("cannot SIGKILL the primary")?;
        let _ = p.child.wait();
        p.killed = true;
        Ok(primary)
    }

    /// Ids of the servers still running.
    pub fn live(&self) -> Vec<u32> {
        self.procs
            .iter()
            .filter(|p| !p.killed)
            .map(|p| p.id)
            .collect()
    }

    /// SIGTERM, wait, SIGKILL the rest, reap all.
    pub fn stop(&mut self) {
        for p in &mut self.procs {
            if !p.killed {
                if let Ok(pid) = i32::try_from(p.child.id()) {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
                }
            }
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        for p in &mut self.procs {
            if p.killed {
                continue;
            }
            while Instant::now() < deadline {
                if let Ok(Some(_)) = p.child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            if !matches!(p.child.try_wait(), Ok(Some(_))) {
                let _ = p.child.kill();
                let _ = p.child.wait();
            }
            p.killed = true;
        }
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `UID:GID` of this process (the owner of `/proc/self`): the file service's root belongs to
/// whoever runs the benchmark, as with `byzfs up`.
fn owner() -> anyhow::Result<String> {
    use std::os::unix::fs::MetadataExt as _;
    let m = std::fs::metadata("/proc/self").context("cannot read /proc/self")?;
    Ok(format!("{}:{}", m.uid(), m.gid()))
}
