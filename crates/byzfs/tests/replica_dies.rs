//! When a replica dies (README "When a replica dies", issue #47): `byzfs up` restarts a
//! replica killed with SIGKILL (a new process, in step again), gives up on one that keeps
//! dying and keeps serving, and its SIGTERM stops the restarted replicas too; `byzfs status`
//! exits 0, 2 or 1 as the cluster tolerates more faults, none, or cannot serve.

use crate::common;

use common::*;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Whether `pid` is a live (not zombie) `byzfs replica` process.
fn replica_alive(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == b"replica"))
}

/// Replica `id`'s pid and state as `up.toml` (beside the cluster file) gives them.
fn run_entry(config: &Path, id: i64) -> (Option<i32>, String) {
    let text = std::fs::read_to_string(config.with_file_name("up.toml")).unwrap();
    let run: toml::Table = toml::from_str(&text).unwrap();
    let r = run["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"].as_integer() == Some(id))
        .unwrap();
    (
        r.get("pid").and_then(|p| p.as_integer()).map(|p| p as i32),
        r["state"].as_str().unwrap().to_string(),
    )
}

/// `byzfs status --config CONFIG`: its stdout and exit code.
fn status(config: &Path) -> (String, i32) {
    let out = Command::new(BIN)
        .args(["status", "--interval-ms", "200", "--config"])
        .arg(config)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// Polls `byzfs status` until it exits `code` with `needle` in its report, within `limit`.
fn wait_status(config: &Path, needle: &str, code: i32, limit: Duration) -> String {
    let start = Instant::now();
    loop {
        let (text, got) = status(config);
        if got == code && text.contains(needle) {
            return text;
        }
        assert!(
            start.elapsed() < limit,
            "no `{needle}` (exit {code}) within {limit:?}; last (exit {got}):\n{text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until `up.toml` gives replica `id` a pid other than `old`; returns it.
fn wait_new_pid(config: &Path, id: i64, old: i32, limit: Duration) -> i32 {
    let start = Instant::now();
    loop {
        if let (Some(pid), _) = run_entry(config, id) {
            if pid != old && replica_alive(pid) {
                return pid;
            }
        }
        assert!(
            start.elapsed() < limit,
            "replica {id} not restarted within {limit:?}: {:?}",
            run_entry(config, id)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_killed_replica_is_restarted_and_sigterm_stops_the_restarted_one_too() {
    let _guard = serial();
    rt().block_on(killed_replica_restarted());
}

async fn killed_replica_restarted() {
    let mut up = Up::start(&["--service", "kv"]);
    let mut c = up.client().await;
    put(&mut c, "before", "1").await;
    let old = up.pids[1];
    up.signal(1, Signal::SIGKILL);
    let killed = Instant::now();
    let new = wait_new_pid(&up.config, 1, old, Duration::from_secs(30));
    let left = Duration::from_secs(30).saturating_sub(killed.elapsed());
    let text = wait_status(&up.config, "4 of 4 replicas in step", 0, left);
    assert!(text.contains("4 of 4 replicas reachable"), "{text}");
    put(&mut c, "after", "2").await;
    assert_eq!(get(&mut c, "before").await, Some(b"1".to_vec()));
    let log = std::fs::read_to_string(&up.log).unwrap();
    let exited: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("replica 1 exited"))
        .collect();
    assert_eq!(exited.len(), 1, "{log}");
    assert!(
        exited[0].ends_with("replica 1 exited (signal: 9 (SIGKILL)); restarting it in 0.5 s"),
        "{log}"
    );
    assert!(
        log.contains(&format!("replica 1 restarted: pid {new}")),
        "{log}"
    );

    kill(Pid::from_raw(up.child.id() as i32), Signal::SIGTERM).unwrap();
    let start = Instant::now();
    while up.child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < TIMEOUT, "byzfs up did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(up.child.wait().unwrap().success());
    let mut all = up.pids.clone();
    all.push(new);
    let left: Vec<i32> = all.into_iter().filter(|&p| replica_alive(p)).collect();
    assert!(left.is_empty(), "replicas outlived byzfs up: {left:?}");
    assert!(
        !up.config.with_file_name("up.toml").exists(),
        "up.toml left behind"
    );
}

/// A replica that dies at once, again and again, is left down after 5 exits within a minute,
/// with one line that says so; the cluster keeps serving, `byzfs status` names it and the
/// command it prints brings it back.
#[test]
fn up_gives_up_on_a_replica_that_keeps_dying_and_keeps_serving() {
    let _guard = serial();
    rt().block_on(gives_up_and_keeps_serving());
}

async fn gives_up_and_keeps_serving() {
    let up = Up::start(&["--service", "kv"]);
    let mut c = up.client().await;
    let mut pid = up.pids[3];
    let start = Instant::now();
    for kills in 1.. {
        kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
        if kills == 5 {
            break;
        }
        pid = wait_new_pid(&up.config, 3, pid, Duration::from_secs(30));
    }
    // Delays of 0.5 + 1 + 2 + 4 s between the five kills.
    let log_has_it = || {
        std::fs::read_to_string(&up.log)
            .unwrap()
            .lines()
            .find(|l| l.contains("replica 3 stays down"))
            .map(str::to_string)
    };
    let line = loop {
        if let Some(l) = log_has_it() {
            break l;
        }
        assert!(start.elapsed() < TIMEOUT, "up never gave up");
        std::thread::sleep(Duration::from_millis(50));
    };
    let cdir = up.config.parent().unwrap();
    let hand = format!(
        "restart it by hand: {bin} replica --config {d}/cluster.toml --id 3 --key \
         {d}/replica-3.key --data {d}/data/replica-3 --service kv --durability disk \
         >>{d}/logs/replica-3.log 2>&1 &",
        bin = Path::new(BIN).canonicalize().unwrap().display(),
        d = cdir.display()
    );
    let up_pid = up.child.id();
    let why = format!(
        "replica 3 stays down: byzfs up (pid {up_pid}) gave up on it: it exited 5 times \
         within 60 s, the last time signal: 9 (SIGKILL); its log ({d}/logs/replica-3.log) \
         ends: ",
        d = cdir.display()
    );
    assert!(line.contains(&why), "{line}");
    assert!(line.ends_with(&hand), "{line}");
    assert_eq!(run_entry(&up.config, 3).0, None);
    // Still serving, and still `up`: nothing restarts replica 3 any more.
    put(&mut c, "k", "v").await;
    std::thread::sleep(Duration::from_secs(2));
    assert!(!replica_alive(pid));
    let (text, code) = status(&up.config);
    assert_eq!(code, 2, "{text}");
    let note = format!("replica 3: byzfs up (pid {up_pid}) gave up on it");
    assert!(text.contains(&note), "{text}");
    assert!(text.contains(&hand), "{text}");

    // The printed command, as printed (`sh` prints the background job's pid).
    let cmd = hand.trim_start_matches("restart it by hand: ");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{cmd} echo $!"))
        .output()
        .unwrap();
    let by_hand: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let back = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_status(&up.config, "4 of 4 replicas in step", 0, TIMEOUT)
    }));
    let _ = kill(Pid::from_raw(by_hand), Signal::SIGKILL);
    back.unwrap();
}

/// Exit codes for monitoring scripts: 0 while the cluster tolerates another fault, 2 when it
/// tolerates none (one of four down), 1 when it cannot serve (two down); a replica not run
/// by `byzfs up` gets the general form of the restart command.
#[test]
fn status_exit_codes_say_how_many_more_faults_the_cluster_tolerates() {
    let _guard = serial();
    let mut p = Procs::new("memory");
    let config = p.config();
    wait_status(&config, "4 of 4 replicas in step", 0, DEADLINE);
    p.kill(&[2]);
    let text = wait_status(&config, "3 of 4 replicas in step", 2, DEADLINE);
    let general = format!(
        "replica 2: restart it by hand as it ran before, e.g. `byzfs replica --config {} --id \
         2 --data DATA_DIR [--service fs]`",
        config.display()
    );
    assert!(text.contains(&general), "{text}");
    assert!(
        text.contains("replica 2: unreachable (not running or not listening)\n"),
        "{text}"
    );
    p.kill(&[0]);
    let text = wait_status(&config, "2 of 4 replicas reachable", 1, DEADLINE);
    assert!(!text.contains("too slow"), "{text}");
}

/// The mount of `byzfs up --mount` stays up while a replica is killed and restarted: files
/// written meanwhile read back, and `up` still runs.
#[test]
fn the_mount_stays_while_a_replica_is_restarted() {
    if skip_without_fuse() {
        return;
    }
    let _guard = serial();
    let mut up = Up::start_mounted(&[]);
    let mnt = up.mountpoint.clone().unwrap();
    std::fs::write(mnt.join("before"), b"1").unwrap();
    for i in [0, 2] {
        let old = up.pids[i];
        up.signal(i, Signal::SIGKILL);
        std::fs::write(mnt.join(format!("during-{i}")), b"2").unwrap();
        wait_new_pid(&up.config, i as i64, old, Duration::from_secs(30));
        wait_status(&up.config, "4 of 4 replicas in step", 0, TIMEOUT);
    }
    assert!(up.child.try_wait().unwrap().is_none(), "byzfs up exited");
    assert!(is_mounted(&mnt));
    let mut names: Vec<String> = std::fs::read_dir(&mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["before", "during-0", "during-2"]);
    assert_eq!(std::fs::read(mnt.join("during-0")).unwrap(), b"2");
}
