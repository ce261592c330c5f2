//! Record locks between mounts of one cluster (`crates/byzfs-fuse/src/locks.rs`): `fcntl`
//! and `flock` locks taken through one mount hold against the others, are released at
//! close, wake a blocked waiter, can be interrupted by a signal, protect data written under
//! them, and lapse with the lease of a mount that died; a file only one mount locks has its
//! locks decided at that mount (a delegation), with no round trip per lock. Skipped, with a
//! message, only where FUSE is unavailable.

use crate::common;

use common::{skip_without_fuse, Mount, Up};
use nix::fcntl::{fcntl, FcntlArg};
use nix::libc;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{FileExt as _, OpenOptionsExt as _};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

const RD: i32 = libc::F_RDLCK;
const WR: i32 = libc::F_WRLCK;
const UN: i32 = libc::F_UNLCK;

fn flock_of(kind: i32, start: i64, len: i64) -> libc::flock {
    libc::flock {
        l_type: kind as i16,
        l_whence: libc::SEEK_SET as i16,
        l_start: start,
        l_len: len,
        l_pid: 0,
    }
}

/// `F_SETLK` (or `F_SETLKW` if `wait`) of `kind` on `len` bytes from `start` (0: to the end).
fn setlk(f: &File, kind: i32, start: i64, len: i64, wait: bool) -> nix::Result<()> {
    let fl = flock_of(kind, start, len);
    let arg = if wait {
        FcntlArg::F_SETLKW(&fl)
    } else {
        FcntlArg::F_SETLK(&fl)
    };
    fcntl(f, arg).map(|_| ())
}

/// `F_GETLK`: the conflicting lock's type, start and length (`F_UNLCK` if none) and pid.
fn getlk(f: &File, kind: i32, start: i64, len: i64) -> (i32, i64, i64, i32) {
    let mut fl = flock_of(kind, start, len);
    fcntl(f, FcntlArg::F_GETLK(&mut fl)).unwrap();
    (i32::from(fl.l_type), fl.l_start, fl.l_len, fl.l_pid)
}

fn rw(path: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap()
}

/// Runs `f` in a thread; its result arrives on the channel when it returns.
fn in_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Receiver<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx
}

/// Asserts that what `rx` waits for does not happen within `quiet` (it is blocked).
#[track_caller]
fn still_blocked<T>(rx: &Receiver<T>, quiet: Duration, what: &str) {
    assert!(
        matches!(rx.recv_timeout(quiet), Err(RecvTimeoutError::Timeout)),
        "{what}: not blocked"
    );
}

/// `flock(1)` (util-linux) on `path` with `args`, as a child process: its pid, and its exit
/// status when it ends.
fn flock_cmd(path: &Path, args: &[&str]) -> (Pid, Receiver<ExitStatus>) {
    let mut child = Command::new("flock")
        .args(args)
        .arg(path)
        .arg("true")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pid = Pid::from_raw(child.id() as i32);
    (pid, in_thread(move || child.wait().unwrap()))
}

#[test]
fn locks_hold_between_mounts() {
    if skip_without_fuse() {
        return;
    }
    let up = Up::start_mounted(&["--timeout-ms", "120000"]);
    let a = up.mountpoint.clone().unwrap();
    let dir = up.dir.path();
    let b_mount = Mount::start(&up.config, &dir.join("mnt-b"), &dir.join("mount-b.log"));
    let b = b_mount.mnt.clone();

    let t = Instant::now();
    fcntl_between_mounts(&a, &b);
    flock_between_mounts(&a, &b);
    counter_under_locks(&a, &b);
    deadlock_between_mounts(&a, &b);
    eprintln!("locks between two mounts: {:?}", t.elapsed());

    let t = Instant::now();
    deadlock_on_delegated_files(&a);
    eprintln!("a deadlock on one mount: {:?}", t.elapsed());

    let t = Instant::now();
    delegation_spares_round_trips(&up, &a);
    eprintln!("a delegation: {:?}", t.elapsed());

    let t = Instant::now();
    lease_of_a_killed_mount(&up, &a);
    eprintln!("lease of a killed mount: {:?}", t.elapsed());
}

/// `F_SETLK` conflicts, `F_GETLK`, release at close, and a blocked `F_SETLKW` granted when
/// the holder closes.
fn fcntl_between_mounts(a: &Path, b: &Path) {
    fs::write(a.join("f"), vec![b'x'; 100]).unwrap();
    let held = rw(&a.join("f"));
    setlk(&held, WR, 20, 10, false).unwrap();
    let other = rw(&b.join("f"));
    assert_eq!(
        setlk(&other, WR, 25, 10, false),
        Err(nix::errno::Errno::EAGAIN),
        "a write lock overlapping one held through the other mount"
    );
    assert_eq!(
        setlk(&other, RD, 0, 21, false),
        Err(nix::errno::Errno::EAGAIN)
    );
    // The holder is a process of another client: its pid is not reported.
    assert_eq!(getlk(&other, RD, 0, 0), (WR, 20, 10, 0));
    setlk(&other, WR, 30, 0, false).expect("the bytes after the held range are free");
    // A second descriptor of the holder's file: closing it drops the holder's locks (POSIX).
    drop(File::open(a.join("f")).unwrap());
    setlk(&other, WR, 20, 10, false).expect("released by the holder's close");
    assert_eq!(getlk(&held, RD, 0, 0).0, WR, "now held through B");
    drop(other);
    assert_eq!(
        getlk(&held, WR, 0, 0).0,
        UN,
        "B's close released everything"
    );

    // F_SETLKW waits for the holder's close.
    setlk(&held, WR, 0, 0, false).unwrap();
    let b_path = b.join("f");
    let waiter = in_thread(move || {
        let f = rw(&b_path);
        let t = Instant::now();
        setlk(&f, WR, 0, 0, true).unwrap();
        t.elapsed()
    });
    still_blocked(&waiter, Duration::from_millis(500), "F_SETLKW while held");
    drop(held);
    let waited = waiter
        .recv_timeout(Duration::from_secs(10))
        .expect("F_SETLKW not granted after the holder's close");
    assert!(waited >= Duration::from_millis(400), "waited {waited:?}");
}

/// `EDEADLK`: a blocking request that would wait for an owner waiting for it fails, on
/// either mount, and the other waiter is granted once the cycle is broken. (This process's
/// locks through two mounts belong to two owners: each mount is another client.)
fn deadlock_between_mounts(a: &Path, b: &Path) {
    fs::write(a.join("dx"), b"x").unwrap();
    fs::write(a.join("dy"), b"y").unwrap();
    // Taken twice each, so the delegations are in play too: A holds dx, B holds dy.
    let ax = rw(&a.join("dx"));
    setlk(&ax, WR, 0, 0, false).unwrap();
    let by = rw(&b.join("dy"));
    setlk(&by, WR, 0, 0, false).unwrap();
    // A's owner waits for dy...
    let a_dy = a.join("dy");
    let a_waits = in_thread(move || {
        let f = rw(&a_dy);
        let r = setlk(&f, WR, 0, 0, true);
        (r, f)
    });
    still_blocked(&a_waits, Duration::from_millis(500), "F_SETLKW on dy");
    // ...and B's owner waits for dx: a cycle. The wait that closes it at the replicas gets
    // `EDEADLK` (as on Linux, only that one fails). That is usually B's, but A's wait on
    // dy reaches the replicas only once B's mount gave dy's delegation back, at its next
    // poll, which can come after B's wait; so either may (a run once hung here when only B
    // was expected to).
    let b_dx = b.join("dx");
    let t = Instant::now();
    let b_waits = in_thread(move || {
        let f = rw(&b_dx);
        let r = setlk(&f, WR, 0, 0, true);
        (r, f)
    });
    let first = loop {
        if let Ok(got) = b_waits.recv_timeout(Duration::from_millis(50)) {
            break ("B", got);
        }
        if let Ok(got) = a_waits.try_recv() {
            break ("A", got);
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no F_SETLKW of the cycle failed within 20 s"
        );
    };
    let (who, (r, f)) = first;
    assert_eq!(r, Err(nix::errno::Errno::EDEADLK), "{who}'s F_SETLKW");
    eprintln!("EDEADLK to {who} after {:?}", t.elapsed());
    drop(f);
    // The other still waits; its holder lets go, and its wait ends with the lock.
    let (other, holder, mine) = match who {
        "B" => (&a_waits, by, ax),
        _ => (&b_waits, ax, by),
    };
    still_blocked(other, Duration::from_millis(300), "the other waiter");
    drop(holder);
    let (r, f) = other
        .recv_timeout(Duration::from_secs(10))
        .expect("F_SETLKW not granted after the cycle broke");
    r.expect("granted");
    drop(f);
    drop(mine);
}

/// A Perl child (Perl is part of every Debian system) that write-locks `hold`, prints
/// `locked`, waits for a line on its stdin, then asks `F_SETLKW` on `want` and prints
/// `granted` or `errno N`.
const LOCKER: &str = r#"
use strict; use Fcntl; $| = 1;
my ($hold, $want) = @ARGV;
sub lk { my ($fh, $cmd) = @_; my $fl = pack("ssx4qqlx4", F_WRLCK, 0, 0, 0, 0); fcntl($fh, $cmd, $fl) }
open(my $h, "+<", $hold) or die "open $hold: $!";
lk($h, F_SETLK) or die "lock $hold: $!";
print "locked\n";
my $go = <STDIN>;
open(my $w, "+<", $want) or die "open $want: $!";
if (lk($w, F_SETLKW)) { print "granted\n" } else { print "errno ", $!+0, "\n" }
"#;

/// `EDEADLK` between two processes of one mount whose files are delegated to it: the
/// waits go to the replicas (the mount gives the delegations back) and the cycle is found.
fn deadlock_on_delegated_files(a: &Path) {
    use std::io::{BufRead as _, BufReader, Write as _};
    let (x, y) = (a.join("lx"), a.join("ly"));
    fs::write(&x, b"x").unwrap();
    fs::write(&y, b"y").unwrap();
    let mine = rw(&x);
    setlk(&mine, WR, 0, 0, false).unwrap();
    let mut child = Command::new("perl")
        .args(["-e", LOCKER])
        .arg(&y)
        .arg(&x)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("perl");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "locked\n");
    // This process waits for the child's file...
    let waiter = in_thread(move || {
        let f = rw(&y);
        (setlk(&f, WR, 0, 0, true), f)
    });
    still_blocked(
        &waiter,
        Duration::from_millis(500),
        "F_SETLKW on the child's file",
    );
    // ...and the child asking for this process's file would close a cycle.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(
        line,
        format!("errno {}\n", libc::EDEADLK),
        "the child's F_SETLKW"
    );
    // The child's exit releases its lock: this process's wait ends with it.
    assert!(child.wait().unwrap().success());
    let (r, f) = waiter
        .recv_timeout(Duration::from_secs(10))
        .expect("F_SETLKW not granted after the child exited");
    r.expect("granted");
    drop(f);
    drop(mine);
}

/// `flock(1)` through two mounts: exclusive locks conflict, a blocked one is interrupted by
/// SIGINT (fuser cannot pass the kernel's interrupt; the mount watches the waiter's
/// signals) and granted once the holder lets go.
fn flock_between_mounts(a: &Path, b: &Path) {
    fs::write(a.join("g"), b"flock").unwrap();
    let holder = File::open(a.join("g")).unwrap();
    let lock = nix::fcntl::Flock::lock(holder, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| e)
        .unwrap();
    let limit = Duration::from_secs(10);
    let (_, refused) = flock_cmd(&b.join("g"), &["-n"]);
    let status = refused.recv_timeout(limit).unwrap();
    assert_eq!(
        status.code(),
        Some(1),
        "flock -n through B while A holds it"
    );
    let (pid, blocked) = flock_cmd(&b.join("g"), &[]);
    still_blocked(&blocked, Duration::from_millis(500), "flock through B");
    kill(pid, Signal::SIGINT).unwrap();
    let status = blocked
        .recv_timeout(limit)
        .expect("a waiting flock did not end on SIGINT");
    assert!(!status.success(), "interrupted, not granted: {status:?}");
    let (_, waiting) = flock_cmd(&b.join("g"), &[]);
    still_blocked(&waiting, Duration::from_millis(300), "flock through B");
    drop(lock.unlock().map_err(|(_, e)| e).unwrap());
    let status = waiting
        .recv_timeout(limit)
        .expect("flock through B not granted after A's unlock");
    assert!(status.success());
}

/// Two writers, one per mount, each adding 1 to a counter in a file under a write lock,
/// with their files kept open: every increment must count. The lock publishes the holder's
/// writes held back by the mount, and a lock on a file changed elsewhere drops the stale
/// cached pages of it.
fn counter_under_locks(a: &Path, b: &Path) {
    const ROUNDS: u64 = 25;
    fs::write(a.join("counter"), 0u64.to_le_bytes()).unwrap();
    let workers: Vec<_> = [a.join("counter"), b.join("counter")]
        .into_iter()
        .map(|path| {
            std::thread::spawn(move || {
                let f = rw(&path);
                for _ in 0..ROUNDS {
                    setlk(&f, WR, 0, 0, true).unwrap();
                    let mut buf = [0u8; 8];
                    f.read_exact_at(&mut buf, 0).unwrap();
                    let next = u64::from_le_bytes(buf) + 1;
                    f.write_all_at(&next.to_le_bytes(), 0).unwrap();
                    setlk(&f, UN, 0, 0, false).unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let end = fs::read(b.join("counter")).unwrap();
    assert_eq!(
        u64::from_le_bytes(end.try_into().unwrap()),
        2 * ROUNDS,
        "increments lost"
    );
}

/// Many locks on a file no other mount locks cost one round trip (the lock that brings the
/// delegation) and one at unmount (giving it back); another mount's lock then sees them.
fn delegation_spares_round_trips(up: &Up, a: &Path) {
    let (d, log) = Mount::logged(up, "d", &[], &[("RUST_LOG", "info")]);
    fs::write(a.join("solo"), vec![b's'; 64]).unwrap();
    let f = rw(&d.mnt.join("solo"));
    for i in 0..100 {
        setlk(&f, WR, i, 1, false).unwrap();
        assert_eq!(getlk(&f, WR, 0, 0).0, UN, "own locks never conflict");
        setlk(&f, UN, i, 1, false).unwrap();
    }
    setlk(&f, RD, 7, 3, false).unwrap();
    // Another mount's lock recalls the delegation: it sees the read lock, as it is now.
    let other = rw(&a.join("solo"));
    let t = Instant::now();
    assert_eq!(
        setlk(&other, WR, 0, 0, false),
        Err(nix::errno::Errno::EAGAIN),
        "the delegated read lock holds against another mount"
    );
    eprintln!("recall answered in {:?}", t.elapsed());
    assert_eq!(getlk(&other, WR, 0, 0), (RD, 7, 3, 0));
    setlk(&other, WR, 10, 5, false).expect("beyond the read lock");
    drop((f, other));
    drop(d);
    let text = fs::read_to_string(&log).unwrap();
    let sent = text
        .lines()
        .find(|l| l.contains("operations sent"))
        .unwrap_or_else(|| panic!("no operation tally in the mount's log:\n{text}"));
    assert!(sent.contains("lock_delegate=1 "), "{sent}");
    assert!(
        !sent.contains(" setlk="),
        "no lock went to the replicas: {sent}"
    );
    assert!(!sent.contains("getlk="), "{sent}");
    let tally = text
        .lines()
        .find(|l| l.contains("lock delegations"))
        .unwrap_or_else(|| panic!("no delegation tally:\n{text}"));
    let here: u64 = tally
        .split("answered_here=")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{tally}"));
    assert!(here >= 300, "{tally}");
    assert!(tally.contains("recalled=1"), "{tally}");
}

/// Names in the orphan directory, seen through `mnt`.
fn orphans(mnt: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(mnt.join(".byzfs-orphans"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A mount killed while holding a lock: the others get the lock once its lease lapses (30 s
/// of agreed time), not before. The files it kept hidden (removed while open, `O_TMPFILE`)
/// are swept by the next mount to start, while a live mount's stay.
fn lease_of_a_killed_mount(up: &Up, a: &Path) {
    let dir = up.dir.path();
    // A live mount's hidden file: A keeps it open through all of this.
    fs::write(a.join("kept-open"), b"still here").unwrap();
    let kept = File::open(a.join("kept-open")).unwrap();
    fs::remove_file(a.join("kept-open")).unwrap();
    let live = orphans(a);
    assert_eq!(live.len(), 1, "{live:?}");

    let c = Mount::start(&up.config, &dir.join("mnt-c"), &dir.join("mount-c.log"));
    fs::write(a.join("lease"), b"l").unwrap();
    let held = rw(&c.mnt.join("lease"));
    setlk(&held, WR, 0, 0, false).unwrap();
    // C's hidden files: one removed while open, one O_TMPFILE.
    fs::write(c.mnt.join("doomed"), vec![5u8; 100_000]).unwrap();
    let doomed = File::open(c.mnt.join("doomed")).unwrap();
    fs::remove_file(c.mnt.join("doomed")).unwrap();
    let tmp = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .open(&c.mnt)
        .unwrap();
    tmp.write_all_at(b"never named", 0).unwrap();
    tmp.sync_all().unwrap();
    let with_c = orphans(a);
    assert_eq!(with_c.len(), 3, "{with_c:?}");
    let taken = Instant::now();
    kill(Pid::from_raw(c.child.id() as i32), Signal::SIGKILL).unwrap();
    drop((doomed, tmp));
    // A blocked F_SETLKW through A: its waiter retries until the lease lapses.
    let path = a.join("lease");
    let granted = in_thread(move || {
        let f = rw(&path);
        setlk(&f, WR, 0, 0, true).map(|()| f)
    });
    let f = granted
        .recv_timeout(Duration::from_secs(90))
        .expect("the killed mount's lock never lapsed")
        .unwrap();
    let got = taken.elapsed();
    assert!(
        got >= Duration::from_secs(25),
        "lock of a killed mount taken after {got:?}, before its lease lapsed"
    );
    drop((held, f));
    drop(c);
    assert_eq!(orphans(a), with_c, "nothing swept them yet");

    // The next mount to start sweeps what C left; A's file, under A's lease, stays.
    let t = Instant::now();
    let d = Mount::start(&up.config, &dir.join("mnt-d"), &dir.join("mount-d.log"));
    poll_until("the killed mount's hidden files swept", || {
        orphans(a) == live
    });
    eprintln!("swept {:?} after the next mount started", t.elapsed());
    let mut text = String::new();
    std::io::Read::read_to_string(&mut &kept, &mut text).unwrap();
    assert_eq!(text, "still here");
    drop(kept);
    // The kernel sends the release after `close` returns.
    poll_until("A's last close removes its own", || orphans(a).is_empty());
    drop(d);
}

/// Waits up to 30 s for `cond`, looking every 100 ms.
#[track_caller]
fn poll_until(what: &str, cond: impl Fn() -> bool) {
    poll_within(what, Duration::from_secs(30), cond);
}

/// Waits up to `limit` for `cond`, looking every 100 ms.
#[track_caller]
fn poll_within(what: &str, limit: Duration, cond: impl Fn() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Where the orphan directory cannot be had (a file has its name), a mount hides a file
/// removed while open in the file's own directory, under its lease. Killed, it leaves the
/// file there: another mount's `rmdir` of the directory fails (`ENOTEMPTY`) while the dead
/// mount's lease runs, then sweeps the file (`Op::SweepDir`) and removes the directory.
#[test]
fn a_killed_mounts_files_hidden_in_their_own_directory_go_at_rmdir() {
    if skip_without_fuse() {
        return;
    }
    let up = Up::start_mounted(&["--timeout-ms", "120000"]);
    let a = up.mountpoint.clone().unwrap();
    let dir = up.dir.path();
    fs::write(a.join(".byzfs-orphans"), b"not a directory").unwrap();
    let c = Mount::start(&up.config, &dir.join("mnt-c"), &dir.join("mount-c.log"));
    fs::create_dir(c.mnt.join("d")).unwrap();
    fs::write(c.mnt.join("d/doomed"), vec![5u8; 50_000]).unwrap();
    let doomed = File::open(c.mnt.join("d/doomed")).unwrap();
    fs::remove_file(c.mnt.join("d/doomed")).unwrap();
    // Only C's own listing leaves its hidden name out.
    let listed = |m: &Path| -> Vec<String> {
        fs::read_dir(m.join("d"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    assert!(listed(&c.mnt).is_empty());
    let hidden = listed(&a);
    assert!(
        hidden.len() == 1 && hidden[0].starts_with(".byzfs-silly-"),
        "{hidden:?}"
    );
    let rmdir = || fs::remove_dir(a.join("d")).map_err(|e| e.raw_os_error());
    assert_eq!(rmdir(), Err(Some(libc::ENOTEMPTY)), "C is alive");
    let mut data = Vec::new();
    std::io::Read::read_to_end(&mut &doomed, &mut data).unwrap();
    assert_eq!(data.len(), 50_000, "C's open file survived A's sweep");
    let taken = Instant::now();
    kill(Pid::from_raw(c.child.id() as i32), Signal::SIGKILL).unwrap();
    drop(doomed);
    drop(c);
    poll_within(
        "rmdir once the killed mount's lease lapsed",
        Duration::from_secs(90),
        || rmdir().is_ok(),
    );
    let got = taken.elapsed();
    eprintln!("directory removed {got:?} after its hidden file's mount was killed");
    assert!(
        got >= Duration::from_secs(15),
        "swept after {got:?}, before the killed mount's lease lapsed"
    );
}

/// A mount stopped past its lease (`SIGSTOP` for 35 s, as a laptop suspended) while one
/// process takes and drops `fcntl` locks on a file another mount locks too (so each goes to
/// the replicas, in flight without the mount's lock) and another reads: both go on once it
/// resumes, the lapse is told once, and at unmount the mount leaves no lock behind (the
/// other mount takes the whole file at once). The mount's books follow the lapse by the
/// place of the reply that told it (`crates/byzfs-fuse/src/lease.rs`).
#[test]
fn a_lapse_of_the_lease_under_load_leaves_no_lock_behind() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    if skip_without_fuse() {
        return;
    }
    let up = Up::start_mounted(&["--timeout-ms", "120000"]);
    let b = up.mountpoint.clone().unwrap();
    let (a, a_log) = Mount::logged(&up, "a", &[], &[("RUST_LOG", "info")]);
    fs::write(b.join("shared"), vec![0u8; 4096]).unwrap();
    for i in 0..8u8 {
        fs::write(b.join(format!("r{i}")), vec![i; 2048]).unwrap();
    }
    // B's lock on the last byte: nobody's delegation; A's locks go to the replicas.
    let b_file = rw(&b.join("shared"));
    setlk(&b_file, RD, 4000, 1, false).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let (locked, read) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let locker = {
        let (stop, locked, path) = (stop.clone(), locked.clone(), a.mnt.join("shared"));
        in_thread(move || -> nix::Result<()> {
            let f = rw(&path);
            while !stop.load(Ordering::Relaxed) {
                setlk(&f, WR, 0, 100, true)?;
                f.write_all_at(b"locked", 0).unwrap();
                setlk(&f, UN, 0, 100, false)?;
                locked.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })
    };
    let reader = {
        let (stop, read, mnt) = (stop.clone(), read.clone(), a.mnt.clone());
        in_thread(move || {
            while !stop.load(Ordering::Relaxed) {
                for i in 0..8u8 {
                    assert_eq!(fs::read(mnt.join(format!("r{i}"))).unwrap(), vec![i; 2048]);
                }
                read.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    poll_until("both processes under way", || {
        locked.load(Ordering::Relaxed) > 5 && read.load(Ordering::Relaxed) > 5
    });
    let pid = Pid::from_raw(a.child.id() as i32);
    kill(pid, Signal::SIGSTOP).unwrap();
    std::thread::sleep(Duration::from_secs(35));
    kill(pid, Signal::SIGCONT).unwrap();
    let (l0, r0) = (locked.load(Ordering::Relaxed), read.load(Ordering::Relaxed));
    poll_until("both go on after the lapse", || {
        locked.load(Ordering::Relaxed) > l0 + 5 && read.load(Ordering::Relaxed) > r0 + 5
    });
    stop.store(true, Ordering::Relaxed);
    locker
        .recv_timeout(Duration::from_secs(60))
        .unwrap()
        .expect("every lock and unlock granted");
    reader.recv_timeout(Duration::from_secs(60)).unwrap();
    drop(a);

    // Nothing of A's left at the replicas: B takes the whole file now, not after A's lease.
    let whole = rw(&b.join("shared"));
    setlk(&whole, WR, 0, 0, false).expect("a lock of the unmounted mount left behind");
    let log = fs::read_to_string(&a_log).unwrap();
    let summary = log
        .lines()
        .find(|l| l.contains("lease-bearing calls"))
        .unwrap_or_else(|| panic!("no unmount summary in the mount's log:\n{log}"));
    assert!(summary.contains("lapses=1"), "{summary}");
    assert!(!summary.contains("calls_waited_unlocked=0 "), "{summary}");
    eprintln!("{summary}");
}
