//! Fault tests on the real mount (issue #4 item 6): `byzfs replica --service fs` processes on
//! loopback, `byzfs mount` through FUSE, and ordinary file-system calls.
//!
//! * one replica at a time (the primary included) SIGKILLed and restarted every ~1 s during
//!   a small Andrew-like run: the run completes and its tree equals the same run on local disk;
//! * a replica restarted with its data directory deleted rejoins by state transfer, its state
//!   digest equals the others', and the cluster then relies on it;
//! * `disk` durability, all four replicas SIGKILLed at once and restarted: every file closed
//!   or fsynced before the kill is intact; the same for NO-REP (`byzfs unreplicated`), whose
//!   store, like a replica's, is reopened rather than rebuilt from a second copy;
//! * a replica that sends clients wrong data and attributes under valid MACs (the test-only
//!   `--byzantine lie-replies`) changes nothing a client sees, also as the designated replier;
//! * a replica whose data directory (a small tmpfs; skipped where mounting is not allowed)
//!   fills up stops with an error and no panic, the others keep serving, and once given
//!   room it restarts, converges, and everything written reads back.
//!
//! Each test is bounded (every wait has a deadline) and stops its processes itself (also on
//! panic). Skipped, with a message, where FUSE is not available. Verification always goes
//! through a fresh mount, so the kernel's caches of the mount that wrote cannot hide a loss.

use crate::common;

use byzfs_bft::Digest;
use common::{fuse_available, serial, tail, Mount, Procs, DEADLINE};
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn skip() -> bool {
    if fuse_available() {
        return false;
    }
    eprintln!("skipped: FUSE is not available here (no /dev/fuse or no fusermount3)");
    true
}

// ---------------------------------------------------------------------------------------------
// A small Andrew-like workload.

/// The generated source tree: directories, and files with their contents.
struct SourceTree {
    dirs: Vec<String>,
    files: Vec<(String, Vec<u8>)>,
}

/// A deterministic C-like tree: 3 top directories with 2 subdirectories each, 36 source
/// files of 0.3–24 KB, and a tiny program (`prog/`) that really compiles.
fn source_tree() -> SourceTree {
    let mut seed: u64 = 0x5eed_1234_abcd_9876;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        seed >> 33
    };
    let mut dirs = vec!["prog".to_string()];
    let mut files = Vec::new();
    for a in 0..3 {
        dirs.push(format!("src{a}"));
        for b in 0..2 {
            let d = format!("src{a}/mod{b}");
            dirs.push(d.clone());
            for c in 0..6 {
                let lines = 10 + next() % 600;
                let mut text = format!("/* {d}/file{c}.c */\n#include \"common.h\"\n\n");
                for l in 0..lines {
                    text.push_str(&format!(
                        "static int f{l}(int x) {{ return x * {} + {}; }}\n",
                        next() % 1000,
                        next() % 77
                    ));
                }
                files.push((format!("{d}/file{c}.c"), text.into_bytes()));
            }
        }
    }
    files.push((
        "prog/common.h".into(),
        b"int add(int a, int b);\nint mul(int a, int b);\n".to_vec(),
    ));
    files.push((
        "prog/a.c".into(),
        b"#include \"common.h\"\nint add(int a, int b) { return a + b; }\n".to_vec(),
    ));
    files.push((
        "prog/b.c".into(),
        b"#include \"common.h\"\nint mul(int a, int b) { return a * b; }\n".to_vec(),
    ));
    files.push((
        "prog/main.c".into(),
        b"#include <stdio.h>\n#include \"common.h\"\n\
          int main(void) { printf(\"%d\\n\", add(mul(6, 7), 0)); return 0; }\n"
            .to_vec(),
    ));
    SourceTree { dirs, files }
}

fn has_cc() -> bool {
    Command::new("cc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The Andrew phases on `root` (created): mkdir, copy, stat all, read all, compile (if `cc`
/// exists). Panics on any failure.
fn andrew(root: &Path, tree: &SourceTree) {
    // Phase 1: directories.
    std::fs::create_dir_all(root).unwrap();
    for d in &tree.dirs {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    // Phase 2: copy the files in (every write ends with a close).
    for (p, data) in &tree.files {
        std::fs::write(root.join(p), data).unwrap_or_else(|e| panic!("write {p}: {e}"));
    }
    // Phase 3: stat everything.
    let mut total = 0u64;
    let mut count = 0usize;
    walk(root, &mut |_, m| {
        count += 1;
        if m.is_file() {
            total += m.len();
        }
    });
    let expected: u64 = tree.files.iter().map(|(_, d)| d.len() as u64).sum();
    assert_eq!(total, expected, "stat phase: total size");
    assert_eq!(count, tree.dirs.len() + tree.files.len());
    // Phase 4: read everything.
    for (p, data) in &tree.files {
        assert!(
            std::fs::read(root.join(p)).unwrap() == *data,
            "read phase: {p} differs"
        );
    }
    // Phase 5: compile and link the tiny program, and run it.
    if has_cc() {
        let prog = root.join("prog");
        for c in ["a", "b", "main"] {
            let out = Command::new("cc")
                .current_dir(&prog)
                .args(["-O1", "-c", &format!("{c}.c"), "-o", &format!("{c}.o")])
                .output()
                .unwrap();
            assert!(out.status.success(), "cc {c}.c: {out:?}");
        }
        let out = Command::new("cc")
            .current_dir(&prog)
            .args(["a.o", "b.o", "main.o", "-o", "prog"])
            .output()
            .unwrap();
        assert!(out.status.success(), "link: {out:?}");
        let out = Command::new(prog.join("prog")).output().unwrap();
        assert_eq!(out.stdout, b"42\n");
    }
}

/// Calls `f(relative path, metadata)` for everything under `root` (not `root` itself), in
/// name order.
fn walk(root: &Path, f: &mut dyn FnMut(&str, &std::fs::Metadata)) {
    fn go(root: &Path, dir: &Path, f: &mut dyn FnMut(&str, &std::fs::Metadata)) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            let m = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            f(&rel, &m);
            if m.is_dir() {
                go(root, &p, f);
            }
        }
    }
    go(root, root, f)
}

/// Path → type, permission bits, size and content checksum of everything under `root`.
fn checksums(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    walk(root, &mut |rel, m| {
        let mode = m.mode() & 0o7777;
        let v = if m.is_dir() {
            format!("dir {mode:o}")
        } else if m.is_symlink() {
            let t = std::fs::read_link(root.join(rel)).unwrap();
            format!("symlink {}", t.display())
        } else {
            let data = std::fs::read(root.join(rel)).unwrap();
            assert_eq!(
                data.len() as u64,
                m.len(),
                "{rel}: size and content disagree"
            );
            format!("file {mode:o} {} {}", m.len(), hex(&Digest::of(&data).0))
        };
        out.insert(rel.to_string(), v);
    });
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The same workload on a local temporary directory: the reference.
fn local_reference(tree: &SourceTree) -> BTreeMap<String, String> {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("run");
    andrew(&root, tree);
    checksums(&root)
}

/// Asserts that `a` (through the mount) equals the local reference `b`.
fn assert_same_tree(what: &str, a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) {
    if a == b {
        return;
    }
    let diff: Vec<String> = a
        .iter()
        .filter(|(k, v)| b.get(*k) != Some(*v))
        .map(|(k, v)| format!("{k}: {v} (local: {:?})", b.get(k)))
        .chain(
            b.keys()
                .filter(|k| !a.contains_key(*k))
                .map(|k| format!("{k}: missing")),
        )
        .take(20)
        .collect();
    panic!(
        "{what}: the tree differs from the local run:\n{}",
        diff.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------

/// The primary of the highest view a reachable replica reports.
fn current_primary(p: &Procs) -> usize {
    (0..4)
        .filter_map(|i| p.status(i))
        .max_by_key(|s| (s.view, s.has_new_view))
        .map(|s| s.primary as usize)
        .unwrap_or(0)
}

/// Waits until restarted replica `i` has caught up with what the others had executed when
/// it came back, so that the next kill does not meet a replica still behind (the cluster
/// then has two faults, beyond `f = 1`: with one replica down and one still catching up,
/// nothing can run, and a third replica's throughput watch votes the primary out alone,
/// leaving it alone in a higher view — STATUS.md, Known gaps). A replica that cannot reach
/// that point within 10 s (alone in a higher view already) is let go once it has what the
/// others made stable, as before.
fn wait_caught_up(p: &Procs, i: usize) {
    let start = Instant::now();
    let head = (0..4)
        .filter(|&j| j != i)
        .filter_map(|j| p.status(j))
        .map(|s| s.last_executed)
        .max()
        .unwrap_or(0);
    loop {
        let stable = (0..4)
            .filter(|&j| j != i)
            .filter_map(|j| p.status(j))
            .map(|s| s.last_stable)
            .max()
            .unwrap_or(0);
        let target = if start.elapsed() < Duration::from_secs(10) {
            head.max(stable)
        } else {
            stable
        };
        if p.status(i)
            .is_some_and(|s| s.last_executed >= target && !s.fetching)
        {
            return;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "restarted replica {i} did not catch up: {}",
            tail(&p.log(i))
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[derive(Debug, Default)]
struct Kills {
    total: usize,
    primaries: usize,
}

fn lock(p: &Mutex<Procs>) -> std::sync::MutexGuard<'_, Procs> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

/// The cluster, a mount on it, and the local reference of the workload.
struct Setup {
    p: Arc<Mutex<Procs>>,
    config: PathBuf,
    dir: PathBuf,
}

impl Setup {
    fn new(extra: Vec<Vec<String>>) -> Setup {
        Setup::with_protocol(extra, &[])
    }

    /// As [`Setup::new`], with `[protocol]` parameters set (see [`Procs::with_protocol`]).
    fn with_protocol(extra: Vec<Vec<String>>, protocol: &[(&str, &str)]) -> Setup {
        let p = Procs::with_protocol("disk", "fs", extra, protocol);
        let (config, dir) = (p.config(), p.dir.path().to_path_buf());
        Setup {
            p: Arc::new(Mutex::new(p)),
            config,
            dir,
        }
    }

    /// A new mount on `<dir>/<name>`.
    fn mount(&self, name: &str) -> Mount {
        Mount::start(
            &self.config,
            &self.dir.join(name),
            &self.dir.join(format!("{name}.log")),
        )
    }

    /// Waits until 2f+1 = 3 replicas executed the same requests and have the same state (the
    /// fourth may be the one replica that, restarted alone into a higher view, waits in limbo
    /// for the next view change without a stable checkpoint to catch up through: plain PBFT,
    /// a known gap in docs/STATUS.md; seen after a kill-all under heavy load).
    fn wait_quorum_converged(&self) -> Vec<byzfs_net::NodeStatus> {
        lock(&self.p).wait_until("the same state at 2f+1 replicas", |s| {
            s.iter()
                .filter(|a| {
                    s.iter()
                        .filter(|x| {
                            x.last_executed == a.last_executed
                                && x.last_tentative == x.last_executed
                                && x.state_digest_at == x.last_executed
                                && x.state_digest == a.state_digest
                                && !x.fetching
                        })
                        .count()
                        >= 3
                })
                .count()
                >= 3
        })
    }

    /// Waits until all four replicas executed the same requests and have the same state.
    fn wait_converged(&self) -> Vec<byzfs_net::NodeStatus> {
        lock(&self.p).wait_until("the same state at every replica", |s| {
            s.iter().all(|x| {
                x.last_executed == s[0].last_executed
                    && x.last_tentative == x.last_executed
                    && x.state_digest_at == x.last_executed
                    && x.state_digest == s[0].state_digest
                    && !x.fetching
            })
        })
    }
}

#[test]
fn andrew_run_completes_while_replicas_are_killed_and_restarted() {
    if skip() {
        return;
    }
    let _g = serial();
    let tree = source_tree();
    let reference = local_reference(&tree);
    let s = Setup::new(vec![Vec::new(); 4]);
    // A hard mount (the default) waits for ever; this one gives up after 3 minutes, so that
    // a cluster that stopped making progress fails the test instead of hanging it. Kills
    // of one replica at a time must never surface as an error (they once did, at 30 s).
    let log = s.dir.join("mnt.log");
    let mount = Mount::start_with(
        &s.config,
        &s.dir.join("mnt"),
        &log,
        &["--timeout-ms", "180000"],
    );
    let mount_log = || std::fs::read_to_string(&log).unwrap_or_default();

    // The killer: every ~1 s, SIGKILL one replica (every other time the current primary),
    // restart it ~1 s later and let it catch up before the next kill (f = 1).
    let stop = Arc::new(AtomicBool::new(false));
    let kills = Arc::new(Mutex::new(Kills::default()));
    let killer = {
        let (p, stop, kills) = (s.p.clone(), stop.clone(), kills.clone());
        std::thread::spawn(move || {
            let nap = |d: Duration| {
                let t = Instant::now();
                while t.elapsed() < d && !stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(50));
                }
            };
            nap(Duration::from_millis(700));
            let mut n = 0usize;
            while !stop.load(Ordering::SeqCst) {
                let victim = {
                    let mut p = lock(&p);
                    let primary = current_primary(&p);
                    let victim = if n.is_multiple_of(2) {
                        primary
                    } else {
                        (primary + 1 + (n / 2) % 3) % 4
                    };
                    p.kill(&[victim]);
                    let mut k = kills.lock().unwrap();
                    k.total += 1;
                    k.primaries += usize::from(victim == primary);
                    victim
                };
                // Down for a second whatever happens: it is always restarted.
                std::thread::sleep(Duration::from_secs(1));
                {
                    let mut p = lock(&p);
                    p.start(victim);
                    p.wait_reachable(&[victim]);
                    wait_caught_up(&p, victim);
                }
                n += 1;
                nap(Duration::from_millis(300));
            }
        })
    };

    // Andrew rounds (each in its own directory) until enough kills happened during them,
    // or two minutes: how many rounds that takes depends on how long each restarted replica
    // takes to catch up (`wait_caught_up`), so a fixed number of rounds could end first.
    // A longer soak: `BYZFS_TEST_KILLS=17` (half of them primaries), ten minutes at most.
    let soak: Option<usize> = std::env::var("BYZFS_TEST_KILLS")
        .ok()
        .and_then(|v| v.parse().ok());
    let kills_wanted = soak.unwrap_or(6);
    let time_limit = Duration::from_secs(if soak.is_some() { 600 } else { 120 });
    let mut rounds = 0;
    let started = Instant::now();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| loop {
        andrew(&mount.path(&format!("run{rounds}")), &tree);
        rounds += 1;
        let k = kills.lock().unwrap();
        let enough = k.total >= kills_wanted && k.primaries >= kills_wanted / 2;
        if enough || started.elapsed() > time_limit || killer.is_finished() {
            break;
        }
    }));
    stop.store(true, Ordering::SeqCst);
    let killed = killer.join();
    // How long operations waited for the cluster (the mount warns every 10 s).
    let waits = mount_log()
        .lines()
        .filter(|l| l.contains("still waiting"))
        .count();
    eprintln!("{waits} \"still waiting\" warnings of the mount");
    if let Err(e) = outcome {
        eprintln!("mount log:\n{}", tail(&mount_log()));
        std::panic::resume_unwind(e);
    }
    if let Err(e) = killed {
        std::panic::resume_unwind(e);
    }
    let k = kills.lock().unwrap();
    eprintln!("{rounds} Andrew rounds, {k:?}");
    assert!(
        k.total >= 4 && k.primaries >= 2,
        "too few kills during the run: {k:?}"
    );
    drop(k);

    // Every replica ends with the same state; a fresh mount sees the local run's tree.
    let all = s.wait_converged();
    // Killing the primary need not change the view: if it dies between requests and is back
    // before any backup's view-change timer fires, nobody suspects it (seen under load, with
    // 3 primary kills). The kills themselves are asserted above; the views are reported.
    eprintln!(
        "views after the run: {:?}",
        all.iter().map(|x| x.view).collect::<Vec<_>>()
    );
    // Flood protection shed no correct peer or client around the restarts (issue #47 item
    // 4: a kill-and-restart run at f27e0a6 logged 12 sheds of peers and 20 refused
    // handshakes; none in 20 kills here, `BYZFS_TEST_KILLS=20`).
    // Counted in the logs, which span the restarts (the counters do not).
    let logs: Vec<String> = (0..4).map(|i| lock(&s.p).log(i)).collect();
    let lines = |what: &str| -> Vec<usize> {
        logs.iter()
            .map(|l| l.lines().filter(|x| x.contains(what)).count())
            .collect()
    };
    let shed = lines("floods useless frames");
    let refused = lines("peer rejected our handshake");
    eprintln!("sources shed per replica: {shed:?}; handshakes refused by a peer: {refused:?}");
    assert_eq!(shed, vec![0; 4]);
    drop(mount);
    let fresh = s.mount("check");
    for r in 0..rounds {
        let root = fresh.path(&format!("run{r}"));
        assert_same_tree(&format!("run{r}"), &checksums(&root), &reference);
    }
}

#[test]
fn replica_restarted_without_its_data_rejoins_by_state_transfer() {
    if skip() {
        return;
    }
    let _g = serial();
    let tree = source_tree();
    let reference = local_reference(&tree);
    // 4 KiB chunks: the larger partitions of the file service (a directory's entries, a
    // file's 1 MiB group of blocks) travel in several STATE-PART messages. Checkpoints
    // every 32 batches: a mount's write-back sends an Andrew run in a few dozen batches,
    // and the others must move their log window past what replica 3 missed.
    let s = Setup::with_protocol(
        vec![Vec::new(); 4],
        &[
            ("state_chunk_bytes", "4096"),
            ("checkpoint_interval", "32"),
            ("log_window", "64"),
        ],
    );
    let mount = s.mount("mnt");
    andrew(&mount.path("run0"), &tree);
    {
        let mut p = lock(&s.p);
        p.kill(&[3]);
        std::fs::remove_dir_all(p.data(3)).unwrap();
    }
    andrew(&mount.path("run1"), &tree);
    {
        let mut p = lock(&s.p);
        p.start(3);
        p.wait_reachable(&[3]);
    }
    // Work past new checkpoints until it fetched one.
    let mut rounds = 2;
    loop {
        andrew(&mount.path(&format!("run{rounds}")), &tree);
        rounds += 1;
        let st = lock(&s.p).status(3).expect("replica 3 reachable");
        if st.core.state_transfers >= 1 || rounds >= 6 {
            break;
        }
    }
    let all = s.wait_converged();
    assert!(
        all[3].core.state_transfers >= 1,
        "the empty replica caught up by state transfer: {:?}",
        all[3]
    );
    // More chunks than partitions fetched: some partitions came in several chunks.
    let c = &all[3].core;
    assert!(c.state_chunks_fetched > c.state_parts_fetched, "{c:?}");
    // Correct peers sent it nothing invalid. The old PRE-PREPAREs it could not check on
    // its own (their time-based choice is older than the tolerance; 223 in one run) are
    // counted as `nondet`, and accepted once f+1 PREPAREs vouched for them.
    assert_eq!(c.dropped.get("invalid"), Some(&0), "{:?}", c.dropped);
    assert!(all
        .iter()
        .all(|x| x.stable_digest == all[0].stable_digest || x.last_stable != all[0].last_stable));
    // The same digests through the command line.
    // One sample (`--interval-ms 0`), taken right after the digests above: a second sample
    // a second later may find the replica that just rejoined past them.
    let out = Command::new(common::BIN)
        .args(["status", "--interval-ms", "0", "--config"])
        .arg(&s.config)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // One line per replica (the digest shows twice on a line when the state is that of the
    // stable checkpoint).
    let short = &all[0].state_digest[..16];
    assert_eq!(
        text.lines().filter(|l| l.contains(short)).count(),
        4,
        "{text}"
    );
    // And the rejoined replica counts as in step again (all four run one view here unless
    // a view change happened on the way, which this test does not cause).
    if all.iter().all(|x| x.view == all[0].view && x.has_new_view) {
        let want = format!("4 of 4 replicas in step in view {}", all[0].view);
        assert!(text.contains(&want), "{want}: {text}");
    }

    // Now the cluster needs it: with another replica down, every read and write needs the
    // rejoined one (2f+1 = 3 of the 3 running).
    lock(&s.p).kill(&[0]);
    drop(mount);
    let fresh = s.mount("check");
    for r in 0..rounds {
        let root = fresh.path(&format!("run{r}"));
        assert_same_tree(&format!("run{r}"), &checksums(&root), &reference);
    }
    andrew(&fresh.path("after"), &tree);
    assert_same_tree("after", &checksums(&fresh.path("after")), &reference);
}

/// Deterministic content of test file `i`: 1 byte to ~600 KB.
fn content(i: usize) -> Vec<u8> {
    let len = [1usize, 100, 4096, 4097, 65_536, 131_073, 600_000][i % 7] + i;
    (0..len).map(|j| (j * 31 + i * 7) as u8).collect()
}

/// Past the first checkpoint (128 ordered batches): a closed file can be a single batch
/// (its creation, data and attributes, with directory delegations), so it takes well over
/// 128 of them.
#[test]
fn disk_mode_all_replicas_killed_at_once_keep_closed_and_fsynced_files() {
    kill_all_at_once(160);
}

/// The same before the first checkpoint: the restart replays every executed batch into an
/// empty file service.
#[test]
fn disk_mode_all_replicas_killed_before_the_first_checkpoint_keep_their_files() {
    kill_all_at_once(2);
}

/// `closed` files written and closed, three fsynced and left open, one being written: all
/// four replicas SIGKILLed at once and restarted; a fresh mount checks the files.
fn kill_all_at_once(closed: usize) {
    if skip() {
        return;
    }
    let _g = serial();
    let s = Setup::new(vec![Vec::new(); 4]);
    let mount = s.mount("mnt");
    std::fs::create_dir_all(mount.path("d/e")).unwrap();
    // Closed files.
    for i in 0..closed {
        std::fs::write(mount.path(&format!("d/closed{i}")), content(i)).unwrap();
    }
    std::fs::write(mount.path("d/e/small"), b"small").unwrap();
    std::os::unix::fs::symlink("closed1", mount.path("d/link")).unwrap();
    std::fs::set_permissions(
        mount.path("d/closed1"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    // Fsynced files still open at the kill, and a writer appending without fsync: held by a
    // helper process, so that this process holds no file of the mount when it restarts the
    // replicas (a fork+exec closes the inherited descriptors, and each close of a FUSE file is
    // a FLUSH that would queue behind the writer's request stuck at the dead cluster).
    let ready = s.dir.join("helper-ready");
    let mut helper = KillOnDrop(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                // The test's name in the one integration binary (tests/integration.rs).
                "faults::hold_files_helper",
                "--include-ignored",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(
                HELPER_ENV,
                format!("{}\n{}", mount.path("d").display(), ready.display()),
            )
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    while !ready.exists() {
        assert!(helper.0.try_wait().unwrap().is_none(), "the helper exited");
        assert!(start.elapsed() < DEADLINE, "the helper never got ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    if closed > 10 {
        // Past the first checkpoint: the restart restores a stored checkpoint, then replays.
        lock(&s.p).wait_until("a stable checkpoint", |s| {
            s.iter().all(|x| x.last_stable >= 128)
        });
    }
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    {
        let mut p = lock(&s.p);
        let before: Vec<u64> = (0..4)
            .filter_map(|i| p.status(i))
            .map(|x| x.last_executed)
            .collect();
        p.kill(&[0, 1, 2, 3]);
        for i in 0..4 {
            p.start(i);
        }
        p.wait_reachable(&[0, 1, 2, 3]);
        let after: Vec<(u64, u64)> = (0..4)
            .filter_map(|i| p.status(i))
            .map(|x| (x.last_stable, x.last_executed))
            .collect();
        eprintln!(
            "executed before the kill {before:?}; (stable, executed) after the restart \
             {after:?}, {:?} after the kill",
            t0.elapsed()
        );
        if closed > 10 {
            assert!(
                after.iter().all(|&(st, _)| st >= 128),
                "restored a checkpoint"
            );
        } else {
            assert!(
                after.iter().all(|&(st, _)| st == 0),
                "killed before the first checkpoint"
            );
        }
    }
    // The helper's writes go on once the cluster is back; then it dies with its files open.
    std::thread::sleep(Duration::from_millis(500));
    drop(helper);
    drop(mount);

    let fresh = s.mount("check");
    for i in 0..closed {
        let path = fresh.path(&format!("d/closed{i}"));
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("closed{i}: {e}"));
        assert!(data == content(i), "closed{i} differs after the restart");
    }
    for i in 0..3 {
        let data = std::fs::read(fresh.path(&format!("d/synced{i}"))).unwrap();
        assert!(
            data == content(100 + i),
            "synced{i} differs after the restart"
        );
    }
    assert_eq!(std::fs::read(fresh.path("d/e/small")).unwrap(), b"small");
    assert_eq!(
        std::fs::read_link(fresh.path("d/link")).unwrap(),
        Path::new("closed1")
    );
    assert_eq!(
        std::fs::metadata(fresh.path("d/closed1")).unwrap().mode() & 0o777,
        0o600
    );
    // The writer's file holds a prefix of what it wrote (each write is one operation).
    let busy = std::fs::read(fresh.path("d/busy")).unwrap();
    assert!(!busy.is_empty(), "the writer wrote before the kill");
    assert!(
        busy.iter().enumerate().all(|(k, &b)| b == busy_byte(k)),
        "busy holds a prefix of what was written ({} bytes)",
        busy.len()
    );
    // And the restarted cluster keeps working.
    std::fs::write(fresh.path("d/after"), b"after").unwrap();
    assert_eq!(std::fs::read(fresh.path("d/after")).unwrap(), b"after");
    let all = s.wait_quorum_converged();
    assert!(all.iter().all(|x| x.durability == "disk"));
}

/// Needs the test-only feature `byzantine` (`scripts/test.sh` turns it on).
#[cfg(feature = "byzantine")]
#[test]
fn a_lying_replica_cannot_change_what_the_client_sees() {
    if skip() {
        return;
    }
    let _g = serial();
    let tree = source_tree();
    let reference = local_reference(&tree);
    // Replica 0, the first primary, lies to clients about every result.
    let mut extra = vec![Vec::new(); 4];
    extra[0] = vec!["--byzantine".to_string(), "lie-replies".to_string()];
    let s = Setup::new(extra);
    let mount = s.mount("mnt");
    use std::time::SystemTime;
    let before = SystemTime::now();
    // Our uid, as the local file system records it.
    let me = std::fs::metadata(s.dir.join("cluster.toml")).unwrap().uid();
    std::fs::create_dir_all(mount.path("d/sub")).unwrap();
    let small = b"small file".to_vec();
    let big = content(6); // 600 KB: reads of it are above the full-reply threshold
    std::fs::write(mount.path("d/small"), &small).unwrap();
    std::fs::write(mount.path("d/big"), &big).unwrap();
    std::fs::set_permissions(
        mount.path("d/small"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    std::os::unix::fs::symlink("big", mount.path("d/link")).unwrap();
    andrew(&mount.path("run"), &tree);
    drop(mount);

    // Everything through fresh mounts (nothing cached), several times: each read picks a
    // random designated replier, so the liar is the designated one for some of them.
    for round in 0..4 {
        let m = s.mount(&format!("check{round}"));
        for (name, data, mode) in [("d/small", &small, 0o640), ("d/big", &big, 0o644)] {
            let md = std::fs::metadata(m.path(name)).unwrap();
            assert_eq!(md.len(), data.len() as u64, "{name} size");
            assert_eq!(md.mode() & 0o7777, mode, "{name} mode");
            assert_eq!(md.nlink(), 1, "{name} nlink");
            assert_eq!(md.uid(), me, "{name} uid");
            let mtime = md.modified().unwrap();
            assert!(
                mtime >= before - Duration::from_secs(60)
                    && mtime <= SystemTime::now() + Duration::from_secs(60),
                "{name} mtime {mtime:?}"
            );
            assert!(std::fs::read(m.path(name)).unwrap() == *data, "{name} data");
        }
        // Reads at offsets, each a separate request.
        {
            use std::os::unix::fs::FileExt as _;
            let f = std::fs::File::open(m.path("d/big")).unwrap();
            for k in 0..8u64 {
                let off = k * 70_001;
                let mut buf = vec![0u8; 4096];
                let n = f.read_at(&mut buf, off).unwrap();
                let want = &big[off as usize..(off as usize + 4096).min(big.len())];
                assert_eq!(&buf[..n], want, "read at {off}");
            }
        }
        let mut names: Vec<String> = std::fs::read_dir(m.path("d"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["big", "link", "small", "sub"]);
        assert_eq!(
            std::fs::read_link(m.path("d/link")).unwrap(),
            Path::new("big")
        );
        assert!(m.path("d/sub").is_dir());
        assert!(!m.path("d/nothing").exists());
        assert_same_tree("run", &checksums(&m.path("run")), &reference);
    }
    // The liar did lie: full results and digest-only replies. Big full results it sends
    // only as the designated replier, which a client stops making it once one of its
    // replies contradicted a certificate (`byzfs_bft::responsive`; client test
    // `a_replica_that_contradicted_a_certificate_is_not_designated`), so it may never get
    // to lie with one.
    let mut p = lock(&s.p);
    p.terminate(0);
    let log = p.log(0);
    let line = log
        .lines()
        .find(|l| l.contains("lies told"))
        .unwrap_or_else(|| panic!("no count of lies in {}", tail(&log)));
    let count = |field: &str| -> u64 {
        let at = line.find(&format!("{field}=")).expect(field) + field.len() + 1;
        line[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    eprintln!("{line}");
    assert!(count("full_small") > 0, "{line}");
    assert!(count("digest_only") > 0, "{line}");
}

/// A child process, SIGKILLed and reaped when dropped (also when the test fails).
struct KillOnDrop(std::process::Child);

/// `byzfs unreplicated --service fs --durability disk` on `config` and `data`, logging to
/// `log`, once it has restored its state and serves. A thread copies its stderr to `log` and
/// reports the start line, so the wait is on that event (or the server's exit), not a poll.
fn unreplicated_fs(config: &Path, data: &Path, log: &Path) -> KillOnDrop {
    use std::io::{BufRead as _, Write as _};
    let mut server = KillOnDrop(
        Command::new(common::BIN)
            .arg("unreplicated")
            .arg("--config")
            .arg(config)
            .args(["--service", "fs", "--durability", "disk", "--data"])
            .arg(data)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stderr = server.0.stderr.take().unwrap();
    let mut file = std::fs::File::create(log).unwrap();
    let (started, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Ends at the server's exit (EOF), dropping `started`.
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = writeln!(file, "{line}");
            if line.contains("unreplicated server started") {
                let _ = started.send(());
            }
        }
    });
    if wait.recv_timeout(DEADLINE).is_err() {
        panic!(
            "byzfs unreplicated did not start within {DEADLINE:?} (exited: {:?}): {}",
            server.0.try_wait().ok().flatten(),
            tail(&std::fs::read_to_string(log).unwrap_or_default())
        );
    }
    server
}

#[test]
fn disk_mode_unreplicated_server_killed_keeps_closed_files() {
    if skip() {
        return;
    }
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let cdir = tmp.path().join("cluster");
    let keygen = Command::new(common::BIN)
        .args(["keygen", "--replicas", "4", "--base-port", "0", "--out"])
        .arg(&cdir)
        .output()
        .unwrap();
    assert!(keygen.status.success(), "{keygen:?}");
    let config = cdir.join("cluster.toml");
    let data = tmp.path().join("data");
    let server = unreplicated_fs(&config, &data, &tmp.path().join("server-1.log"));
    // No directory delegations: one create and one write per file reach the server (with
    // them, write-back sends the 300 files in a few dozen batches, short of a checkpoint).
    let flags = [
        "--unreplicated",
        "--timeout-ms",
        "120000",
        "--no-dir-delegations",
    ];
    let mount = Mount::start_with(
        &config,
        &tmp.path().join("mnt"),
        &tmp.path().join("m.log"),
        &flags,
    );
    // 300 files (one create and one write each with write-behind), 4.2 MB: past a few
    // checkpoints (every 128 operations).
    const N: usize = 300;
    let unrep_content = |i: usize| content(if i.is_multiple_of(50) { 6 } else { i % 4 });
    std::fs::create_dir(mount.path("d")).unwrap();
    for i in 0..N {
        std::fs::write(mount.path(&format!("d/f{i}")), unrep_content(i)).unwrap();
    }
    drop(mount);
    // The mount's threads ran throughout (its background thread ticks every 250 ms: a
    // panic there once went unseen).
    let mount_log = std::fs::read_to_string(tmp.path().join("m.log")).unwrap();
    assert!(!mount_log.contains("panicked"), "{}", tail(&mount_log));
    drop(server); // SIGKILL
                  // The log names a checkpoint; the server's own database holds its digests, not a second
                  // copy of the files.
    let db = std::fs::metadata(data.join("replica.redb")).unwrap().len();
    assert!(
        db < 2 << 20,
        "replica.redb holds {db} bytes for 4.2 MB of files"
    );
    let log = tmp.path().join("server-2.log");
    let _server = unreplicated_fs(&config, &data, &log);
    let text = std::fs::read_to_string(&log).unwrap();
    let restored = text
        .lines()
        .find(|l| l.contains("restored the stored state"))
        .unwrap_or_else(|| panic!("no restore logged: {}", tail(&text)));
    assert!(
        !restored.contains("checkpoint=0 "),
        "no checkpoint stored: {restored}"
    );
    let fresh = Mount::start_with(
        &config,
        &tmp.path().join("check"),
        &tmp.path().join("m.log"),
        &flags,
    );
    for i in 0..N {
        let got = std::fs::read(fresh.path(&format!("d/f{i}"))).unwrap();
        assert!(got == unrep_content(i), "f{i} differs after the restart");
    }
    std::fs::write(fresh.path("d/after"), b"after").unwrap();
    assert_eq!(std::fs::read(fresh.path("d/after")).unwrap(), b"after");
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Tells [`hold_files_helper`] the directory to write in and the file to create when ready.
const HELPER_ENV: &str = "BYZFS_FAULTS_HOLD_FILES";

fn busy_byte(k: usize) -> u8 {
    b"0123456789abcdefghijklmnopqrstuvwxyz\n"[k % 37]
}

/// Not a test: the helper process of [`kill_all_at_once`] (does nothing without its
/// environment variable). Writes and fsyncs `synced0..3` and keeps them open, then appends to
/// `busy` without fsync until killed.
#[test]
#[ignore]
fn hold_files_helper() {
    use std::io::Write as _;
    let Ok(env) = std::env::var(HELPER_ENV) else {
        return;
    };
    let (dir, ready) = env.split_once('\n').unwrap();
    let dir = Path::new(dir);
    let mut open = Vec::new();
    for i in 0..3 {
        let mut f = std::fs::File::create(dir.join(format!("synced{i}"))).unwrap();
        f.write_all(&content(100 + i)).unwrap();
        f.sync_all().unwrap();
        open.push(f);
    }
    let mut busy = std::fs::File::create(dir.join("busy")).unwrap();
    std::fs::write(ready, b"").unwrap();
    let mut k = 0usize;
    loop {
        let chunk: Vec<u8> = (k..k + 1000).map(busy_byte).collect();
        if busy.write_all(&chunk).is_err() {
            break;
        }
        k += 1000;
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_secs(3600));
}

// ---------------------------------------------------------------------------------------------
// A full disk at one replica.

/// A small tmpfs mounted on a directory, lazily unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// `None` where mounting is not allowed (not root, or no `mount`).
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }

    fn resize(&self, size: &str) {
        let st = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(st.success(), "cannot resize the tmpfs");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Deterministic content of file `i` of the full-disk test (256 KiB each).
fn filler(i: usize) -> Vec<u8> {
    (0..256 * 1024).map(|j| (j * 13 + i * 101) as u8).collect()
}

#[test]
fn a_replica_whose_disk_fills_up_stops_cleanly_and_recovers_with_space() {
    if skip() {
        return;
    }
    let _g = serial();
    let s = Setup::new(vec![Vec::new(); 4]);
    // Replica 3's data directory becomes a 12 MiB file system (the others have the host's).
    let data3 = {
        let mut p = lock(&s.p);
        p.kill(&[3]);
        let d = p.data(3);
        std::fs::remove_dir_all(&d).unwrap();
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let Some(small) = Tmpfs::mount(&data3, "12m") else {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    };
    {
        let mut p = lock(&s.p);
        p.start(3);
        p.wait_reachable(&[3]);
    }
    let mount = s.mount("mnt");
    let stopped = |p: &mut Procs| p.children[3].as_mut().and_then(|c| c.try_wait().unwrap());
    // Write until replica 3 runs out of space and stops (≤ 40 MiB).
    let mut files = 0;
    let mut status = None;
    while files < 160 {
        std::fs::write(mount.path(&format!("f{files}")), filler(files)).unwrap();
        files += 1;
        status = stopped(&mut lock(&s.p));
        if status.is_some() {
            break;
        }
    }
    // Written back in flight (`crates/byzfs-fuse/src/inflight.rs`: what the links drain in
    // 4 s, without the writer waiting), the last files may not have reached the replicas
    // yet: `fsync` sends and waits for all of them. Then replica 3's exit is polled (a
    // child process's exit has no timed wait in std), for at most 30 s.
    if status.is_none() {
        let last = std::fs::File::open(mount.path(&format!("f{}", files - 1))).unwrap();
        last.sync_all().unwrap();
        let until = Instant::now() + Duration::from_secs(30);
        while status.is_none() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(100));
            status = stopped(&mut lock(&s.p));
        }
    }
    let status = status.expect("replica 3 stopped when its disk filled up");
    let log = lock(&s.p).log(3);
    assert!(!status.success(), "stopped with an error status");
    assert!(!log.contains("panicked"), "no panic: {}", tail(&log));
    assert!(
        log.contains("space") || log.contains("os error 28"),
        "says the disk is full: {}",
        tail(&log)
    );
    // The other three keep serving.
    for i in files..files + 8 {
        std::fs::write(mount.path(&format!("f{i}")), filler(i)).unwrap();
    }
    files += 8;
    // With room again it restarts, recovers and converges.
    small.resize("512m");
    {
        let mut p = lock(&s.p);
        p.children[3] = None;
        p.start(3);
        p.wait_reachable(&[3]);
    }
    // Work past a checkpoint so that a replica behind can catch up through it.
    for i in files..files + 16 {
        std::fs::write(mount.path(&format!("f{i}")), b"more").unwrap();
    }
    let all = s.wait_converged();
    assert!(all.iter().all(|x| x.state_digest == all[0].state_digest));
    // It is needed now: with another replica down, everything needs the recovered one.
    lock(&s.p).kill(&[0]);
    drop(mount);
    let fresh = s.mount("check");
    for i in 0..files {
        let got = std::fs::read(fresh.path(&format!("f{i}"))).unwrap();
        assert!(got == filler(i), "f{i} differs after the recovery");
    }
    drop(fresh);
    // Unmount before the cluster directory (holding the mount point) is deleted.
    drop(small);
    drop(s);
}
