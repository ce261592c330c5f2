//! A local cluster started with the real `byzfs up`, for tests of whole processes.

#![allow(dead_code)]

use byzfs_bft::services::kv::{KvOp, KvResult};
use byzfs_net::cluster::ClusterConfig;
use byzfs_net::handshake::query_status;
use byzfs_net::keygen::{client_key_path, DEFAULT_CLIENT};
use byzfs_net::{handshake, ByzClient, ClientCredential, NodeStatus};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_byzfs");
/// Deadline of anything a test waits for.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// `byzfs up` and its replicas; stopped (SIGTERM, then SIGKILL) when dropped.
pub struct Up {
    pub dir: tempfile::TempDir,
    pub child: Child,
    /// Replica process ids, by replica id.
    pub pids: Vec<i32>,
    pub config: PathBuf,
    pub cluster: ClusterConfig,
    /// Where `--mount` mounted the file service (see [`Up::start_mounted`]).
    pub mountpoint: Option<PathBuf>,
    /// `byzfs up`'s own stderr (its log and the in-process mount's): a file, never a pipe
    /// nobody reads, which would block `up` — and every FUSE operation — once full.
    pub log: PathBuf,
    _watchdog: Watchdog,
}

impl Up {
    /// `byzfs up --replicas 4 --dir TMP --base-port 0 ARGS…`, once it says it is up.
    pub fn start(args: &[&str]) -> Up {
        Up::start_in(tempfile::tempdir().unwrap(), args, None)
    }

    /// `byzfs up … --mount TMP/mnt ARGS…` (the file service, mounted by `up` itself), once
    /// it says it is up, which is after the mount.
    pub fn start_mounted(args: &[&str]) -> Up {
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("mnt");
        let mut all = vec!["--mount", mnt.to_str().unwrap()];
        all.extend_from_slice(args);
        Up::start_in(dir, &all, Some(mnt.clone()))
    }

    fn start_in(dir: tempfile::TempDir, args: &[&str], mountpoint: Option<PathBuf>) -> Up {
        let cdir = dir.path().join("c");
        let log = dir.path().join("up.log");
        let mut child = Command::new(BIN)
            .args(["up", "--replicas", "4", "--base-port", "0", "--dir"])
            .arg(&cdir)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            // Keeps draining after the start: `byzfs up` must not write into a closed pipe.
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let mut pids = Vec::new();
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = rx.recv_timeout(left) else {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "byzfs up did not come up: {}",
                    tail(&std::fs::read_to_string(&log).unwrap_or_default())
                );
            };
            if let Some(rest) = line.split(" pid ").nth(1) {
                let pid = rest.split_whitespace().next().unwrap();
                pids.push(pid.parse::<i32>().unwrap());
            }
            if line.starts_with("Press Ctrl-C") {
                break;
            }
        }
        let config = cdir.join("cluster.toml");
        let cluster = ClusterConfig::load(&config).unwrap();
        let _watchdog = Watchdog::start(child.id(), log.clone(), config.clone(), cdir.join("logs"));
        Up {
            dir,
            child,
            pids,
            config,
            cluster,
            mountpoint,
            log,
            _watchdog,
        }
    }

    pub fn signal(&self, replica: usize, sig: Signal) {
        kill(Pid::from_raw(self.pids[replica]), sig).unwrap();
    }

    /// The status replica `i` reports (panics if it does not answer in time).
    pub async fn status(&self, i: u32) -> NodeStatus {
        handshake::query_status(&self.cluster, i, Duration::from_secs(5))
            .await
            .unwrap_or_else(|e| panic!("replica {i} status: {e}"))
    }

    /// Polls replica `i`'s status until `cond` holds.
    pub async fn wait_status(
        &self,
        i: u32,
        mut cond: impl FnMut(&NodeStatus) -> bool,
    ) -> NodeStatus {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let s = self.status(i).await;
            if cond(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "replica {i} never got there: {s:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A client with the default credential.
    pub async fn client(&self) -> ByzClient {
        self.client_with(&self.cluster).await
    }

    /// A client of this cluster that uses `cluster`'s protocol parameters (the client-side
    /// ones, such as `read_only_to_quorum`, may differ from the replicas').
    pub async fn client_with(&self, cluster: &ClusterConfig) -> ByzClient {
        let key = self.config.with_file_name("client-1.key");
        let cred = ClientCredential::load(&key, cluster).unwrap();
        tokio::time::timeout(TIMEOUT, ByzClient::connect(cluster, &cred))
            .await
            .expect("connect timed out")
            .expect("connect")
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Whether `up` still ran (a mount gone mid-test: did the process die, and how?).
            let state = match self.child.try_wait() {
                Ok(Some(status)) => format!("exited: {status}"),
                Ok(None) => "still running".to_string(),
                Err(e) => format!("unknown: {e}"),
            };
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            eprintln!("byzfs up ({state}); its log:\n{}", tail(&log));
        }
        for &p in &self.pids {
            // A stopped replica would ignore SIGTERM until continued.
            let _ = kill(Pid::from_raw(p), Signal::SIGCONT);
        }
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        for &p in &self.pids {
            let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
        }
        // `up` killed (by the watchdog, say) leaves its mount behind, disconnected.
        if let Some(mnt) = self.mountpoint.as_ref().filter(|m| is_mounted(m)) {
            let _ = Command::new("fusermount3").arg("-uz").arg(mnt).status();
        }
    }
}

pub async fn put(c: &mut ByzClient, k: &str, v: &str) {
    let op = KvOp::Put {
        key: k.as_bytes().to_vec(),
        value: v.as_bytes().to_vec(),
    };
    let r = tokio::time::timeout(TIMEOUT, c.invoke(op.encode(), false))
        .await
        .expect("put timed out")
        .expect("put");
    assert_eq!(KvResult::decode(&r), Some(KvResult::Ok));
}

pub async fn get(c: &mut ByzClient, k: &str) -> Option<Vec<u8>> {
    let op = KvOp::Get {
        key: k.as_bytes().to_vec(),
    };
    let r = tokio::time::timeout(TIMEOUT, c.invoke(op.encode(), true))
        .await
        .expect("get timed out")
        .expect("get");
    match KvResult::decode(&r) {
        Some(KvResult::Value(v)) => v,
        other => panic!("unexpected get result {other:?}"),
    }
}

/// Bound on every wait of the process tests ([`Procs`]).
pub const DEADLINE: Duration = Duration::from_secs(90);

/// One process test at a time per test binary: each runs four replica processes.
/// Turns a hung test into a failing one with a diagnosis, instead of a silent stall until
/// CI's limit: after [`watchdog_limit`] it prints `byzfs up`'s log, every replica's status
/// and log tail and the stacks of `up`'s threads (it hosts the mount), then kills `up`, so
/// that calls blocked in the mount return (ENOTCONN) and the test fails where it hung.
struct Watchdog {
    // Dropping the sender (the test ended) stops the thread.
    _stop: mpsc::Sender<()>,
}

/// How long one cluster may live in a test: `BYZFS_TEST_WATCHDOG_S`, default 15 minutes
/// (the slowest test takes about 3 on this 2-core machine).
fn watchdog_limit() -> Duration {
    let s = std::env::var("BYZFS_TEST_WATCHDOG_S")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(900);
    Duration::from_secs(s)
}

impl Watchdog {
    fn start(pid: u32, log: PathBuf, config: PathBuf, logs: PathBuf) -> Watchdog {
        let (tx, rx) = mpsc::channel::<()>();
        let limit = watchdog_limit();
        std::thread::spawn(move || {
            if rx.recv_timeout(limit) != Err(mpsc::RecvTimeoutError::Timeout) {
                return;
            }
            let mut report = format!("WATCHDOG: cluster still running after {limit:?}\n");
            if let Ok(out) = Command::new("df").args(["-h", "/tmp", "."]).output() {
                report += &String::from_utf8_lossy(&out.stdout);
            }
            let up_log = std::fs::read_to_string(&log).unwrap_or_default();
            report += &format!("--- byzfs up's log:\n{}\n", tail(&up_log));
            if let Ok(out) = Command::new(BIN)
                .arg("status")
                .arg("--config")
                .arg(&config)
                .output()
            {
                report += &format!(
                    "--- byzfs status:\n{}\n",
                    String::from_utf8_lossy(&out.stdout)
                );
            }
            let mut files: Vec<_> = std::fs::read_dir(&logs)
                .map(|d| d.flatten().map(|e| e.path()).collect())
                .unwrap_or_default();
            files.sort();
            for f in files {
                let text = std::fs::read_to_string(&f).unwrap_or_default();
                report += &format!("--- {}:\n{}\n", f.display(), tail(&text));
            }
            let gdb = Command::new("timeout")
                .args(["60", "gdb", "-p", &pid.to_string(), "-batch"])
                .args(["-ex", "thread apply all bt 20"])
                .stdin(Stdio::null())
                .output();
            if let Ok(out) = gdb {
                report += &format!(
                    "--- stacks of byzfs up:\n{}\n",
                    String::from_utf8_lossy(&out.stdout)
                );
            }
            eprintln!("{report}");
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
        });
        Watchdog { _stop: tx }
    }
}

static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

pub fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// A keygen'd cluster directory and its four `byzfs replica` processes, started one by one
/// (so a test can kill and restart each); all killed on drop.
pub struct Procs {
    pub dir: tempfile::TempDir,
    pub mode: &'static str,
    pub service: &'static str,
    /// Extra arguments of each replica (e.g. a test-only `--byzantine` flag).
    pub extra: Vec<Vec<String>>,
    pub children: Vec<Option<Child>>,
    pub cluster: ClusterConfig,
}

impl Procs {
    /// Four `--service kv` replicas in durability `mode`, reachable.
    pub fn new(mode: &'static str) -> Procs {
        Procs::with(mode, "kv", vec![Vec::new(); 4])
    }

    /// Four replicas of `service` in durability `mode`, replica `i` with `extra[i]`.
    pub fn with(mode: &'static str, service: &'static str, extra: Vec<Vec<String>>) -> Procs {
        Procs::with_protocol(mode, service, extra, &[])
    }

    /// As [`Procs::with`], with `protocol`'s `(name, value)` pairs set in the cluster file's
    /// `[protocol]` table before anything starts.
    pub fn with_protocol(
        mode: &'static str,
        service: &'static str,
        extra: Vec<Vec<String>>,
        protocol: &[(&str, &str)],
    ) -> Procs {
        Procs::prepared(mode, service, extra, protocol, |_| {})
    }

    /// As [`Procs::with_protocol`]; `prepare` runs after keygen, before any replica starts
    /// (to place a data directory on another file system, say).
    pub fn prepared(
        mode: &'static str,
        service: &'static str,
        extra: Vec<Vec<String>>,
        protocol: &[(&str, &str)],
        prepare: impl FnOnce(&Procs),
    ) -> Procs {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(BIN)
            .args(["keygen", "--replicas", "4", "--base-port", "0", "--out"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let file = dir.path().join("cluster.toml");
        for (name, value) in protocol {
            let text = std::fs::read_to_string(&file).unwrap();
            let prefix = format!("{name} = ");
            assert!(
                text.lines().any(|l| l.starts_with(&prefix)),
                "keygen wrote no {name}"
            );
            let edited: Vec<String> = text
                .lines()
                .map(|l| {
                    if l.starts_with(&prefix) {
                        format!("{prefix}{value}")
                    } else {
                        l.to_string()
                    }
                })
                .collect();
            std::fs::write(&file, edited.join("\n") + "\n").unwrap();
        }
        let cluster = ClusterConfig::load(&file).unwrap();
        let mut p = Procs {
            dir,
            mode,
            service,
            extra,
            children: (0..4).map(|_| None).collect(),
            cluster,
        };
        prepare(&p);
        for i in 0..4 {
            p.start(i);
        }
        p.wait_reachable(&[0, 1, 2, 3]);
        p
    }

    pub fn config(&self) -> PathBuf {
        self.dir.path().join("cluster.toml")
    }

    pub fn data(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("data-{i}"))
    }

    pub fn start(&mut self, i: usize) {
        assert!(self.children[i].is_none());
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("replica-{i}.log")))
            .unwrap();
        let child = Command::new(BIN)
            .arg("replica")
            .arg("--config")
            .arg(self.config())
            .args(["--id", &i.to_string(), "--durability", self.mode])
            .args(["--service", self.service])
            .args(&self.extra[i])
            .env(
                "RUST_LOG",
                std::env::var("BYZFS_TEST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .arg("--data")
            .arg(self.data(i))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.children[i] = Some(child);
    }

    /// SIGKILL, then reap (no clean shutdown).
    pub fn kill(&mut self, ids: &[usize]) {
        let mut killed = Vec::new();
        for &i in ids {
            let mut c = self.children[i].take().expect("running");
            c.kill().unwrap();
            killed.push(c);
        }
        for mut c in killed {
            c.wait().unwrap();
        }
    }

    /// SIGTERM (a clean shutdown), then reap.
    pub fn terminate(&mut self, i: usize) {
        let mut c = self.children[i].take().expect("running");
        let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGTERM);
        let start = Instant::now();
        while c.try_wait().unwrap().is_none() {
            if start.elapsed() > DEADLINE {
                let _ = c.kill();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn status(&self, i: usize) -> Option<NodeStatus> {
        rt().block_on(query_status(
            &self.cluster,
            i as u32,
            Duration::from_millis(500),
        ))
        .ok()
    }

    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("replica-{i}.log")))
            .unwrap_or_default()
    }

    /// Polls until `cond` holds on the statuses of all four replicas.
    pub fn wait_until(&self, what: &str, cond: impl Fn(&[NodeStatus]) -> bool) -> Vec<NodeStatus> {
        let start = Instant::now();
        loop {
            let all: Vec<NodeStatus> = (0..4).filter_map(|i| self.status(i)).collect();
            if all.len() == 4 && cond(&all) {
                return all;
            }
            if start.elapsed() > DEADLINE {
                // The replica furthest behind: its full status (drop counters included) and log.
                let behind = all.iter().min_by_key(|s| s.last_executed);
                panic!(
                    "timed out waiting for {what}; (replica, view, has_new_view, executed, \
                     tentative, stable, fetching, digest): {:#?}\nreplica furthest behind: \
                     {behind:#?}\nits log:\n{}",
                    all.iter()
                        .map(|s| (
                            s.replica,
                            s.view,
                            s.has_new_view,
                            s.last_executed,
                            s.last_tentative,
                            s.last_stable,
                            s.fetching,
                            s.state_digest.get(..16).unwrap_or("")
                        ))
                        .collect::<Vec<_>>(),
                    behind
                        .map(|s| tail(&self.log(s.replica as usize)))
                        .unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn wait_reachable(&mut self, ids: &[usize]) {
        let start = Instant::now();
        for &i in ids {
            while self.status(i).is_none() {
                assert!(
                    start.elapsed() < DEADLINE,
                    "replica {i} not reachable: {}",
                    tail(&self.log(i))
                );
                let exited = self.children[i]
                    .as_mut()
                    .is_some_and(|c| c.try_wait().ok().flatten().is_some());
                assert!(!exited, "replica {i} exited: {}", tail(&self.log(i)));
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    pub fn credential(&self) -> ClientCredential {
        ClientCredential::load(
            &client_key_path(self.dir.path(), DEFAULT_CLIENT),
            &self.cluster,
        )
        .unwrap()
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for mut c in self.children.drain(..).flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            // Keep the logs and data of a failed run.
            self.dir.disable_cleanup(true);
            eprintln!("kept {}", self.dir.path().display());
        }
    }
}

/// Whether FUSE mounts can be made here (`/dev/fuse` and `fusermount3`).
pub fn fuse_available() -> bool {
    Path::new("/dev/fuse").exists()
        && std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("fusermount3").exists()))
}

/// Whether a FUSE test must be skipped here (no FUSE); says so on stderr.
pub fn skip_without_fuse() -> bool {
    let skip = !fuse_available();
    if skip {
        eprintln!("skipped: FUSE is unavailable (no /dev/fuse or no fusermount3)");
    }
    skip
}

pub fn is_mounted(mnt: &Path) -> bool {
    std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().nth(1) == mnt.to_str())
}

/// A `byzfs mount` process; unmounted (SIGTERM, then `fusermount3 -uz`) when dropped.
pub struct Mount {
    pub child: Child,
    pub mnt: PathBuf,
}

impl Mount {
    /// Mounts the cluster of `config` on `mnt` (created) with the default credential, as a
    /// soft mount (2 minutes): a cluster that stops answering fails the test, never hangs it.
    pub fn start(config: &Path, mnt: &Path, log: &Path) -> Mount {
        Mount::start_with(config, mnt, log, &["--timeout-ms", "120000"])
    }

    /// The same with extra `byzfs mount` flags.
    pub fn start_with(config: &Path, mnt: &Path, log: &Path, flags: &[&str]) -> Mount {
        Mount::start_with_env(config, mnt, log, flags, &[])
    }

    /// Another mount of `up`'s cluster at `mnt-NAME` in its directory, a soft mount with
    /// extra `flags` and environment (`RUST_LOG`, say), logging to `mount-NAME.log`: the
    /// mount and its log's path.
    pub fn logged(up: &Up, name: &str, flags: &[&str], env: &[(&str, &str)]) -> (Mount, PathBuf) {
        let dir = up.dir.path();
        let log = dir.join(format!("mount-{name}.log"));
        let mut all = vec!["--timeout-ms", "120000"];
        all.extend_from_slice(flags);
        let m = Mount::start_with_env(
            &up.config,
            &dir.join(format!("mnt-{name}")),
            &log,
            &all,
            env,
        );
        (m, log)
    }

    /// The same with extra environment variables (`RUST_LOG`, say).
    pub fn start_with_env(
        config: &Path,
        mnt: &Path,
        log: &Path,
        flags: &[&str],
        env: &[(&str, &str)],
    ) -> Mount {
        std::fs::create_dir_all(mnt).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = Command::new(BIN)
            .arg("mount")
            .arg("--config")
            .arg(config)
            .args(flags)
            .arg(mnt)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut m = Mount {
            child,
            mnt: mnt.to_path_buf(),
        };
        let start = Instant::now();
        while !is_mounted(mnt) {
            assert!(m.child.try_wait().unwrap().is_none(), "byzfs mount exited");
            assert!(start.elapsed() < TIMEOUT, "byzfs mount did not mount");
            std::thread::sleep(Duration::from_millis(50));
        }
        m
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
        let start = Instant::now();
        while self.child.try_wait().ok().flatten().is_none() {
            if start.elapsed() > Duration::from_secs(20) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if is_mounted(&self.mnt) {
            let _ = Command::new("fusermount3")
                .arg("-uz")
                .arg(&self.mnt)
                .status();
        }
    }
}

/// The number a mount logged as `key=N` on the first line of `log` that contains `line`
/// (its summaries at unmount: "operations sent: …", "write-back: …"); 0 if none.
pub fn logged(log: &str, line: &str, key: &str) -> u64 {
    log.lines()
        .find(|l| l.contains(line))
        .and_then(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{key}=")))
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The names in `dir`, sorted.
pub fn names(dir: &Path) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}
