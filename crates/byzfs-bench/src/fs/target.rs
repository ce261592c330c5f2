//! Benchmark targets: where a workload runs, started fresh and stopped on drop.
//!
//! - `local`: a directory on local disk (under `--work-dir`).
//! - `passthrough`: `bindfs BACKING MNT`, a plain FUSE passthrough of a local directory: the
//!   cost of going through FUSE at all, with no replication and no network.
//! - `norep`, `byzfs`: a local cluster mounted through FUSE by [`mount_cluster`] (the hook for
//!   the ByzFS mount; see its documentation).
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

/// How long a FUSE mount gets to appear.
const MOUNT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a stopped cluster gets to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// A kind of target.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    /// ByzFS: the replicated file service mounted through FUSE.
    Byzfs,
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

impl Durability {
    fn as_str(self) -> &'static str {
        match self {
            Durability::Disk => "disk",
            Durability::Memory => "memory",
        }
    }
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
}

impl TargetSpec {
    /// The name used in tables, JSON rows and ratios: `byzfs`, `byzfs-ro`, `norep`, `local`,
    /// `passthrough`.
    pub fn label(&self) -> String {
        match self.kind {
            TargetKind::Byzfs if self.ro_lookups => "byzfs-ro".into(),
            TargetKind::Byzfs => "byzfs".into(),
            TargetKind::Norep => "norep".into(),
            TargetKind::Local => "local".into(),
            TargetKind::Passthrough => "passthrough".into(),
        }
    }

    /// The specs `--targets` and `--ro-lookups` ask for, in the order given.
    pub fn from_args(args: &CommonArgs) -> Vec<TargetSpec> {
        let mut out = Vec::new();
        for &kind in &args.targets {
            let ros: Vec<bool> = if kind == TargetKind::Byzfs {
                args.ro_lookups.iter().map(|&o| o == OnOff::On).collect()
            } else {
                vec![false]
            };
            for ro_lookups in ros {
                let spec = TargetSpec {
                    kind,
                    ro_lookups,
                    durability: args.durability,
                    tcp_only: args.tcp_only,
                };
                if !out.iter().any(|s: &TargetSpec| s.label() == spec.label()) {
                    out.push(spec);
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
            TargetKind::Passthrough => start_bindfs(&inst),
            TargetKind::Byzfs | TargetKind::Norep => mount_cluster(&ClusterMountOptions {
                replicated: self.kind == TargetKind::Byzfs,
                ro_lookups: self.ro_lookups,
                durability: self.durability,
                tcp_only: self.tcp_only,
                dir: inst.clone(),
            }),
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
    /// The server processes (bindfs; `byzfs up`, its replicas and the `byzfs mount`
    /// daemon), whose CPU time is charged to the target.
    pub servers: Vec<i32>,
    /// Those of `servers` that are the FUSE daemon (bindfs; `byzfs mount`, where the BFT
    /// or plain client runs), so that tables can tell the client side of a mount from the
    /// replicas behind it.
    pub fuse: Vec<i32>,
    guard: Guard,
}

impl Mounted {
    /// A mount started by some other code: `dir` is used as is, `servers` are the processes
    /// serving it, and `on_drop` runs when the target is dropped (it must unmount and stop
    /// whatever it started).
    #[allow(
        dead_code,
        reason = "for an in-process ByzFS mount hook; see mount_cluster"
    )]
    pub fn custom(dir: PathBuf, servers: Vec<i32>, on_drop: Box<dyn FnOnce() + Send>) -> Mounted {
        Mounted {
            dir,
            servers,
            fuse: Vec::new(),
            guard: Guard::Custom(Some(on_drop)),
        }
    }
}

enum Guard {
    /// Remove this directory.
    Dir(PathBuf),
    /// Unmount `mnt` (FUSE), then remove `inst`.
    Fuse {
        mnt: PathBuf,
        inst: PathBuf,
    },
    /// Stop `byzfs mount` (which unmounts), make sure `mnt` is unmounted, stop `byzfs up`
    /// (and its replicas), remove `inst`.
    Cluster {
        up: Child,
        mount: Option<Child>,
        mnt: PathBuf,
        inst: PathBuf,
    },
    Custom(Option<Box<dyn FnOnce() + Send>>),
}

impl Drop for Mounted {
    fn drop(&mut self) {
        match &mut self.guard {
            Guard::Dir(d) => remove_tree(d),
            Guard::Fuse { mnt, inst } => {
                fuse_unmount(mnt);
                live_mounts().retain(|m| m != mnt);
                remove_tree(inst);
            }
            Guard::Cluster {
                up,
                mount,
                mnt,
                inst,
            } => {
                if let Some(m) = mount {
                    stop_child(m);
                }
                fuse_unmount(mnt);
                live_mounts().retain(|m| m != mnt);
                stop_child(up);
                remove_tree(inst);
            }
            Guard::Custom(f) => {
                if let Some(f) = f.take() {
                    f()
                }
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

/// `bindfs INST/backing INST/mnt`.
fn start_bindfs(inst: &Path) -> anyhow::Result<Mounted> {
    check_fuse()?;
    let backing = inst.join("backing");
    let mnt = inst.join("mnt");
    fs::create_dir(&backing)?;
    fs::create_dir(&mnt)?;
    let log = inst.join("bindfs.log");
    let out = match Command::new("bindfs").arg(&backing).arg(&mnt).output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("bindfs not found: the passthrough target needs it (`apt-get install -y bindfs fuse3`)")
        }
        Err(e) => return Err(e).context("running bindfs"),
    };
    fs::File::create(&log)?.write_all(&out.stderr)?;
    if !out.status.success() {
        bail!(
            "bindfs failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    live_mounts().push(mnt.clone());
    // bindfs daemonises after mounting; wait anyway in case it returns early.
    let guard = Guard::Fuse {
        mnt: mnt.clone(),
        inst: inst.to_path_buf(),
    };
    let mut mounted = Mounted {
        dir: mnt,
        servers: Vec::new(),
        fuse: Vec::new(),
        guard,
    };
    wait_mounted(&mounted.dir, None, &log)?;
    // bindfs forked into the background: find it by its command line.
    let want = mounted.dir.to_string_lossy().into_owned();
    mounted.servers = super::cpu::pids_where(|argv| {
        argv.first().is_some_and(|a| a.ends_with("bindfs")) && argv.contains(&want)
    });
    mounted.fuse = mounted.servers.clone();
    Ok(mounted)
}

/// Environment variable naming the program [`mount_cluster`] runs instead of this binary.
pub const UP_ENV: &str = "BYZFS_FSBENCH_UP";

/// What the ByzFS/NO-REP mount hook is asked for.
#[derive(Debug, Clone)]
pub struct ClusterMountOptions {
    /// `true`: ByzFS (3f+1 replicas, f = 1); `false`: NO-REP (one unreplicated server, same
    /// file service and FUSE client).
    pub replicated: bool,
    /// Read-only optimisation for lookups (ByzFS only).
    pub ro_lookups: bool,
    /// Where servers keep their state.
    pub durability: Durability,
    /// No Unix sockets: every link over TCP.
    pub tcp_only: bool,
    /// A fresh, empty directory owned by this target (cluster files, logs, mount point).
    pub dir: PathBuf,
}

/// The hook for the ByzFS and NO-REP targets: starts a local cluster, mounts it through
/// FUSE, and returns the mount directory with a guard that stops it all.
///
/// ByzFS: `byzfs up --service fs` with the arguments of [`cluster_up_args`] (4 replicas on
/// loopback) until it prints "Press Ctrl-C", then `byzfs mount --config CLUSTER.toml MNT`
/// until `MNT` is a mount point. On drop: SIGTERM to `byzfs mount` (it unmounts),
/// `fusermount3 -u` if the mount is still there, SIGTERM to `byzfs up` (it stops its
/// replicas; SIGKILL after [`STOP_TIMEOUT`]). The program is this binary, or
/// `$BYZFS_FSBENCH_UP` if set (the tests use a stand-in).
///
/// NO-REP: see [`mount_unreplicated`]. Strict lookups (`ro_lookups` false): `byzfs mount
/// --strict`, which orders every operation.
pub fn mount_cluster(opts: &ClusterMountOptions) -> anyhow::Result<Mounted> {
    if !opts.replicated {
        // One server: the read-only optimisation does not apply.
        return mount_unreplicated(opts);
    }
    let exe = match std::env::var_os(UP_ENV) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => std::env::current_exe().context("locating the byzfs binary")?,
    };
    check_fuse()?;
    let mnt = opts.dir.join("mnt");
    fs::create_dir_all(&mnt)?;
    let up_log = opts.dir.join("up.log");
    let mut up = Command::new(&exe)
        .args(cluster_up_args(opts))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(fs::File::create(&up_log)?)
        .spawn()
        .context("starting `byzfs up --service fs`")?;
    let stdout = up.stdout.take().expect("piped");
    let mut mounted = Mounted {
        dir: mnt.clone(),
        servers: Vec::new(),
        fuse: Vec::new(),
        guard: Guard::Cluster {
            up,
            mount: None,
            mnt: mnt.clone(),
            inst: opts.dir.clone(),
        },
    };
    let Guard::Cluster { up, mount, .. } = &mut mounted.guard else {
        unreachable!()
    };
    // Wait for "Press Ctrl-C …", keeping what `up` prints in up.log's stead for errors.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let start = Instant::now();
    let mut printed = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) if line.starts_with("Press Ctrl-C") => break,
            Ok(line) => printed.push(line),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                let _ = up.wait();
                bail!("`byzfs up` exited before it was up: {}", last_line(&up_log));
            }
        }
        if start.elapsed() > MOUNT_TIMEOUT {
            bail!(
                "`byzfs up` not up after {MOUNT_TIMEOUT:?}: {}",
                printed.last().map_or("", String::as_str)
            );
        }
    }
    let up_pid = up.id() as i32;
    let mount_log = opts.dir.join("mount.log");
    let logf = fs::File::create(&mount_log)?;
    let m = mount.insert(
        Command::new(&exe)
            .arg("mount")
            .args((!opts.ro_lookups).then_some("--strict"))
            .arg("--config")
            .arg(opts.dir.join("cluster").join("cluster.toml"))
            .arg(&mnt)
            .stdin(Stdio::null())
            .stdout(logf.try_clone()?)
            .stderr(logf)
            .spawn()
            .context("starting `byzfs mount`")?,
    );
    let mount_pid = m.id() as i32;
    live_mounts().push(mnt.clone());
    wait_mounted(&mnt, Some(m), &mount_log)?;
    // Everything serving the mount: the FUSE daemon, `byzfs up` and its replicas.
    mounted.servers = super::cpu::descendants(up_pid);
    mounted.servers.extend([up_pid, mount_pid]);
    mounted.fuse = vec![mount_pid];
    Ok(mounted)
}

/// NO-REP: `byzfs keygen` (a cluster file whose replica 0 address and key the server uses),
/// `byzfs unreplicated --service fs` until it logs "listening", then `byzfs mount
/// --unreplicated`. The same file service, transport, wire format and FUSE adapter as ByzFS,
/// one process, with the same `--durability` as the replicas (in `disk` mode it stores and
/// fsyncs every executed request before replying, one group commit per turn).
fn mount_unreplicated(opts: &ClusterMountOptions) -> anyhow::Result<Mounted> {
    let exe = std::env::current_exe().context("locating the byzfs binary")?;
    check_fuse()?;
    let cdir = opts.dir.join("cluster");
    let keygen = Command::new(&exe)
        .args(["keygen", "--replicas", "4", "--base-port", "0", "--out"])
        .arg(&cdir)
        .args(opts.tcp_only.then_some("--tcp-only"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .context("running `byzfs keygen`")?;
    if !keygen.status.success() {
        bail!(
            "`byzfs keygen` failed: {}",
            String::from_utf8_lossy(&keygen.stderr).trim()
        );
    }
    let config = cdir.join("cluster.toml");
    let mnt = opts.dir.join("mnt");
    fs::create_dir_all(&mnt)?;
    let server_log = opts.dir.join("server.log");
    let server = Command::new(&exe)
        .arg("unreplicated")
        .arg("--config")
        .arg(&config)
        .args(["--service", "fs", "--durability", opts.durability.as_str()])
        .arg("--data")
        .arg(opts.dir.join("data"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(&server_log)?)
        .spawn()
        .context("starting `byzfs unreplicated --service fs`")?;
    let mut mounted = Mounted {
        dir: mnt.clone(),
        servers: Vec::new(),
        fuse: Vec::new(),
        guard: Guard::Cluster {
            up: server,
            mount: None,
            mnt: mnt.clone(),
            inst: opts.dir.clone(),
        },
    };
    let Guard::Cluster { up, mount, .. } = &mut mounted.guard else {
        unreachable!()
    };
    let start = Instant::now();
    while !fs::read_to_string(&server_log)
        .unwrap_or_default()
        .contains("listening")
    {
        if let Ok(Some(_)) = up.try_wait() {
            bail!(
                "`byzfs unreplicated` exited at start: {}",
                last_line(&server_log)
            );
        }
        if start.elapsed() > MOUNT_TIMEOUT {
            bail!("`byzfs unreplicated` not listening after {MOUNT_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let server_pid = up.id() as i32;
    let mount_log = opts.dir.join("mount.log");
    let logf = fs::File::create(&mount_log)?;
    let m = mount.insert(
        Command::new(&exe)
            .args(["mount", "--unreplicated", "--config"])
            .arg(&config)
            .arg(&mnt)
            .stdin(Stdio::null())
            .stdout(logf.try_clone()?)
            .stderr(logf)
            .spawn()
            .context("starting `byzfs mount --unreplicated`")?,
    );
    let mount_pid = m.id() as i32;
    live_mounts().push(mnt.clone());
    wait_mounted(&mnt, Some(m), &mount_log)?;
    mounted.servers = vec![server_pid, mount_pid];
    mounted.fuse = vec![mount_pid];
    Ok(mounted)
}

/// The arguments of `byzfs up` in [`mount_cluster`], in one place:
/// `up --service fs --replicas 4 --base-port 0 --durability disk|memory --dir DIR/cluster`.
pub fn cluster_up_args(opts: &ClusterMountOptions) -> Vec<std::ffi::OsString> {
    let mut a: Vec<std::ffi::OsString> = ["up", "--service", "fs", "--replicas", "4"]
        .into_iter()
        .map(Into::into)
        .collect();
    a.extend(["--base-port".into(), "0".into()]);
    a.extend(["--durability".into(), opts.durability.as_str().into()]);
    if opts.tcp_only {
        a.push("--tcp-only".into());
    }
    a.push("--dir".into());
    a.push(opts.dir.join("cluster").into());
    a
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

/// FUSE mounts started here and not yet unmounted (for the interrupt handler).
fn live_mounts() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    static MOUNTS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    MOUNTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// On SIGINT or SIGTERM: unmount the FUSE mounts started here (bindfs runs in its own
/// session, so Ctrl-C does not reach it and its mount would outlive us), remove `work`, and
/// exit with status 130. `make`, `postmark` and `byzfs up` are in our process group and get
/// the terminal's SIGINT themselves (`byzfs up` unmounts on it).
fn install_interrupt_cleanup(work: &Path) {
    let work = work.to_path_buf();
    std::thread::spawn(move || {
        let Ok(rt) = byzfs_net::signals::runtime() else {
            return;
        };
        let why = rt.block_on(byzfs_net::signals::shutdown(false));
        eprintln!("\n{why}: unmounting and cleaning up {}", work.display());
        let mounts: Vec<PathBuf> = live_mounts().clone();
        for m in &mounts {
            fuse_unmount(m);
        }
        remove_tree(&work);
        std::process::exit(130);
    });
}
