//! `byzfs up --service fs` and `byzfs mount`: ordinary file-system calls through FUSE reach
//! the replicated file service. Skipped (with a message) where FUSE is not available.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::BufRead as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_byzfs");
const TIMEOUT: Duration = Duration::from_secs(60);

fn fuse_available() -> bool {
    Path::new("/dev/fuse").exists()
        && std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("fusermount3").exists()))
}

/// Sends SIGTERM to `child` and waits for it.
fn stop(child: &mut Child) {
    let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stops the mount and the cluster even if the test fails half-way.
struct Guard {
    mount: Option<Child>,
    up: Child,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(m) = &mut self.mount {
            stop(m);
        }
        stop(&mut self.up);
    }
}

fn is_mounted(mnt: &Path) -> bool {
    std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().nth(1) == mnt.to_str())
}

#[test]
fn mount_serves_posix_calls() {
    if !fuse_available() {
        eprintln!("skipped: no /dev/fuse or fusermount3");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cdir = dir.path().join("c");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mut up = Command::new(BIN)
        .args([
            "up",
            "--replicas",
            "4",
            "--base-port",
            "0",
            "--service",
            "fs",
        ])
        .arg("--dir")
        .arg(&cdir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = up.stdout.take().unwrap();
    let mut guard = Guard { mount: None, up };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx.recv_timeout(left).expect("byzfs up came up");
        if line.starts_with("Press Ctrl-C") {
            break;
        }
    }
    let mount = Command::new(BIN)
        .arg("mount")
        .arg("--config")
        .arg(cdir.join("cluster.toml"))
        .arg(&mnt)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    guard.mount = Some(mount);
    let start = Instant::now();
    while !is_mounted(&mnt) {
        assert!(start.elapsed() < TIMEOUT, "byzfs mount did not mount");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Files, directories, data.
    let d = mnt.join("dir");
    std::fs::create_dir_all(d.join("sub")).unwrap();
    let f = d.join("file");
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&f, &data).unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), data);
    assert_eq!(std::fs::metadata(&f).unwrap().len(), data.len() as u64);
    // Rename, hard and symbolic links, permissions, truncation.
    let g = mnt.join("moved");
    std::fs::rename(&f, &g).unwrap();
    assert!(!f.exists());
    std::fs::hard_link(&g, d.join("hard")).unwrap();
    assert_eq!(std::fs::metadata(&g).unwrap().nlink(), 2);
    std::os::unix::fs::symlink("moved", mnt.join("sym")).unwrap();
    assert_eq!(
        std::fs::read_link(mnt.join("sym")).unwrap(),
        Path::new("moved")
    );
    assert_eq!(std::fs::read(mnt.join("sym")).unwrap(), data);
    std::fs::set_permissions(&g, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(std::fs::metadata(&g).unwrap().mode() & 0o777, 0o600);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&g)
        .unwrap()
        .set_len(10)
        .unwrap();
    assert_eq!(std::fs::read(d.join("hard")).unwrap(), &data[..10]);
    // Listing, errors.
    let mut names: Vec<String> = std::fs::read_dir(&mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["dir", "moved", "sym"]);
    let e = std::fs::remove_dir(&d).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(39), "ENOTEMPTY: {e}");
    let e = std::fs::create_dir(&d).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
    let e = std::fs::rename(&d, d.join("sub/inside")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(22), "EINVAL: {e}");
    std::fs::remove_file(d.join("hard")).unwrap();
    std::fs::remove_dir(d.join("sub")).unwrap();
    std::fs::remove_dir(&d).unwrap();
    assert!(!d.exists());

    // An open file that is removed keeps working until closed (silly rename), then is gone.
    use std::io::{Read as _, Seek as _, Write as _};
    let tmp = mnt.join("tmp");
    let mut open = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .write(true)
        .truncate(true)
        .open(&tmp)
        .unwrap();
    open.write_all(b"still here").unwrap();
    std::fs::remove_file(&tmp).unwrap();
    assert!(!tmp.exists());
    let mut back = String::new();
    open.seek(std::io::SeekFrom::Start(0)).unwrap();
    open.read_to_string(&mut back).unwrap();
    assert_eq!(back, "still here");
    // Replaced by a rename while open: the same.
    std::fs::write(mnt.join("new"), b"new").unwrap();
    let old = mnt.join("old");
    std::fs::write(&old, b"old").unwrap();
    let mut held = std::fs::File::open(&old).unwrap();
    std::fs::rename(mnt.join("new"), &old).unwrap();
    let mut s = String::new();
    held.read_to_string(&mut s).unwrap();
    assert_eq!(s, "old");
    assert_eq!(std::fs::read(&old).unwrap(), b"new");
    drop(open);
    drop(held);
    // The kernel sends RELEASE asynchronously after close: allow it a moment.
    let listing = || {
        let mut names: Vec<String> = std::fs::read_dir(&mnt)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    let start = Instant::now();
    while listing() != ["moved", "old", "sym"] && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        listing(),
        ["moved", "old", "sym"],
        "hidden files removed at close"
    );

    drop(guard);
    assert!(!is_mounted(&mnt), "unmounted on SIGTERM");
}
