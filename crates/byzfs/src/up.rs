//! `byzfs up`: a local cluster of `byzfs replica` child processes on loopback.
//!
//! Keys are generated on first use. Children run in their own process group (so a terminal's
//! Ctrl-C reaches only `up`, which then stops them in order) and hold a pipe as stdin: if
//! `up` dies however it dies, the pipe closes and every replica exits (`--exit-with-parent`),
//! so no replica outlives it. On SIGINT/SIGTERM `up` forwards SIGTERM, waits, and only then
//! kills stragglers.
//!
//! A replica that exits is restarted with the same arguments after a back-off, and left down
//! after repeated quick exits (`crate::restart_policy`; README "When a replica dies"); `up`
//! itself keeps running, and keeps its mount, whatever its replicas do. `up.toml` in the
//! cluster directory (`crate::run_file`) says how it runs each replica, for `byzfs status`.
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

use crate::restart_policy::{Backoff, Decision, RestartPolicy};
use crate::run_file::{self, RunFile, RunReplica, RUN_FILE};

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

/// One replica: how `up` runs it, and its process while it runs.
struct Replica {
    id: u32,
    /// Its arguments after the executable, the same at every restart (absolute paths; without
    /// `--exit-with-parent`, which [`spawn`] adds, so the run file's command works by hand).
    args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
    /// When `child` started.
    started: Instant,
    backoff: Backoff,
    state: State,
}

#[derive(Clone, Debug)]
enum State {
    Running,
    /// Exited; started again at `at`.
    Restarting {
        at: Instant,
        delay: Duration,
    },
    /// Exited too often: left down (the line says why).
    GivenUp(String),
}

/// The replicas; dropping this stops them (so every error path cleans up).
struct Children {
    exe: PathBuf,
    replicas: Vec<Replica>,
    /// `up.toml` (`crate::run_file`), removed on drop.
    run_file: PathBuf,
}

/// Starts `exe args… --exit-with-parent`, its output appended to `log`, in its own process
/// group (module docs).
fn spawn(exe: &Path, args: &[String], log: &Path) -> anyhow::Result<Child> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("cannot open {}", log.display()))?;
    Ok(Command::new(exe)
        .args(args)
        .arg("--exit-with-parent")
        .stdin(Stdio::piped())
        .stdout(file.try_clone()?)
        .stderr(file)
        .process_group(0)
        .spawn()?)
}

impl Children {
    /// Reaps exited children; returns the indices of the ones that just exited.
    fn reap(&mut self) -> Vec<(usize, ExitStatus)> {
        let mut out = Vec::new();
        for (i, r) in self.replicas.iter_mut().enumerate() {
            if let Some(c) = &mut r.child {
                if let Ok(Some(s)) = c.try_wait() {
                    r.child = None;
                    out.push((i, s));
                }
            }
        }
        out
    }

    /// Replica `i`'s whole command: the executable, then its arguments.
    fn argv(&self, i: usize) -> Vec<String> {
        let mut argv = vec![self.exe.display().to_string()];
        argv.extend(self.replicas[i].args.iter().cloned());
        argv
    }

    /// The command that runs replica `i` by hand, as one shell line, in the background with
    /// its output appended to its log as `up` does.
    fn hand_command(&self, i: usize) -> String {
        format!(
            "{} >>{} 2>&1 &",
            run_file::shell_line(&self.argv(i)),
            run_file::shell_line(&[self.replicas[i].log.display().to_string()])
        )
    }

    /// Rewrites `up.toml`; a failure only costs `byzfs status` its restart commands.
    fn write_run_file(&self) {
        let run = RunFile {
            pid: std::process::id(),
            replicas: self
                .replicas
                .iter()
                .enumerate()
                .map(|(i, r)| RunReplica {
                    id: r.id,
                    command: self.argv(i),
                    log: r.log.clone(),
                    pid: r.child.as_ref().map(Child::id),
                    state: match &r.state {
                        State::Running => "running".into(),
                        State::Restarting { delay, .. } => format!(
                            "exited; byzfs up (pid {}) restarts it {:.1} s after the exit",
                            std::process::id(),
                            delay.as_secs_f64()
                        ),
                        State::GivenUp(why) => {
                            format!("{why}; restart it by hand: {}", self.hand_command(i))
                        }
                    },
                })
                .collect(),
        };
        if let Err(e) = run.write(&self.run_file) {
            tracing::warn!("cannot write {}: {e:#}", self.run_file.display());
        }
    }

    /// Handles exits (restart later, or give up) and starts the replicas whose delay is over;
    /// `quorum` only words the give-up line.
    fn supervise_step(&mut self, quorum: usize) {
        let now = Instant::now();
        let mut changed = false;
        for (i, status) in self.reap() {
            changed = true;
            let r = &mut self.replicas[i];
            let id = r.id;
            match r.backoff.on_exit(r.started, now) {
                Decision::RestartIn(delay) => {
                    tracing::warn!(
                        "replica {id} exited ({status}); restarting it in {:.1} s",
                        delay.as_secs_f64()
                    );
                    r.state = State::Restarting {
                        at: now + delay,
                        delay,
                    };
                }
                Decision::GiveUp { exits } => {
                    let why = format!(
                        "byzfs up (pid {}) gave up on it: it exited {exits} times within {} s, \
                         the last time {status}",
                        std::process::id(),
                        r.backoff.policy().window.as_secs()
                    );
                    r.state = State::GivenUp(why.clone());
                    self.give_up_line(i, &why, quorum);
                }
            }
        }
        for i in 0..self.replicas.len() {
            let r = &mut self.replicas[i];
            let State::Restarting { at, .. } = r.state else {
                continue;
            };
            if at > now {
                continue;
            }
            changed = true;
            match spawn(&self.exe, &r.args, &r.log) {
                Ok(child) => {
                    tracing::info!("replica {} restarted: pid {}", r.id, child.id());
                    r.child = Some(child);
                    r.started = now;
                    r.state = State::Running;
                }
                Err(e) => {
                    let why = format!(
                        "byzfs up (pid {}) could not restart it: {e:#}",
                        std::process::id()
                    );
                    r.state = State::GivenUp(why.clone());
                    self.give_up_line(i, &why, quorum);
                }
            }
        }
        if changed {
            self.write_run_file();
        }
    }

    /// The one line that says `up` left replica `i` down, why, and what to do.
    fn give_up_line(&self, i: usize, why: &str, quorum: usize) {
        let r = &self.replicas[i];
        let left = self
            .replicas
            .iter()
            .filter(|r| !matches!(r.state, State::GivenUp(_)))
            .count();
        let cannot = if left < quorum {
            format!(
                "; with {left} replicas left the cluster cannot make progress (it needs \
                 {quorum})"
            )
        } else {
            String::new()
        };
        tracing::error!(
            "replica {} stays down: {why}; its log ({}) ends: {}{cannot}; restart it by hand: {}",
            r.id,
            r.log.display(),
            last_lines(&r.log, 3),
            self.hand_command(i)
        );
    }

    /// SIGTERM, wait up to [`STOP_TIMEOUT`], SIGKILL the rest, reap everything.
    fn stop_all(&mut self) -> usize {
        for c in self.replicas.iter().filter_map(|r| r.child.as_ref()) {
            if let Ok(pid) = i32::try_from(c.id()) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
            }
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline && self.replicas.iter().any(|r| r.child.is_some()) {
            self.reap();
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut killed = 0;
        for r in &mut self.replicas {
            if let Some(mut c) = r.child.take() {
                let _ = c.kill();
                let _ = c.wait();
                killed += 1;
            }
        }
        killed
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        self.stop_all();
        let _ = std::fs::remove_file(&self.run_file);
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
    // Absolute paths in the replicas' arguments, so that the run file's commands work from
    // anywhere (`byzfs status` prints them).
    let abs_dir = std::path::absolute(&a.dir)
        .with_context(|| format!("cannot resolve {}", a.dir.display()))?;
    let abs_data = abs_dir.join("data");
    let mut children = Children {
        exe,
        replicas: Vec::new(),
        run_file: abs_dir.join(RUN_FILE),
    };
    for r in &cluster.replicas {
        let log = abs_dir.join("logs").join(format!("replica-{}.log", r.id));
        let mut args: Vec<String> = vec![
            "replica".into(),
            "--config".into(),
            abs_dir.join(CLUSTER_FILE).display().to_string(),
            "--id".into(),
            r.id.to_string(),
            "--key".into(),
            replica_key_path(&abs_dir, r.id).display().to_string(),
            "--data".into(),
            abs_data
                .join(format!("replica-{}", r.id))
                .display()
                .to_string(),
            "--service".into(),
            service.name().into(),
            "--durability".into(),
            a.durability.name().into(),
        ];
        if service == ServiceKind::Fs {
            // The root directory belongs to whoever runs `up`, so they can use the mount.
            args.push("--fs-root-owner".into());
            args.push(format!("{uid}:{gid}"));
        }
        if let Some(base) = a.metrics_base_port {
            let port = base
                .checked_add(r.id as u16)
                .context("--metrics-base-port too high")?;
            args.push("--metrics".into());
            args.push(format!("127.0.0.1:{port}"));
        }
        let child = spawn(&children.exe, &args, &log)
            .with_context(|| format!("cannot start replica {}", r.id))?;
        children.replicas.push(Replica {
            id: r.id,
            args,
            log,
            child: Some(child),
            started: Instant::now(),
            backoff: Backoff::new(RestartPolicy::default()),
            state: State::Running,
        });
    }
    children.write_run_file();
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
                delegate_files: !a.cache.no_file_delegations,
                threads: byzfs_fuse::DEFAULT_THREADS,
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
    rt.block_on(supervise(&mut children, mounted, &a, cluster.bft.quorum()))
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
        // At startup an exit is a setup problem (a port in use, a bad key): say it at once.
        if let Some((i, status)) = children.reap().into_iter().next() {
            let r = &children.replicas[i];
            bail!(
                "replica {} exited during startup ({status}): {} (log: {})",
                r.id,
                last_lines(&r.log, 1),
                r.log.display()
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

/// Runs until SIGINT/SIGTERM or the mount ends, restarting replicas that exit (README "When
/// a replica dies"); then unmounts first, and stops the replicas.
async fn supervise(
    children: &mut Children,
    mounted: Option<byzfs_fuse::Mounted>,
    a: &UpArgs,
    quorum: usize,
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
            _ = tick.tick() => children.supervise_step(quorum),
        }
    };
    if let (Some(m), Some(mnt)) = (mounted, &a.mount) {
        println!("{why}: unmounting {} …", mnt.display());
        if let Err(e) = m.unmount() {
            eprintln!("warning: {e:#}");
        }
    }
    println!("{why}: stopping {} replicas …", children.replicas.len());
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
    // README "Quick start": the lines work as printed, with or without byzfs on PATH.
    let byzfs = command_name(&children.exe);
    let kv = format!(
        "{byzfs} kv --config {} --key {}",
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
    for (r, info) in children.replicas.iter().zip(&cluster.replicas) {
        let metrics = a
            .metrics_base_port
            .map(|b| format!("  metrics http://127.0.0.1:{}/metrics", u32::from(b) + r.id))
            .unwrap_or_default();
        println!(
            "  replica {}: {}  pid {}  log {}{metrics}",
            r.id,
            info.address,
            r.child.as_ref().map_or(0, Child::id),
            r.log.display()
        );
    }
    println!("try:");
    if let Some(mnt) = &a.mount {
        println!("  ls -la {}", mnt.display());
        println!(
            "  {byzfs} mount --config {} SECOND_MOUNTPOINT   (a second client)",
            config.display()
        );
    } else if service == ServiceKind::Fs {
        println!(
            "  {byzfs} mount --config {} --key {} MOUNTPOINT",
            config.display(),
            client.display()
        );
    } else {
        println!("  {kv} put hello world");
        println!("  {kv} get hello");
    }
    println!("  {byzfs} status --config {}", config.display());
    if a.mount.is_some() {
        println!("Press Ctrl-C to unmount and stop the cluster.");
    } else {
        println!("Press Ctrl-C to stop the cluster.");
    }
}

/// `byzfs` if that name on `PATH` is `exe`, else `exe`'s full path.
fn command_name(exe: &Path) -> String {
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("byzfs"))
            .find(|c| c.is_file())
    });
    let same =
        on_path.is_some_and(|c| std::fs::canonicalize(c).ok() == std::fs::canonicalize(exe).ok());
    if same {
        "byzfs".into()
    } else {
        run_file::shell_line(&[exe.display().to_string()])
    }
}

/// The last `n` non-empty lines of a log file, joined with ` | ` (for one-line messages).
fn last_lines(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut lines: Vec<&str> = text
        .lines()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .take(n)
        .collect();
    if lines.is_empty() {
        return "no output".into();
    }
    lines.reverse();
    lines.join(" | ")
}
