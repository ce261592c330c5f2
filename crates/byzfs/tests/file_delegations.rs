//! File delegations between mounts (`crates/byzfs-fuse/src/held_files.rs`): a mount that
//! opens a file for writing, which no other mount uses, holds it: its later `open`s, its
//! `close`s and its `stat`s ask nobody, and its writes go back in the background; another
//! mount's `open` recalls the file after they are applied (close-to-open holds); two mounts
//! writing one file take turns and lose nothing; a mount killed with writes held loses only
//! what no `fsync` covered, and never part of a write. Skipped, with a message, only where
//! FUSE is unavailable.

use crate::common;

use common::{skip_without_fuse, Mount, Up};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::fs::{self, File, OpenOptions};
use std::io::{Read as _, Write as _};
use std::os::unix::fs::FileExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// How many operations named `what` a mount logging `byzfs_fuse::cluster=trace` to `log`
/// sent, under its lock or in a lane.
fn sent(log: &Path, what: &str) -> usize {
    let text = fs::read_to_string(log).unwrap();
    ["send op", "send in a lane op"]
        .iter()
        .map(|s| text.matches(&format!("{s}=\"{what}\"")).count())
        .sum()
}

/// The operations `log` says were sent naming file `ino` by handle (`send op="…"
/// files=[…]`, `send in a lane op="…" files=[…]`), by name, in order.
fn sent_for(log: &Path, ino: u64) -> Vec<String> {
    let text = fs::read_to_string(log).unwrap();
    let mark = format!("files=[{ino}]");
    text.lines()
        .filter(|l| l.contains(&mark))
        .filter_map(|l| l.split_once(" op=\""))
        .map(|(_, op)| op.split('"').next().unwrap_or("").to_string())
        .collect()
}

/// A cluster whose own mount A made `d/f` (durable), and a second mount B, the kernel's
/// caches off and its sends logged.
fn a_file_made_elsewhere() -> (Up, Mount, std::path::PathBuf) {
    let up = Up::start_mounted(&["--timeout-ms", "120000"]);
    let a = up.mountpoint.clone().unwrap();
    fs::create_dir(a.join("d")).unwrap();
    let mut f = File::create(a.join("d/f")).unwrap();
    f.write_all(b"made on A").unwrap();
    f.sync_all().unwrap();
    File::open(a.join("d")).unwrap().sync_all().unwrap();
    let log_at = [("RUST_LOG", "byzfs_fuse::cluster=trace")];
    let (b, log) = Mount::logged(&up, "b", &["--cache-timeout", "0"], &log_at);
    (up, b, log)
}

#[test]
fn a_held_files_open_close_and_stat_ask_nobody_and_anothers_open_sees_its_writes() {
    if skip_without_fuse() {
        return;
    }
    let (up, b, log) = a_file_made_elsewhere();
    let on_b = b.mnt.join("d/f");
    let on_a = up.mountpoint.clone().unwrap().join("d/f");
    let round = |i: usize| format!("round {i:02} on B");
    // The first open for writing asks for the delegation (in place of its look at the
    // attributes); the rest of B's work on the file asks nobody but the write-back.
    let ino = fs::metadata(&on_b).unwrap().ino();
    let asked = |from: usize| sent_for(&log, ino)[from..].to_vec();
    let base = sent_for(&log, ino).len();
    let h = OpenOptions::new().write(true).open(&on_b).unwrap();
    h.write_all_at(round(0).as_bytes(), 0).unwrap();
    drop(h);
    // (The kernel's look at the attributes before the `open`, the cache being off.)
    let first = asked(base);
    assert_eq!(
        first.last().map(String::as_str),
        Some("delegate_file"),
        "{first:?}"
    );
    let held_from = base + first.len();
    // Open, close, read back: the first read sends the held write, and its whole-file
    // answer is kept (`mine.rs`); nothing asked after it.
    for _ in 0..5 {
        let h = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&on_b)
            .unwrap();
        assert_eq!(fs::read(&on_b).unwrap(), round(0).as_bytes());
        drop(h);
    }
    assert_eq!(asked(held_from), ["write_at", "read"]);
    let held_from = held_from + 2;
    // Written, closed, stated, read back: the `stat` after a write is answered from the
    // write held (sent at its own time, so its attributes are the replicas' to be:
    // `gather.rs` `expected`), the read from the bytes kept, the `close` sends nothing:
    // only the write-back goes, within a second.
    for i in 1..20 {
        let mut h = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&on_b)
            .unwrap();
        h.write_all_at(round(i).as_bytes(), 0).unwrap();
        assert_eq!(h.metadata().unwrap().len(), round(i).len() as u64);
        let mut back = String::new();
        h.read_to_string(&mut back).unwrap();
        assert_eq!(back, round(i));
    }
    let all = asked(held_from);
    assert!(
        all.iter().all(|op| op == "write_at"),
        "B asked the cluster about its held file: {all:?}"
    );
    assert!(all.len() < 10, "{all:?}");
    // The attributes B answered are the ones the replicas give (A stats it after the
    // recall below).
    let mine = fs::metadata(&on_b).unwrap();
    // A's open recalls the file: B writes back first, and A reads B's last round.
    assert_eq!(fs::read(&on_a).unwrap(), round(19).as_bytes());
    let theirs = fs::metadata(&on_a).unwrap();
    let key = |m: &fs::Metadata| {
        (
            m.len(),
            m.blocks(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        )
    };
    assert_eq!(key(&mine), key(&theirs));
    assert!(sent(&log, "return_file") >= 1);
    // A writes it now; B's next open (no longer held: B gave it back) sees A's write.
    let h = OpenOptions::new().write(true).open(&on_a).unwrap();
    h.write_all_at(b"A again", 0).unwrap();
    drop(h);
    let want = format!("A again{}", &round(19)[7..]);
    assert_eq!(fs::read_to_string(&on_b).unwrap(), want);
    // B was refused while A held it, or got it back after A gave it back: either way the
    // bytes are the same at both.
    assert_eq!(fs::read_to_string(&on_a).unwrap(), want);
}

/// Two mounts writing one file at once, each its own records, each record an `open`,
/// a write and a `close`: the delegation goes back and forth (recall under load), and
/// every record of both lands.
#[test]
fn two_mounts_writing_one_file_at_once_lose_no_record() {
    if skip_without_fuse() {
        return;
    }
    let (up, b, log) = a_file_made_elsewhere();
    let on_a = up.mountpoint.clone().unwrap().join("d/f");
    let on_b = b.mnt.join("d/f");
    const RECORDS: u64 = 60;
    const SIZE: u64 = 32;
    let record = |tag: &str, i: u64| format!("{tag} record {i:04}").into_bytes();
    let writer = |path: std::path::PathBuf, tag: &'static str, first: u64| {
        std::thread::spawn(move || {
            for i in 0..RECORDS {
                let h = OpenOptions::new().write(true).open(&path).unwrap();
                let mut r = format!("{tag} record {i:04}").into_bytes();
                r.resize(SIZE as usize, b'.');
                h.write_all_at(&r, (first + i) * SIZE).unwrap();
                drop(h);
            }
        })
    };
    let began = Instant::now();
    let (ta, tb) = (
        writer(on_a.clone(), "A", 0),
        writer(on_b.clone(), "B", RECORDS),
    );
    ta.join().unwrap();
    tb.join().unwrap();
    eprintln!("two writers: {:?}", began.elapsed());
    for path in [&on_a, &on_b] {
        let all = fs::read(path).unwrap();
        assert_eq!(all.len() as u64, 2 * RECORDS * SIZE, "{}", path.display());
        for i in 0..RECORDS {
            for (tag, at) in [("A", i), ("B", RECORDS + i)] {
                let got = &all[(at * SIZE) as usize..((at + 1) * SIZE) as usize];
                assert!(
                    got.starts_with(&record(tag, i)),
                    "{} at {at}: {:?}",
                    path.display(),
                    String::from_utf8_lossy(got)
                );
            }
        }
    }
    // Both mounts ask for the file at their first open: one holds it and the other's
    // open recalls it (here B usually wins, and gives it back once; which one wins is up
    // to the scheduler).
    let (asked, gave) = (sent(&log, "delegate_file"), sent(&log, "return_file"));
    eprintln!("B asked for the file {asked} times and gave it back {gave} times");
    assert!(asked >= 1, "{asked} {gave}");
}

#[test]
fn a_killed_mount_holding_a_file_loses_only_what_no_fsync_covered_and_no_part_of_a_write() {
    if skip_without_fuse() {
        return;
    }
    let (up, b, _log) = a_file_made_elsewhere();
    let on_a = up.mountpoint.clone().unwrap().join("d/f");
    let on_b = b.mnt.join("d/f");
    let h = OpenOptions::new().write(true).open(&on_b).unwrap();
    h.write_all_at(b"synced on B", 0).unwrap();
    h.sync_all().unwrap();
    // Held past its close (the delegation): sent within a second, or lost with the mount,
    // but whole: one write of 200 KiB.
    let tail = vec![b'x'; 200 << 10];
    h.write_all_at(&tail, 4096).unwrap();
    drop(h);
    let killed = Instant::now();
    kill(Pid::from_raw(b.child.id() as i32), Signal::SIGKILL).unwrap();
    // A's open waits until B's lease lapses (30 s of agreed time), or not at all if the
    // write-back went before the kill.
    let seen = fs::read(&on_a).unwrap();
    let waited = killed.elapsed();
    assert!(
        seen.starts_with(b"synced on B"),
        "{:?}",
        &seen[..16.min(seen.len())]
    );
    let whole = seen.len() == 4096 + tail.len() && seen[4096..] == tail[..];
    let none = seen.len() == b"synced on B".len().max(b"made on A".len());
    assert!(whole || none, "part of a write: {} bytes", seen.len());
    eprintln!("B killed; A read {} bytes after {waited:?}", seen.len());
    assert!(waited < Duration::from_secs(90), "{waited:?}");
    drop(b);
}
