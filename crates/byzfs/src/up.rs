//! `byzfs up`: a local cluster of `byzfs replica` child processes on loopback.
//!
//! Keys are generated on first use. Children run in their own process group (so a terminal's
//! Ctrl-C reaches only `up`, which then stops them in order) and hold a pipe as stdin: if
//! `up` dies however it dies, the pipe closes and every replica exits (`--exit-with-parent`),
//! so no replica outlives it. On SIGINT/SIGTERM `up` forwards SIGTERM, waits, and only then
//! kills stragglers.
//!
//! With `--mount MNT` (which implies `--service fs`), `up` also mounts the file service on
//! MNT in its own process once every replica answers, and on SIGINT/SIGTERM unmounts first
//! (lazily if the mount is busy), then stops the replicas. If the mount is removed from
//! outside (`fusermount3 -u MNT`), `up` stops the cluster too.

use crate::replica::{DurabilityMode, ServiceKind};
use anyhow::{bail, Context as _};
use byzfs_net::cluster::{ClusterConfig, CLUSTER_FILE};
use byzfs_net::handshake::query_status;
use byzfs_net::keygen::{client_key_path, keygen, replica_key_path, KeygenOptions, DEFAULT_CLIENT};
use clap::Args;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long replicas get to become reachable.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long replicas get to exit after SIGTERM before they are killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Args, Debug)]
pub struct UpArgs {
    /// Number of replicas (3f+1) when generating keys; must match an existing cluster.
    #[arg(long)]
    replicas: Option<usize>,
    /// Cluster directory: config, keys, logs/ and data/.
    #[arg(long, default_value = "byzfs-cluster")]
    dir: PathBuf,
    /// The service to replicate (default kv; fs with --mount).
    #[arg(long, value_enum)]
    service: Option<ServiceKind>,
    /// Also mount the file service here (created if missing; implies --service fs).
    #[arg(long, value_name = "MOUNTPOINT")]
    mount: Option<PathBuf>,
    /// With --mount: who may use it (see `byzfs mount --help`).
    #[command(flatten)]
    access: crate::mount::AccessArgs,
    /// With --mount: give up on an operation after this long and return EIO (a soft mount;
    /// see `byzfs mount --help`). Default 0: a hard mount, which waits until the cluster
    /// answers.
    #[arg(long, default_value_t = 0, requires = "mount")]
    timeout_ms: u64,
    /// With --mount: mount an encrypted tree, as the identity `identity.id` in the cluster
    /// directory (made if missing) and its group `default` (made if missing).
    #[arg(long, requires = "mount")]
    encrypt: bool,
    /// With --mount: see `byzfs mount --help`.
    #[command(flatten)]
    cache: crate::mount::CacheArgs,
    /// Port of replica 0 when generating keys (0 picks free ports).
    #[arg(long, default_value_t = 7000)]
    base_port: u16,
    /// Serve each replica's Prometheus metrics on 127.0.0.1:<metrics-base-port + id>.
    #[arg(long)]
    metrics_base_port: Option<u16>,
    /// When generating keys: give the replicas no Unix sockets, so that every link uses TCP
    /// (by default each replica also listens on `<dir>/replica-<id>.sock`, and the replicas and
    /// the mount connect there).
    #[arg(long)]
    tcp_only: bool,
    /// Durability mode of every replica (`disk` keeps state in `<dir>/data/replica-<id>`).
    #[arg(long, value_enum, default_value_t = DurabilityMode::Disk)]
    durability: DurabilityMode,
}

/// One replica process.
struct Replica {
    id: u32,
    child: Child,
    log: PathBuf,
    exited: Option<ExitStatus>,
}

/// The children; dropping this stops them (so every error path cleans up).
struct Children(Vec<Replica>);

impl Children {
    /// Reaps exited children; returns the ones that just exited.
    fn poll_exits(&mut self) -> Vec<(u32, ExitStatus, PathBuf)> {
        let mut out = Vec::new();
        for r in &mut self.0 {
            if r.exited.is_none() {
                if let Ok(Some(s)) = r.child.try_wait() {
                    r.exited = Some(s);
                    out.push((r.id, s, r.log.clone()));
                }
            }
        }
        out
    }

    /// SIGTERM, wait up to [`STOP_TIMEOUT`], SIGKILL the rest, reap everything.
    fn stop_all(&mut self) -> usize {
        for r in &mut self.0 {
            if r.exited.is_none() {
                if let Ok(pid) = i32::try_from(r.child.id()) {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
                }
            }
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline && self.0.iter().any(|r| r.exited.is_none()) {
            self.poll_exits();
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut killed = 0;
        for r in &mut self.0 {
            if r.exited.is_none() {
                let _ = r.child.kill();
                killed += 1;
                r.exited = r.child.wait().ok();
            }
        }
        killed
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        self.stop_all();
    }
}

pub fn run(mut a: UpArgs) -> anyhow::Result<ExitCode> {
    // fuser logs every mount and unmount at info; the summary says it already.
    crate::logging::init("info,fuser=warn");
    if a.access.given() && a.mount.is_none() {
        bail!("--allow-other and --private apply to a mount: add --mount MOUNTPOINT");
    }
    if let Some(mnt) = &a.mount {
        match a.service {
            None | Some(ServiceKind::Fs) => a.service = Some(ServiceKind::Fs),
            Some(s) => bail!("--mount needs --service fs, not --service {}", s.name()),
        }
        // Fail before starting anything.
        byzfs_fuse::check_fuse()?;
        byzfs_fuse::check_mountpoint(mnt, true)?;
    }
    let service = a.service.unwrap_or(ServiceKind::Kv);
    let config_path = a.dir.join(CLUSTER_FILE);
    if !config_path.exists() {
        let mut opts = KeygenOptions::local(a.replicas.unwrap_or(4), "127.0.0.1", a.base_port)?;
        opts.local_sockets = !a.tcp_only;
        // The local cluster's own client acts for every local user, root too (README "Security").
        opts.client_grant = Some(byzfs_fs::Grant::trusted_host().encode());
        keygen(&a.dir, &opts)?;
        println!("generated a new cluster in {}", a.dir.display());
    }
    let cluster = ClusterConfig::load(&config_path)?;
    if let Some(n) = a.replicas {
        if n != cluster.n() {
            bail!(
                "{} holds a {}-replica cluster; pass --replicas {} or another --dir",
                a.dir.display(),
                cluster.n(),
                cluster.n()
            );
        }
    }
    let logs = a.dir.join("logs");
    let data = a.dir.join("data");
    for d in [&logs, &data] {
        std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    let exe = std::env::current_exe().context("cannot find the byzfs executable")?;
    // The effective user and group own /proc/self.
    let (uid, gid) = {
        use std::os::unix::fs::MetadataExt as _;
        let m = std::fs::metadata("/proc/self").context("cannot read /proc/self")?;
        (m.uid(), m.gid())
    };
    let mut children = Children(Vec::new());
    for r in &cluster.replicas {
        let log = logs.join(format!("replica-{}.log", r.id));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .with_context(|| format!("cannot open {}", log.display()))?;
        let mut cmd = Command::new(&exe);
        cmd.arg("replica")
            .arg("--config")
            .arg(&config_path)
            .arg("--id")
            .arg(r.id.to_string())
            .arg("--key")
            .arg(replica_key_path(&a.dir, r.id))
            .arg("--data")
            .arg(data.join(format!("replica-{}", r.id)))
            .arg("--service")
            .arg(service.name())
            .arg("--durability")
            .arg(a.durability.name())
            .arg("--exit-with-parent")
            .stdin(Stdio::piped())
            .stdout(file.try_clone()?)
            .stderr(file)
            .process_group(0);
        if service == ServiceKind::Fs {
            // The root directory belongs to whoever runs `up`, so they can use the mount.
            cmd.arg("--fs-root-owner").arg(format!("{uid}:{gid}"));
        }
        if let Some(base) = a.metrics_base_port {
            let port = base
                .checked_add(r.id as u16)
                .context("--metrics-base-port too high")?;
            cmd.arg("--metrics").arg(format!("127.0.0.1:{port}"));
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start replica {}", r.id))?;
        children.0.push(Replica {
            id: r.id,
            child,
            log,
            exited: None,
        });
    }
    let rt = byzfs_net::signals::runtime()?;
    rt.block_on(wait_ready(&mut children, &cluster, &a))?;
    // Mounted outside the runtime: the adapter blocks on its own runtime.
    let mounted = match &a.mount {
        Some(mnt) => {
            let opts = byzfs_fuse::MountOptions {
                timeout: (a.timeout_ms > 0).then(|| Duration::from_millis(a.timeout_ms)),
                allow_other: a.access.allow_other(),
                unreplicated: false,
                strict: false,
                sync_writes: false,
                cache_timeout: a.cache.timeout(),
                delegate_dirs: !a.cache.no_dir_delegations,
                encryption: if a.encrypt {
                    Some(rt.block_on(encryption(&config_path, &cluster))?)
                } else {
                    None
                },
            };
            Some(byzfs_fuse::mount(&config_path, None, mnt, &opts)?)
        }
        None => None,
    };
    print_summary(&children, &cluster, &a, service, &config_path);
    rt.block_on(supervise(&mut children, mounted, &a))
}

/// `up --encrypt`: the identity `identity.id` beside the cluster file and its group
/// `default`, each made if missing.
async fn encryption(
    config_path: &std::path::Path,
    cluster: &ClusterConfig,
) -> anyhow::Result<byzfs_fuse::crypt::Encryption> {
    let dir = config_path.parent().unwrap_or_else(|| ".".as_ref());
    let path = dir.join("identity.id");
    if !path.exists() {
        let id = byzfs_crypt::member::Identity::generate(&mut rand_core::OsRng);
        crate::identity::write_new(&path, &id, false)?;
    }
    let identity = crate::identity::load(&path)?;
    let key = byzfs_net::keygen::client_key_path(dir, byzfs_net::keygen::DEFAULT_CLIENT);
    let cred = byzfs_net::ClientCredential::load(&key, cluster)?;
    let group = crate::group::ensure(cluster, &cred, &identity, "default").await?;
    // The local identity owns `default`: the mount accepts no record another signed.
    let owner = identity.owner_key();
    Ok(byzfs_fuse::crypt::Encryption {
        identity,
        group,
        owner,
    })
}

/// Waits until every replica answers a status request.
async fn wait_ready(
    children: &mut Children,
    cluster: &ClusterConfig,
    a: &UpArgs,
) -> anyhow::Result<()> {
    // Wait until every replica answers a status request.
    let started = Instant::now();
    loop {
        if let Some((id, status, log)) = children.poll_exits().into_iter().next() {
            bail!(
                "replica {id} exited during startup ({status}): {} (log: {})",
                last_line(&log),
                log.display()
            );
        }
        let mut ready = 0;
        for r in &cluster.replicas {
            if query_status(cluster, r.id, Duration::from_millis(500))
                .await
                .is_ok()
            {
                ready += 1;
            }
        }
        if ready == cluster.n() {
            break;
        }
        if started.elapsed() > READY_TIMEOUT {
            bail!(
                "only {ready} of {} replicas became reachable within {} s; see the logs in {}",
                cluster.n(),
                READY_TIMEOUT.as_secs(),
                a.dir.join("logs").display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Runs until SIGINT/SIGTERM (or the mount ends, or every replica exits); then unmounts
/// first, and stops the replicas.
async fn supervise(
    children: &mut Children,
    mounted: Option<byzfs_fuse::Mounted>,
    a: &UpArgs,
) -> anyhow::Result<ExitCode> {
    let shutdown = byzfs_net::signals::shutdown(false);
    tokio::pin!(shutdown);
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let why = loop {
        tokio::select! {
            why = &mut shutdown => break why,
            () = async {
                match &mounted {
                    Some(m) => m.ended().await,
                    None => std::future::pending().await,
                }
            } => break "the file system was unmounted",
            _ = tick.tick() => {
                for (id, status, log) in children.poll_exits() {
                    eprintln!(
                        "warning: replica {id} exited ({status}): {} (log: {})",
                        last_line(&log),
                        log.display()
                    );
                }
                if children.0.iter().all(|r| r.exited.is_some()) {
                    bail!("every replica exited; see the logs in {}", a.dir.join("logs").display());
                }
            }
        }
    };
    if let (Some(m), Some(mnt)) = (mounted, &a.mount) {
        println!("{why}: unmounting {} …", mnt.display());
        if let Err(e) = m.unmount() {
            eprintln!("warning: {e:#}");
        }
    }
    println!("{why}: stopping {} replicas …", children.0.len());
    let killed = children.stop_all();
    if killed > 0 {
        println!(
            "stopped ({killed} did not exit within {} s and were killed)",
            STOP_TIMEOUT.as_secs()
        );
    } else {
        println!("stopped");
    }
    Ok(ExitCode::SUCCESS)
}

fn print_summary(
    children: &Children,
    cluster: &ClusterConfig,
    a: &UpArgs,
    service: ServiceKind,
    config: &Path,
) {
    let client = client_key_path(&a.dir, DEFAULT_CLIENT);
    let kv = format!(
        "byzfs kv --config {} --key {}",
        config.display(),
        client.display()
    );
    println!(
        "ByzFS cluster is up: {} replicas (f = {}), service {}, durability {}",
        cluster.n(),
        cluster.bft.f,
        service.name(),
        a.durability.name()
    );
    if let Some(mnt) = &a.mount {
        println!("  mounted: {}", mnt.display());
    }
    println!("  config:  {}", config.display());
    println!("  client:  {}", client.display());
    for (r, info) in children.0.iter().zip(&cluster.replicas) {
        let metrics = a
            .metrics_base_port
            .map(|b| format!("  metrics http://127.0.0.1:{}/metrics", u32::from(b) + r.id))
            .unwrap_or_default();
        println!(
            "  replica {}: {}  pid {}  log {}{metrics}",
            r.id,
            info.address,
            r.child.id(),
            r.log.display()
        );
    }
    println!("try:");
    if let Some(mnt) = &a.mount {
        println!("  ls -la {}", mnt.display());
        println!(
            "  byzfs mount --config {} SECOND_MOUNTPOINT   (a second client)",
            config.display()
        );
    } else if service == ServiceKind::Fs {
        println!(
            "  byzfs mount --config {} --key {} MOUNTPOINT",
            config.display(),
            client.display()
        );
    } else {
        println!("  {kv} put hello world");
        println!("  {kv} get hello");
    }
    println!("  byzfs status --config {}", config.display());
    if a.mount.is_some() {
        println!("Press Ctrl-C to unmount and stop the cluster.");
    } else {
        println!("Press Ctrl-C to stop the cluster.");
    }
}

/// The last non-empty line of a log file (for one-line error messages).
fn last_line(path: &Path) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| {
            t.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| "no output".into())
}
