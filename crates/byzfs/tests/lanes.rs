//! Several processes on one mount (`crates/byzfs-fuse/src/wire.rs`, `lib.rs` `call`): a
//! mount's read-only operations are at the replicas together while another mount changes
//! the same files and directories. Every read sees one version's bytes, never a mix; once
//! the writers are done, both mounts see the same names and contents (close-to-open). Skipped,
//! with a message, only where FUSE is unavailable.

use crate::common;

use common::{logged, names, skip_without_fuse, Mount, Up};
use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const DIRS: usize = 4;
const FILES: usize = 30;

/// Version `v` of file `name`: a length and bytes of its own, so that a read mixing two
/// versions, or the attributes of one with the data of another, shows.
fn content(name: &str, v: usize) -> Vec<u8> {
    let line = format!("{name} version {v}\n");
    line.repeat(1 + (v * 7 + name.len()) % 13).into_bytes()
}

/// One `read(2)` of up to a page at offset 0.
fn read_once(p: &std::path::Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut buf = vec![0u8; 4096];
    let n = fs::File::open(p)?.read(&mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

#[test]
fn readers_in_lanes_see_whole_versions_while_another_mount_writes() {
    if skip_without_fuse() {
        return;
    }
    // No attribute cache: every stat and lookup of the readers goes to the replicas.
    let up = Up::start_mounted(&["--timeout-ms", "120000", "--cache-timeout", "0"]);
    let a = up.mountpoint.clone().unwrap();
    let dir = up.dir.path();
    let b = Mount::start(&up.config, &dir.join("mnt-b"), &dir.join("mount-b.log"));
    // The readers' mount, with lanes (several FUSE threads) and no attribute cache.
    let (c, _) = Mount::logged(&up, "c", &["--cache-timeout", "0", "--threads", "4"], &[]);
    // B writes the tree; C reads it in lanes; A checks the end.
    for d in 0..DIRS {
        fs::create_dir(b.mnt.join(format!("d{d}"))).unwrap();
        for f in 0..FILES {
            let name = format!("f{f}");
            fs::write(b.mnt.join(format!("d{d}/{name}")), content(&name, 0)).unwrap();
        }
    }
    let done = Arc::new(AtomicBool::new(false));
    // Four readers on C, one directory each, until the writer is done (at least one pass).
    let readers: Vec<_> = (0..DIRS)
        .map(|d| {
            let (root, done) = (c.mnt.join(format!("d{d}")), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut passes = 0u32;
                while passes == 0 || !done.load(Ordering::Relaxed) {
                    for name in names(&root) {
                        let p: PathBuf = root.join(&name);
                        let Ok(meta) = fs::symlink_metadata(&p) else {
                            continue; // Removed by the writer meanwhile.
                        };
                        assert!(meta.is_file(), "{}", p.display());
                        // One read(2): one version's bytes, or a prefix of one. (Two
                        // reads of an open file may see two versions: with no attribute
                        // cache the kernel asks for the size again, so a second read past
                        // the first's end may read a later version's tail, as over NFS.)
                        match read_once(&p) {
                            Ok(got) => assert!(
                                (0..=3).any(|v| content(&name, v).starts_with(&got)),
                                "{} read {:?}",
                                p.display(),
                                String::from_utf8_lossy(&got)
                            ),
                            // Removed by the writer meanwhile (ENOENT, or ESTALE once open).
                            Err(e) => assert!(
                                matches!(e.raw_os_error(), Some(2 | 116)),
                                "{}: {e}",
                                p.display()
                            ),
                        }
                    }
                    passes += 1;
                }
                passes
            })
        })
        .collect();
    // B rewrites every file of d0 three times, and in d1 removes half and makes new ones.
    for v in 1..=3 {
        for f in 0..FILES {
            let name = format!("f{f}");
            fs::write(b.mnt.join(format!("d0/{name}")), content(&name, v)).unwrap();
        }
    }
    for f in (0..FILES).step_by(2) {
        fs::remove_file(b.mnt.join(format!("d1/f{f}"))).unwrap();
        let name = format!("n{f}");
        fs::write(b.mnt.join(format!("d1/{name}")), content(&name, 1)).unwrap();
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    // Both mounts see the same names and the last versions.
    for d in 0..DIRS {
        let (on_a, on_b) = (a.join(format!("d{d}")), b.mnt.join(format!("d{d}")));
        assert_eq!(names(&on_a), names(&on_b), "d{d}");
        for name in names(&on_b) {
            assert_eq!(
                fs::read(on_a.join(&name)).unwrap(),
                fs::read(on_b.join(&name)).unwrap(),
                "d{d}/{name}"
            );
        }
    }
    let d1 = names(&a.join("d1"));
    assert_eq!(d1.len(), FILES, "{d1:?}");
    assert_eq!(
        fs::read(a.join("d0/f7")).unwrap(),
        content("f7", 3),
        "the last version"
    );
    drop(b);
    let log = fs::read_to_string(dir.join("mount-b.log")).unwrap();
    assert!(!log.contains("panicked"), "{log}");
}

/// Bytes of writer `k`'s file after `steps` of [`writers_of_different_files_hold_their_writes_apart`]:
/// block `i` holds `(k, i)`'s pattern, then a header over the first bytes.
fn written(k: usize, steps: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..steps)
        .flat_map(|i| std::iter::repeat_n((k * 31 + i * 7) as u8, BLOCK))
        .collect();
    let header = format!("writer {k} done");
    v[..header.len()].copy_from_slice(header.as_bytes());
    v
}

const BLOCK: usize = 4096;

/// Four processes writing four files through one mount, write for write in lockstep: each
/// file's writes are held back apart (`byzfs-fuse/src/gather.rs`), so they reach the
/// replicas in a few operations per file rather than one per write, as they did while a
/// write to one file sent the others'. A `stat` of one's own file sees its held writes; a
/// listing sends everyone's; a header written over the start joins as a scattered write;
/// another mount reads every byte after the close.
#[test]
fn writers_of_different_files_hold_their_writes_apart() {
    if skip_without_fuse() {
        return;
    }
    const WRITERS: usize = 4;
    const STEPS: usize = 96;
    let up = Up::start_mounted(&["--timeout-ms", "120000"]);
    let a = up.mountpoint.clone().unwrap();
    // At `info`, the mount logs the operations it sent when it is unmounted.
    let (c, log) = Mount::logged(&up, "c", &["--threads", "4"], &[("RUST_LOG", "info")]);
    fs::create_dir(c.mnt.join("w")).unwrap();
    let step = Arc::new(std::sync::Barrier::new(WRITERS));
    let writers: Vec<_> = (0..WRITERS)
        .map(|k| {
            let (root, step) = (c.mnt.join("w"), Arc::clone(&step));
            std::thread::spawn(move || {
                use std::io::{Seek as _, SeekFrom, Write as _};
                let p = root.join(format!("f{k}"));
                let mut f = fs::File::create(&p).unwrap();
                let want = written(k, STEPS);
                for i in 0..STEPS {
                    step.wait();
                    let block: Vec<u8> = vec![(k * 31 + i * 7) as u8; BLOCK];
                    f.write_all(&block).unwrap();
                    if i == STEPS / 2 && k == 0 {
                        // A listing: every file's held writes go first.
                        assert_eq!(names(&root).len(), WRITERS);
                    }
                    if i == STEPS / 3 {
                        // Its own held writes go first; the others' stay.
                        let len = fs::metadata(&p).unwrap().len();
                        assert_eq!(len, ((i + 1) * BLOCK) as u64, "{}", p.display());
                    }
                }
                let header = format!("writer {k} done");
                f.seek(SeekFrom::Start(0)).unwrap();
                f.write_all(header.as_bytes()).unwrap();
                drop(f);
                want
            })
        })
        .collect();
    let wants: Vec<Vec<u8>> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    for (k, want) in wants.iter().enumerate() {
        let got = fs::read(a.join(format!("w/f{k}"))).unwrap();
        assert!(got == *want, "w/f{k}: {} bytes, not as written", got.len());
    }
    drop(c);
    let text = fs::read_to_string(&log).unwrap();
    assert!(!text.contains("panicked"), "{text}");
    // The writes the mount sent: a few per file (the stat, the listing: 3 to 12 here;
    // and at most one a second per file for writes held 1 s on a slow machine), not one
    // per write (4 × 96 + 4, as when a write to one file sent the others').
    let sent = |kind: &str| logged(&text, "operations sent", kind);
    // Written back (the files are made in a directory the mount holds): several files'
    // held writes may go in one batch.
    let writes = sent("write") + sent("write_gather") + sent("write_setattr") + sent("batch");
    assert!(
        (1..=(WRITERS * STEPS / 4) as u64).contains(&writes),
        "{writes} write operations sent for {} writes:\n{text}",
        WRITERS * (STEPS + 1)
    );
}

/// Four processes on one mount changing files and names in four directories it does not
/// hold (`--no-dir-delegations`): their ordered operations (create, chmod, rename, mkdir,
/// unlink, fsync) go in lanes (`byzfs-fuse/src/calls.rs` `ordered_lane_takes`), several at
/// the replicas at once, and every change lands as each process made it, seen by another
/// mount.
#[test]
fn ordered_operations_of_several_processes_are_in_flight_together() {
    if skip_without_fuse() {
        return;
    }
    let up = Up::start_mounted(&["--timeout-ms", "120000"]);
    let a = up.mountpoint.clone().unwrap();
    // Its summary at unmount counts the ordered operations in lanes.
    let (c, c_log) = Mount::logged(
        &up,
        "c",
        &["--threads", "4", "--no-dir-delegations"],
        &[("RUST_LOG", "byzfs_fuse=info")],
    );
    for d in 0..DIRS {
        fs::create_dir(c.mnt.join(format!("d{d}"))).unwrap();
    }
    let workers: Vec<_> = (0..DIRS)
        .map(|d| {
            let root = c.mnt.join(format!("d{d}"));
            std::thread::spawn(move || {
                use std::os::unix::fs::PermissionsExt as _;
                for f in 0..FILES {
                    let name = format!("f{f}");
                    let p = root.join(&name);
                    fs::write(&p, content(&name, d)).unwrap();
                    fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
                    fs::rename(&p, root.join(format!("g{f}"))).unwrap();
                    if f % 3 == 0 {
                        fs::remove_file(root.join(format!("g{f}"))).unwrap();
                    }
                    if f % 10 == 0 {
                        fs::create_dir(root.join(format!("sub{f}"))).unwrap();
                        fs::File::open(root.join(format!("sub{f}")))
                            .and_then(|h| h.sync_all())
                            .unwrap();
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    // What each process made, seen through the other mount.
    for d in 0..DIRS {
        let on_a = a.join(format!("d{d}"));
        let want: std::collections::BTreeSet<String> = (0..FILES)
            .filter(|f| f % 3 != 0)
            .map(|f| format!("g{f}"))
            .chain((0..FILES).step_by(10).map(|f| format!("sub{f}")))
            .collect();
        assert_eq!(names(&on_a), want, "d{d}");
        for f in (0..FILES).filter(|f| f % 3 != 0) {
            use std::os::unix::fs::PermissionsExt as _;
            let p = on_a.join(format!("g{f}"));
            assert_eq!(
                fs::read(&p).unwrap(),
                content(&format!("f{f}"), d),
                "{}",
                p.display()
            );
            let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o7777;
            assert_eq!(mode, 0o600, "{}", p.display());
        }
    }
    drop(c);
    let log = fs::read_to_string(&c_log).unwrap();
    assert!(!log.contains("panicked"), "{log}");
    let most: usize = log
        .lines()
        .find_map(|l| l.split("most at once ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of ordered operations in lanes:\n{log}"));
    assert!(
        most >= 2,
        "ordered operations never in flight together ({most}):\n{log}"
    );
}

/// A process whose `fsync` waits for its write-back in flight (files bigger than the gather,
/// made in a directory the mount holds, go in flight as they are written) lets the mount's
/// lock go while the replicas answer (`byzfs-fuse/src/unlocked.rs` `land`): the other
/// processes' operations run meanwhile, and every byte an `fsync` covered is at the
/// replicas, as the other mount reads.
#[test]
fn an_fsync_waiting_for_write_back_in_flight_lets_the_others_go() {
    if skip_without_fuse() {
        return;
    }
    const WRITERS: usize = 3;
    const ROUNDS: usize = 3;
    const SIZE: usize = 3 << 20;
    let up = Up::start_mounted(&["--timeout-ms", "120000"]);
    let a = up.mountpoint.clone().unwrap();
    // Small files another mount made: their stats and reads go to the replicas.
    fs::create_dir(a.join("seen")).unwrap();
    for f in 0..FILES {
        let name = format!("s{f}");
        fs::write(a.join("seen").join(&name), content(&name, 0)).unwrap();
    }
    // Its summary at unmount counts the waits without the lock.
    let (c, c_log) = Mount::logged(
        &up,
        "c",
        &["--threads", "4", "--cache-timeout", "0"],
        &[("RUST_LOG", "byzfs_fuse=info")],
    );
    fs::create_dir(c.mnt.join("w")).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|k| {
            let w = c.mnt.join("w");
            std::thread::spawn(move || {
                use std::io::Write as _;
                for r in 0..ROUNDS {
                    let p = w.join(format!("f{k}-{r}"));
                    let mut f = fs::File::create(&p).unwrap();
                    f.write_all(&written(k * ROUNDS + r, SIZE / 4096)).unwrap();
                    f.sync_all().unwrap();
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let seen = c.mnt.join("seen");
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                let mut looked = 0u64;
                while !done.load(Ordering::Relaxed) {
                    for f in 0..FILES {
                        let name = format!("s{f}");
                        let p = seen.join(&name);
                        assert_eq!(fs::read(&p).unwrap(), content(&name, 0), "{}", p.display());
                        looked += 1;
                    }
                }
                looked
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    // What each `fsync` covered, through the other mount.
    for k in 0..WRITERS {
        for r in 0..ROUNDS {
            let p = a.join("w").join(format!("f{k}-{r}"));
            assert!(
                fs::read(&p).unwrap() == written(k * ROUNDS + r, SIZE / 4096),
                "{}",
                p.display()
            );
        }
    }
    drop(c);
    let log = fs::read_to_string(&c_log).unwrap();
    assert!(!log.contains("panicked"), "{log}");
    let counts: Vec<u64> = log
        .lines()
        .find_map(|l| l.split("waits without the mount's lock ").nth(1))
        .map(|rest| {
            rest.split(|c: char| !c.is_ascii_digit())
                .filter(|s| !s.is_empty())
                .take(2)
                .filter_map(|n| n.parse().ok())
                .collect()
        })
        .unwrap_or_else(|| panic!("no count of waits without the lock:\n{log}"));
    assert!(
        counts.len() == 2 && counts[0] >= 1 && counts[1] >= 1,
        "no operation ran while a wait for the write-back let the lock go ({counts:?}):\n{log}"
    );
}
