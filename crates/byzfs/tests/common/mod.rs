//! A local cluster started with the real `byzfs up`, for tests of whole processes.

#![allow(dead_code)]

use byzfs_bft::services::kv::{KvOp, KvResult};
use byzfs_net::cluster::ClusterConfig;
use byzfs_net::{handshake, ByzClient, ClientCredential, NodeStatus};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::BufRead as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
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
        let mut child = Command::new(BIN)
            .args(["up", "--replicas", "4", "--base-port", "0", "--dir"])
            .arg(&cdir)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
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
                let out = child.wait_with_output().unwrap();
                panic!(
                    "byzfs up did not come up: {}",
                    String::from_utf8_lossy(&out.stderr)
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
        Up {
            dir,
            child,
            pids,
            config,
            cluster,
            mountpoint,
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
        let key = self.config.with_file_name("client-1.key");
        let cred = ClientCredential::load(&key, &self.cluster).unwrap();
        tokio::time::timeout(TIMEOUT, ByzClient::connect(&self.cluster, &cred))
            .await
            .expect("connect timed out")
            .expect("connect")
    }
}

impl Drop for Up {
    fn drop(&mut self) {
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
