//! Directory delegations between mounts (`crates/byzfs-fuse/src/dirs.rs`): a mount that
//! holds a directory answers creations and removals in it at once and sends them later;
//! another mount's access recalls the directory after they are applied; a mount killed with
//! operations pending loses only what it had not made durable, and nothing half. Skipped,
//! with a message, only where FUSE is unavailable.

use crate::common;

use common::{logged, names, skip_without_fuse, Mount, Up};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::Write as _;
use std::time::{Duration, Instant};

#[test]
fn two_mounts_take_turns_on_one_directory_and_see_each_others_work() {
    if skip_without_fuse() {
        return;
    }
    let up = Up::start_mounted(&["--timeout-ms", "120000"]);
    let a = up.mountpoint.clone().unwrap().join("shared");
    let dir = up.dir.path();
    let b = Mount::start(&up.config, &dir.join("mnt-b"), &dir.join("mount-b.log"));
    let b_dir = b.mnt.join("shared");

    // A makes a tree (answered at A, sent at close); B sees all of it at once.
    fs::create_dir(&a).unwrap();
    fs::create_dir(a.join("sub")).unwrap();
    fs::write(a.join("sub/f"), b"from A").unwrap();
    std::os::unix::fs::symlink("sub/f", a.join("link")).unwrap();
    // A write-then-rename (rsync, editors), answered at A, the second over a file A made.
    for (tmp, content) in [(".v.1", "version 1"), (".v.2", "version 2")] {
        fs::write(a.join(tmp), content).unwrap();
        fs::rename(a.join(tmp), a.join("v")).unwrap();
    }
    // The last rename was not followed by a close: B's look recalls A's directory, which
    // sends it first.
    let want = ["sub", "link", "v"].map(String::from);
    assert_eq!(names(&b_dir), BTreeSet::from(want));
    assert_eq!(fs::read(b_dir.join("link")).unwrap(), b"from A");
    assert_eq!(fs::read(b_dir.join("v")).unwrap(), b"version 2");
    // B works there (the directory goes to B), then A sees B's work.
    fs::write(b_dir.join("sub/g"), b"from B").unwrap();
    fs::remove_file(b_dir.join("sub/f")).unwrap();
    assert_eq!(names(&a.join("sub")), BTreeSet::from(["g".into()]));
    assert_eq!(fs::read(a.join("sub/g")).unwrap(), b"from B");
    // `open` revalidates (close-to-open); a `stat` may use the 3 s attribute cache.
    errno(File::open(a.join("sub/f")), 2, "removed on B");

    // Both at once in one directory: every file lands, with its content.
    let race = |root: std::path::PathBuf, tag: &'static str| {
        std::thread::spawn(move || {
            for i in 0..40 {
                let p = root.join(format!("{tag}{i:02}"));
                let mut f = File::create(&p).unwrap();
                f.write_all(p.to_str().unwrap().as_bytes()).unwrap();
            }
        })
    };
    let (ta, tb) = (race(a.join("sub"), "a"), race(b_dir.join("sub"), "b"));
    ta.join().unwrap();
    tb.join().unwrap();
    let mut want: BTreeSet<String> = (0..40)
        .flat_map(|i| [format!("a{i:02}"), format!("b{i:02}")])
        .collect();
    want.insert("g".into());
    assert_eq!(names(&a.join("sub")), want);
    assert_eq!(names(&b_dir.join("sub")), want);
    for i in 0..40 {
        let p = a.join(format!("sub/a{i:02}"));
        assert_eq!(
            fs::read(b_dir.join(format!("sub/a{i:02}"))).unwrap(),
            p.to_str().unwrap().as_bytes()
        );
        let q = b_dir.join(format!("sub/b{i:02}"));
        assert_eq!(
            fs::read(a.join(format!("sub/b{i:02}"))).unwrap(),
            q.to_str().unwrap().as_bytes()
        );
    }
    // Removing a tree one mount made: answered there, seen by the other.
    fs::remove_dir_all(&a).unwrap();
    errno(File::open(b_dir.join("sub/a00")), 2, "tree removed on A");
}

/// A hard link to a file the mount made in a directory it holds is answered there (the
/// file then counts two links at once), sent with the rest, and counted by the replicas:
/// another mount sees both names on one inode; removing one name goes to the replicas.
#[test]
fn a_hard_link_in_a_held_directory_is_answered_at_once_and_counted_by_the_replicas() {
    use std::os::unix::fs::MetadataExt as _;
    if skip_without_fuse() {
        return;
    }
    let up = Up::start_mounted(&["--timeout-ms", "120000"]);
    let a = up.mountpoint.clone().unwrap().join("links");
    let dir = up.dir.path();
    fs::create_dir(&a).unwrap();
    for n in ["x", "y", "z"] {
        fs::write(a.join(n), n).unwrap();
    }
    fs::hard_link(a.join("z"), a.join("z2")).unwrap();
    let (z, z2) = (
        fs::metadata(a.join("z")).unwrap(),
        fs::metadata(a.join("z2")).unwrap(),
    );
    assert_eq!((z.ino(), z.nlink()), (z2.ino(), 2));
    errno(
        fs::hard_link(a.join("z"), a.join("x")),
        17,
        "the name exists",
    );

    let b = Mount::start(&up.config, &dir.join("mnt-b"), &dir.join("mount-b.log"));
    let b_dir = b.mnt.join("links");
    let want = ["x", "y", "z", "z2"].map(String::from);
    assert_eq!(names(&b_dir), BTreeSet::from(want));
    let (bz, bz2) = (
        File::open(b_dir.join("z")).unwrap().metadata().unwrap(),
        File::open(b_dir.join("z2")).unwrap().metadata().unwrap(),
    );
    assert_eq!((bz.ino(), bz.nlink(), bz2.ino()), (bz2.ino(), 2, z.ino()));
    assert_eq!(fs::read(b_dir.join("z2")).unwrap(), b"z");
    // One name goes; the other keeps the file, now with one link, seen by both mounts.
    fs::remove_file(a.join("z")).unwrap();
    let left = File::open(b_dir.join("z2")).unwrap().metadata().unwrap();
    assert_eq!((left.ino(), left.nlink()), (z.ino(), 1));
    // (B's cached entry for `z` may live out its TTL, as NFS's does; a listing is fresh.)
    let want = ["x", "y", "z2"].map(String::from);
    assert_eq!(names(&b_dir), BTreeSet::from(want));
    let on_a = File::open(a.join("z2")).unwrap().metadata().unwrap();
    assert_eq!(on_a.nlink(), 1);
}

#[test]
fn a_killed_mount_loses_only_what_it_had_not_made_durable_and_nothing_half() {
    if skip_without_fuse() {
        return;
    }
    let up = Up::start_mounted(&["--timeout-ms", "120000"]);
    let a = up.mountpoint.clone().unwrap();
    let dir = up.dir.path();
    let c = Mount::start(&up.config, &dir.join("mnt-c"), &dir.join("mount-c.log"));
    let k = c.mnt.join("k");
    fs::create_dir(&k).unwrap();
    // Durable: fsync'd, and with it every write held before (one batch): `closed` too,
    // which its `close` did not send (write-back), and the 40 files before it, of which
    // the first 31 went in a batch left in flight (`inflight.rs`: `fsync` waits for it).
    let many = |i: usize| format!("many {i} ").repeat(50 + i);
    for i in 0..40 {
        fs::write(k.join(format!("many-{i:02}")), many(i)).unwrap();
    }
    fs::write(k.join("closed"), b"closed").unwrap();
    let mut f = File::create(k.join("synced")).unwrap();
    f.write_all(b"synced").unwrap();
    f.sync_all().unwrap();
    // Written back: an append to a file made here is held past its close (sent within a
    // second, at fsync or at a recall), so it may be lost with the mount, but only whole.
    let mut g = fs::OpenOptions::new()
        .append(true)
        .open(k.join("closed"))
        .unwrap();
    g.write_all(b" and appended").unwrap();
    drop(g);
    // Answered but not yet sent (no fsync since; a new file's `close` sends nothing): one
    // batch, sent within a second, or lost with the mount.
    fs::write(k.join("pending-file"), b"written back").unwrap();
    std::os::unix::fs::symlink("closed", k.join("pending-link")).unwrap();
    fs::create_dir(k.join("pending-dir")).unwrap();
    let killed = Instant::now();
    kill(Pid::from_raw(c.child.id() as i32), Signal::SIGKILL).unwrap();
    drop(f);
    // A's look at `k` waits until C's lease lapses (30 s of agreed time).
    let seen = names(&a.join("k"));
    let waited = killed.elapsed();
    assert!(
        seen.contains("closed") && seen.contains("synced"),
        "durable files lost: {seen:?}"
    );
    let closed = fs::read(a.join("k/closed")).unwrap();
    assert!(
        closed == b"closed" || closed == b"closed and appended",
        "{:?}",
        String::from_utf8_lossy(&closed)
    );
    assert_eq!(fs::read(a.join("k/synced")).unwrap(), b"synced");
    for i in 0..40 {
        let p = a.join(format!("k/many-{i:02}"));
        assert_eq!(fs::read_to_string(&p).unwrap(), many(i), "many-{i:02}");
    }
    let pending = ["pending-dir", "pending-link", "pending-file"].map(|n| seen.contains(n));
    assert!(
        pending == [true; 3] || pending == [false; 3],
        "half a batch applied: {seen:?}"
    );
    if pending[2] {
        assert_eq!(fs::read(a.join("k/pending-file")).unwrap(), b"written back");
    }
    eprintln!("C killed; A saw {seen:?} after {waited:?}");
    // A works there now.
    fs::write(a.join("k/after"), b"a").unwrap();
    assert!(names(&a.join("k")).contains("after"));
    drop(c);
    assert!(waited < Duration::from_secs(90), "{waited:?}");
}

#[track_caller]
fn errno<T: std::fmt::Debug>(r: std::io::Result<T>, want: i32, what: &str) {
    match r {
        Err(e) => assert_eq!(e.raw_os_error(), Some(want), "{what}: {e}"),
        Ok(v) => panic!("{what}: succeeded ({v:?}), wanted errno {want}"),
    }
}

/// A cluster, and a second mount B (the kernel's caches off, its sends logged: the path
/// returned) that holds directory `name`, made in the root: two creations there make B ask
/// for the root, and a directory made in a held one is asked for in the batch that makes
/// it, so every name on the path is B's.
fn a_second_mount_holding(name: &str) -> (Up, Mount, std::path::PathBuf, std::path::PathBuf) {
    let up = Up::start_mounted(&["--timeout-ms", "120000"]);
    let log_at = [("RUST_LOG", "byzfs_fuse::cluster=trace")];
    let (b, log) = Mount::logged(&up, "b", &["--cache-timeout", "0"], &log_at);
    for n in ["a", "b"] {
        fs::write(b.mnt.join(n), n).unwrap();
    }
    let d = b.mnt.join(name);
    fs::create_dir(&d).unwrap();
    (up, b, log, d)
}

/// What a mount made in a directory it holds, it answers `stat`, `open` and `read` of from
/// its own books, even with the kernel's attribute cache off: nobody else can reach those
/// files (`crates/byzfs-fuse/src/dirs.rs`, `mine.rs`), and across sites each question was a
/// round trip (issue #30, Andrew-Tcl's `stat` and `read` phases). The answers are the
/// cluster's; a change the kept bytes do not follow sends reads to the cluster again.
#[test]
fn files_made_in_a_held_directory_are_stated_opened_and_read_without_asking() {
    use std::os::unix::fs::MetadataExt as _;
    if skip_without_fuse() {
        return;
    }
    let (up, _b, log, d) = a_second_mount_holding("made");
    // A partial last page: the kernel keeps only whole pages written through it as
    // read-ready, and reads the last one back, from the bytes the mount kept
    // (`crates/byzfs-fuse/src/mine.rs`).
    let content = |n: &str| n.repeat(5000);
    for n in ["x", "y", "z"] {
        fs::write(d.join(n), content(n)).unwrap();
    }
    // Written back (their `close` sent nothing): `fsync` of the directory sends the
    // names and the writes held with them, so the answers below are the cluster's.
    File::open(&d).unwrap().sync_all().unwrap();
    let sends = |what: &str| sent(&log, what);
    let key = |m: &fs::Metadata| (m.ino(), m.len(), m.mode(), m.mtime(), m.mtime_nsec());
    let before = (sends("getattr"), sends("read"));
    let mut local = Vec::new();
    for round in 0..5 {
        for n in ["x", "y", "z"] {
            let m = fs::metadata(d.join(n)).unwrap();
            assert_eq!((m.len(), m.mode() & 0o170000), (5000, 0o100000));
            assert_eq!(fs::read(d.join(n)).unwrap(), content(n).as_bytes());
            if round == 4 {
                local.push(key(&m));
            }
        }
    }
    assert_eq!((sends("getattr"), sends("read")), before);
    // Written again past a hole, still answered here, with the hole's zeros.
    {
        use std::os::unix::fs::FileExt as _;
        let f = fs::OpenOptions::new()
            .write(true)
            .open(d.join("y"))
            .unwrap();
        f.write_all_at(b"tail", 6000).unwrap();
    }
    let mut y = content("y").into_bytes();
    y.resize(6000, 0);
    y.extend_from_slice(b"tail");
    assert_eq!(fs::read(d.join("y")).unwrap(), y);
    assert_eq!(sends("read"), before.1);
    // A truncation is not followed there: the reads go to the cluster from then on, which
    // answers the same bytes.
    {
        use std::os::unix::fs::FileExt as _;
        let f = fs::OpenOptions::new()
            .write(true)
            .open(d.join("z"))
            .unwrap();
        f.set_len(3000).unwrap();
        f.write_all_at(b"end", 6000).unwrap();
    }
    let mut z = content("z").into_bytes();
    z.truncate(3000);
    z.resize(6000, 0);
    z.extend_from_slice(b"end");
    assert_eq!(fs::read(d.join("z")).unwrap(), z);
    assert!(sends("read") > before.1, "z's kept bytes were dropped");
    let local: Vec<_> = local
        .into_iter()
        .filter(|k| k.0 == fs::metadata(d.join("x")).unwrap().ino())
        .collect();
    // The other mount (which recalls the directory) sees the very same attributes and
    // bytes.
    let a = up.mountpoint.clone().unwrap().join("made");
    let theirs = vec![key(&fs::metadata(a.join("x")).unwrap())];
    assert_eq!(local, theirs);
    assert_eq!(fs::read(a.join("y")).unwrap(), y);
    assert_eq!(fs::read(a.join("z")).unwrap(), z);
}

/// How many operations named `what` a mount logging `byzfs_fuse::cluster=trace` to `log`
/// sent, under its lock or in a lane (read-only operations, `link.rs`).
fn sent(log: &std::path::Path, what: &str) -> usize {
    let text = fs::read_to_string(log).unwrap();
    ["send op", "send in a lane op"]
        .iter()
        .map(|s| text.matches(&format!("{s}=\"{what}\"")).count())
        .sum()
}

/// `ls -1ai` of `dir`: every entry with its inode number, `.` and `..` too, sorted.
fn ls(dir: &std::path::Path) -> String {
    let out = std::process::Command::new("ls")
        .arg("-1ai")
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "ls {}: {out:?}", dir.display());
    String::from_utf8(out.stdout).unwrap()
}

/// A directory the mount holds is listed from the names it keeps
/// (`crates/byzfs-fuse/src/listings.rs`): `ls` of it, over several `readdir`s of one open
/// directory, asks nobody (across sites each was a round trip, Andrew-Tcl's `stat` and
/// `read` walks), and lists what another mount gets from the replicas: names, inode
/// numbers, `.` and `..`, and a name made since the last `opendir`.
#[test]
fn a_held_directory_is_listed_without_asking() {
    if skip_without_fuse() {
        return;
    }
    let (up, _b, log, d) = a_second_mount_holding("listed");
    fs::create_dir(d.join("sub")).unwrap();
    // More than one `readdir` fills (the kernel's buffer is a page).
    for i in 0..300 {
        fs::write(d.join(format!("file-with-a-longish-name-{i:04}")), "x").unwrap();
    }
    let before = sent(&log, "readdir");
    let first = ls(&d);
    assert_eq!(
        first.lines().count(),
        303,
        "., .., sub and 300 files:\n{first}"
    );
    let sub = ls(&d.join("sub"));
    fs::write(d.join("made-after"), "y").unwrap();
    let second = ls(&d);
    assert_eq!(sent(&log, "readdir"), before, "listed from B's books");
    assert_eq!(second.lines().count(), 304);
    assert!(second.contains(" made-after\n"), "{second}");
    // The other mount lists them from the replicas (recalling the directory first).
    let a = up.mountpoint.clone().unwrap().join("listed");
    assert_eq!(ls(&a), second);
    assert_eq!(ls(&a.join("sub")), sub);
}

/// Write-back (`crates/byzfs-fuse/src/dirs.rs`): the `close` of a file the mount made in
/// a directory it holds sends nothing; the creations and writes go later, several files'
/// in one request, those of a file removed first never go, and another mount's look at the
/// directory recalls it after all of them reached the replicas (close-to-open between
/// mounts). The batches that make room leave without the writer waiting for them
/// (`inflight.rs`), and an `O_APPEND` after them goes at the size they gave.
#[test]
fn files_made_in_a_held_directory_are_written_back_in_batches() {
    use std::os::unix::fs::MetadataExt as _;
    if skip_without_fuse() {
        return;
    }
    const FILES: usize = 40;
    const REMOVED: usize = 5;
    let up = Up::start_mounted(&["--timeout-ms", "120000"]);
    let log_at = [("RUST_LOG", "byzfs_fuse=info,byzfs_fuse::cluster=trace")];
    let (c, log) = Mount::logged(&up, "c", &[], &log_at);
    let d = c.mnt.join("wb");
    fs::create_dir(&d).unwrap();
    // The second creation in a directory within 5 s makes the mount ask for it.
    for n in ["first", "second"] {
        fs::write(d.join(n), n).unwrap();
    }
    // Batches left in flight go as lanes do (`inflight.rs`).
    let sends = || {
        (
            sent(&log, "batch"),
            sent(&log, "write") + sent(&log, "write_gather"),
        )
    };
    let shown = || {
        let text = fs::read_to_string(&log).unwrap();
        let sent: Vec<&str> = text.lines().filter(|l| l.contains("send")).collect();
        sent.join("\n")
    };
    let first = |i: usize| format!("file {i} ").repeat(100 + i);
    let before = sends();
    let began = Instant::now();
    // Made, written and closed: held. More files than the mount holds writes for (16):
    // the 17th sends the others, in one batch with their creations.
    let mut made = Vec::new();
    for i in 0..FILES + REMOVED {
        let mut f = File::create(d.join(format!("f{i:02}"))).unwrap();
        // Before the write: the attributes of the creation's answer, kept by the kernel.
        made.push(f.metadata().unwrap().ino());
        f.write_all(first(i).as_bytes()).unwrap();
    }
    // Appended and closed: held again.
    for i in 0..FILES + REMOVED {
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(d.join(format!("f{i:02}")))
            .unwrap();
        f.write_all(format!("and more {i}").as_bytes()).unwrap();
    }
    // PostMark's delete: the removal is answered here, the held writes never sent.
    for i in FILES..FILES + REMOVED {
        fs::remove_file(d.join(format!("f{i:02}"))).unwrap();
    }
    let took = began.elapsed();
    let (batches, writes) = sends();
    // Their sizes here, right after: the batches in flight gave them (a creation's size 0
    // must not outlive the writes after it: `inflight.rs` `land_all`).
    for i in 0..FILES {
        let want = (first(i).len() + format!("and more {i}").len()) as u64;
        let got = fs::metadata(d.join(format!("f{i:02}"))).unwrap().len();
        assert_eq!(got, want, "f{i:02} as its mount sees it");
    }
    // No write went alone; the batches: one per 31 files written (twice over;
    // `gather::MAX_FILES`), and one per second the loop took (held writes go after 1 s by
    // themselves).
    assert_eq!(writes, before.1, "writes sent alone:\n{}", shown());
    let most = before.0 + 2 * (FILES + REMOVED) / 31 + 2 + took.as_secs() as usize;
    assert!(
        batches <= most,
        "{batches} batches (at most {most}) in {took:?}:\n{}",
        shown()
    );
    // The other mount recalls the directory: everything is there.
    let a = up.mountpoint.clone().unwrap().join("wb");
    let mut want: BTreeSet<String> = (0..FILES).map(|i| format!("f{i:02}")).collect();
    want.extend(["first", "second"].map(String::from));
    assert_eq!(names(&a), want);
    for (i, seen_here) in made.iter().enumerate().take(FILES) {
        let p = a.join(format!("f{i:02}"));
        assert_eq!(
            fs::read_to_string(&p).unwrap(),
            format!("{}and more {i}", first(i)),
            "f{i:02}"
        );
        // The inode this mount gave at `create` (a reserved one) is the replicas'.
        assert_eq!(fs::metadata(&p).unwrap().ino(), *seen_here, "f{i:02}");
    }
    drop(c);
    let text = fs::read_to_string(&log).unwrap();
    assert!(!text.contains("panicked"), "{text}");
    // The removed files' writes were dropped with them (one may have gone with a 1 s
    // flush).
    let dropped = logged(&text, "write-back: writes of files removed", "files") as usize;
    eprintln!(
        "{} files made, written and appended in {} batches ({took:?}); {dropped} of \
         {REMOVED} removed files' writes never sent",
        FILES + REMOVED,
        batches - before.0
    );
    assert!(
        dropped >= REMOVED - 1,
        "{dropped} of {REMOVED} removed files' writes dropped:\n{text}"
    );
    // The batches that made room went without the writer waiting for them
    // (`crates/byzfs-fuse/src/inflight.rs`), and what they held is all there (above: the
    // appends, made through the kernel's size after them, too).
    let flown = logged(&text, "write-back: batches left in flight", "batches");
    assert!(flown >= 1, "no batch left in flight:\n{text}");
}

/// A mount gives new entries handles the replicas reserved for it, 4,096 at a time
/// (`crates/byzfs-fuse/src/handles.rs`), and asks for the next range ahead, in flight, once
/// fewer than 3,584 are left: asked for only when none was left, the reservation waited
/// behind every write-back batch in flight (3.8 s of Andrew's copy across sites). Making
/// 4,200 files asks once waiting (the first) and once ahead, and every file keeps the
/// handle the mount gave it.
#[test]
fn a_mount_asks_for_new_handles_ahead_and_never_gives_one_twice() {
    use std::os::unix::fs::MetadataExt as _;
    if skip_without_fuse() {
        return;
    }
    const FILES: usize = 4_200;
    let (up, _b, log, d) = a_second_mount_holding("many");
    let mut made = Vec::with_capacity(FILES);
    for i in 0..FILES {
        let f = File::create(d.join(format!("f{i:04}"))).unwrap();
        made.push(f.metadata().unwrap().ino());
    }
    File::open(&d).unwrap().sync_all().unwrap();
    let text = fs::read_to_string(&log).unwrap();
    let waiting = text.matches("send op=\"reserve_inodes\"").count();
    let ahead = text.matches("send in a lane op=\"reserve_inodes\"").count();
    assert_eq!((waiting, ahead), (1, 1), "reservations: waited for, ahead");
    let distinct: BTreeSet<u64> = made.iter().copied().collect();
    assert_eq!(distinct.len(), FILES, "a handle given twice");
    // The other mount recalls the directory: every file at the handle it was given.
    let a = up.mountpoint.clone().unwrap().join("many");
    assert_eq!(names(&a).len(), FILES);
    for (i, ino) in made.iter().enumerate().step_by(97) {
        let m = fs::metadata(a.join(format!("f{i:04}"))).unwrap();
        assert_eq!(m.ino(), *ino, "f{i:04}");
    }
}

/// A file made in a held directory and written past what the gather holds for one file
/// is written back in flight, behind the request that makes it, not waited for
/// (`crates/byzfs-fuse/src/filesystem.rs` `write`): across sites Andrew's copy waited for
/// all the write-back in flight at its first big file. A listing of another directory
/// meanwhile does not wait for the write-back either (`inflight.rs` `must_precede`), and the
/// other mount reads every byte.
#[test]
fn a_big_file_made_in_a_held_directory_is_written_back_without_waiting() {
    if skip_without_fuse() {
        return;
    }
    let (up, b, log, d) = a_second_mount_holding("big");
    let waited = || {
        let text = fs::read_to_string(&log).unwrap();
        (text.matches("send op=\"write").count(), text)
    };
    let before = waited().0;
    let content: Vec<u8> = (0..6 << 20).map(|i: u32| (i % 251) as u8).collect();
    fs::write(d.join("big"), &content).unwrap();
    fs::read_dir(&b.mnt).unwrap().for_each(drop);
    let (after, text) = waited();
    assert_eq!(after, before, "writes waited for:\n{text}");
    // `fsync` of the directory sends what is still held, and waits for it all.
    File::open(&d).unwrap().sync_all().unwrap();
    drop(b);
    let text = fs::read_to_string(&log).unwrap();
    // Left in flight: sent as lanes are (`sender.rs` `launch`).
    let flown = ["batch", "write", "write_gather", "write_at"]
        .map(|w| text.matches(&format!("send in a lane op=\"{w}\"")).count())
        .iter()
        .sum::<usize>();
    assert!(flown >= 2, "{flown} batches left in flight:\n{text}");
    let a = up.mountpoint.clone().unwrap().join("big/big");
    assert!(
        fs::read(a).unwrap() == content,
        "the other mount read other bytes"
    );
}
