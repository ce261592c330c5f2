//! Encrypted mounts (issue #28) over four real `--service fs` replicas on disk:
//! - what a replica sees: files, directories, links, extended attributes and a large file
//!   written with canary strings in every name and byte read back whole through the mount,
//!   and no canary anywhere in any replica's data directory or log;
//! - a member with only the read key reads everything and is refused every kind of change,
//!   and a plain mount sees only sealed names and is refused too;
//! - removing the writer from the group stops its writes at once, and what it wrote stays
//!   readable to the members left.

use crate::common;

use common::{skip_without_fuse, Mount, Procs, BIN};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `byzfs args…`; its stdout, or a panic with its stderr.
fn byzfs(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "byzfs {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A new identity at `dir/name`; (its path, its member key).
fn identity(dir: &Path, name: &str) -> (PathBuf, String) {
    let p = dir.join(name);
    let out = byzfs(&["identity", "new", p.to_str().unwrap()]);
    let key = out
        .lines()
        .nth(1)
        .unwrap()
        .strip_prefix("member_key ")
        .unwrap();
    (p, key.to_string())
}

/// `byzfs group …` as `id` on the cluster of `procs`.
fn group(procs: &Procs, id: &Path, rest: &[&str]) -> String {
    let config = procs.config();
    let mut args = vec![
        "group",
        "--config",
        config.to_str().unwrap(),
        "--identity",
        id.to_str().unwrap(),
    ];
    args.extend_from_slice(rest);
    byzfs(&args)
}

/// The `owner_key` of identity file `id` (`byzfs identity show`).
fn owner_key(id: &Path) -> String {
    let out = byzfs(&["identity", "show", id.to_str().unwrap()]);
    out.lines()
        .find_map(|l| l.strip_prefix("owner_key"))
        .unwrap()
        .trim()
        .to_string()
}

/// An encrypted mount of `group` as `id` at `dir/name`.
fn mount_as(procs: &Procs, id: &Path, group: &str, name: &str) -> Mount {
    mount_with(procs, id, group, name, &[])
}

/// [`mount_as`] with more `byzfs mount` flags.
fn mount_with(procs: &Procs, id: &Path, group: &str, name: &str, more: &[&str]) -> Mount {
    mount_logged(procs, id, group, name, more, &[]).0
}

/// [`mount_with`] with more environment (`RUST_LOG`, say): the mount and its log's path.
fn mount_logged(
    procs: &Procs,
    id: &Path,
    group: &str,
    name: &str,
    more: &[&str],
    env: &[(&str, &str)],
) -> (Mount, PathBuf) {
    let mnt = procs.dir.path().join(name);
    // The mount's own log stays out of the cluster's directory (it is the client's).
    let log = std::env::temp_dir().join(format!(
        "byzfs-encryption-{name}-{}.log",
        std::process::id()
    ));
    let m = Mount::start_with_env(
        &procs.config(),
        &mnt,
        &log,
        &[
            &[
                "--timeout-ms",
                "120000",
                "--identity",
                id.to_str().unwrap(),
                "--group",
                group,
            ],
            more,
        ]
        .concat(),
        env,
    );
    (m, log)
}

/// Four `--service fs` replicas in `mode`, replica `i` with `extra[i]`; an owner's
/// identity (in the returned directory) and its group `team`.
fn cluster_with_team(
    mode: &'static str,
    extra: Vec<Vec<String>>,
) -> (Procs, tempfile::TempDir, PathBuf) {
    let procs = Procs::with(mode, "fs", extra);
    let keys = tempfile::tempdir().unwrap();
    let (owner, _) = identity(keys.path(), "owner.id");
    group(&procs, &owner, &["create", "team"]);
    (procs, keys, owner)
}

/// `--byzantine how` for replicas `ids`, the others honest.
fn liars(ids: &[usize], how: &str) -> Vec<Vec<String>> {
    (0..4)
        .map(|i| {
            if ids.contains(&i) {
                vec!["--byzantine".to_string(), how.to_string()]
            } else {
                Vec::new()
            }
        })
        .collect()
}

/// Every file under `root`, recursively.
fn files_under(root: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(root).unwrap().flatten() {
        let p = e.path();
        let t = e.file_type().unwrap();
        if t.is_dir() {
            files_under(&p, out);
        } else if t.is_file() {
            out.push(p);
        }
    }
}

fn errno(r: std::io::Result<impl std::fmt::Debug>) -> i32 {
    match r {
        Ok(v) => panic!("succeeded: {v:?}"),
        Err(e) => e.raw_os_error().unwrap_or(0),
    }
}

const CANARY: &str = "CnRy7f3a";

/// The tree `fill` writes, as `read_tree` reads it back.
fn fill(m: &Path) -> Vec<String> {
    let c = CANARY;
    std::fs::write(m.join(format!("{c}-name.txt")), format!("{c}-content")).unwrap();
    std::fs::create_dir(m.join(format!("{c}-dir"))).unwrap();
    std::fs::create_dir(m.join(format!("{c}-dir/{c}-empty"))).unwrap();
    symlink(format!("{c}-target"), m.join(format!("{c}-dir/{c}-link"))).unwrap();
    xattr::set(
        &m.join(format!("{c}-name.txt")),
        &format!("user.{c}-xname"),
        format!("{c}-xvalue").as_bytes(),
    );
    // 3 MiB and a bit, the canary in every 4 KiB, written in pieces that are not
    // block-aligned, then a byte changed in the middle of a block and the file cut.
    let big: Vec<u8> = format!("{c}-block-")
        .bytes()
        .cycle()
        .take((3 << 20) + 1234)
        .collect();
    let mut f = std::fs::File::create(m.join(format!("{c}-big"))).unwrap();
    for piece in big.chunks(100_000) {
        f.write_all(piece).unwrap();
    }
    f.seek(SeekFrom::Start(5000)).unwrap();
    f.write_all(b"!").unwrap();
    f.set_len((2 << 20) + 77).unwrap();
    drop(f);
    std::fs::rename(
        m.join(format!("{c}-dir/{c}-link")),
        m.join(format!("{c}-dir/{c}-moved")),
    )
    .unwrap();
    std::fs::hard_link(
        m.join(format!("{c}-name.txt")),
        m.join(format!("{c}-dir/{c}-hard")),
    )
    .unwrap();
    read_tree(m)
}

fn read_tree(m: &Path) -> Vec<String> {
    let c = CANARY;
    let mut out = Vec::new();
    let mut names: Vec<String> = std::fs::read_dir(m)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    out.push(format!("/ {names:?}"));
    let mut names: Vec<String> = std::fs::read_dir(m.join(format!("{c}-dir")))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    out.push(format!("dir {names:?}"));
    out.push(std::fs::read_to_string(m.join(format!("{c}-name.txt"))).unwrap());
    out.push(std::fs::read_to_string(m.join(format!("{c}-dir/{c}-hard"))).unwrap());
    let t = std::fs::read_link(m.join(format!("{c}-dir/{c}-moved"))).unwrap();
    out.push(format!("link {}", t.display()));
    let md = std::fs::symlink_metadata(m.join(format!("{c}-dir/{c}-moved"))).unwrap();
    out.push(format!("link size {}", md.len()));
    let v = xattr::get(&m.join(format!("{c}-name.txt")), &format!("user.{c}-xname"));
    out.push(format!("xattr {}", String::from_utf8_lossy(&v)));
    out.push(format!(
        "xattrs {:?}",
        xattr::list(&m.join(format!("{c}-name.txt")))
    ));
    let mut big = Vec::new();
    std::fs::File::open(m.join(format!("{c}-big")))
        .unwrap()
        .read_to_end(&mut big)
        .unwrap();
    let mut want: Vec<u8> = format!("{c}-block-")
        .bytes()
        .cycle()
        .take((2 << 20) + 77)
        .collect();
    want[5000] = b'!';
    out.push(format!(
        "big {} bytes, as written: {}",
        big.len(),
        big == want
    ));
    out
}

fn want_tree() -> Vec<String> {
    let c = CANARY;
    vec![
        format!("/ [\"{c}-big\", \"{c}-dir\", \"{c}-name.txt\"]"),
        format!("dir [\"{c}-empty\", \"{c}-hard\", \"{c}-moved\"]"),
        format!("{c}-content"),
        format!("{c}-content"),
        format!("link {c}-target"),
        format!("link size {}", format!("{c}-target").len()),
        format!("xattr {c}-xvalue"),
        format!("xattrs [\"user.{c}-xname\"]"),
        format!("big {} bytes, as written: true", (2 << 20) + 77),
    ]
}

/// Extended attributes through libc (std has none).
mod xattr {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt as _;
    use std::path::Path;

    fn c(p: &Path) -> CString {
        CString::new(p.as_os_str().as_bytes()).unwrap()
    }

    pub fn set(p: &Path, name: &str, value: &[u8]) {
        let n = CString::new(name).unwrap();
        // SAFETY: valid NUL-terminated strings and a buffer of the given length.
        let r = unsafe {
            libc::setxattr(
                c(p).as_ptr(),
                n.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0,
            )
        };
        assert_eq!(r, 0, "setxattr: {}", std::io::Error::last_os_error());
    }

    pub fn try_set(p: &Path, name: &str, value: &[u8]) -> std::io::Result<()> {
        let n = CString::new(name).unwrap();
        // SAFETY: as above.
        let r = unsafe {
            libc::setxattr(
                c(p).as_ptr(),
                n.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    pub fn get(p: &Path, name: &str) -> Vec<u8> {
        let n = CString::new(name).unwrap();
        let mut buf = vec![0u8; 4096];
        // SAFETY: as above; the buffer is writable for its length.
        let r = unsafe {
            libc::getxattr(
                c(p).as_ptr(),
                n.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        assert!(r >= 0, "getxattr: {}", std::io::Error::last_os_error());
        buf.truncate(r as usize);
        buf
    }

    pub fn list(p: &Path) -> Vec<String> {
        let mut buf = vec![0u8; 4096];
        // SAFETY: as above.
        let r = unsafe { libc::listxattr(c(p).as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        assert!(r >= 0, "listxattr: {}", std::io::Error::last_os_error());
        buf.truncate(r as usize);
        buf.split(|&b| b == 0)
            .filter(|n| !n.is_empty())
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .collect()
    }
}

#[test]
fn replicas_never_see_a_name_or_a_byte_and_readers_change_nothing() {
    if skip_without_fuse() {
        return;
    }
    let _serial = common::serial();
    let procs = Procs::with("disk", "fs", vec![Vec::new(); 4]);
    let keys = tempfile::tempdir().unwrap();
    let (owner, _) = identity(keys.path(), "owner.id");
    let (reader, reader_key) = identity(keys.path(), "reader.id");
    let created = group(&procs, &owner, &["create", "team"]);
    let id = created.trim().rsplit(' ').next().unwrap().to_string();
    group(&procs, &owner, &["add", "team", "--member", &reader_key]);

    let w = mount_as(&procs, &owner, "team", "writer");
    assert_eq!(fill(&w.mnt), want_tree());

    // The reader reads everything, and every kind of change is refused.
    let r = mount_with(
        &procs,
        &reader,
        "team",
        "reader",
        &["--owner", &owner_key(&owner)],
    );
    assert_eq!(read_tree(&r.mnt), want_tree());
    let m = &r.mnt;
    let c = CANARY;
    let refused = [libc::EACCES, libc::EPERM];
    let file = m.join(format!("{c}-name.txt"));
    let checks: Vec<(&str, i32)> = vec![
        ("create", errno(std::fs::write(m.join("new"), "x"))),
        ("mkdir", errno(std::fs::create_dir(m.join("newdir")))),
        ("symlink", errno(symlink("t", m.join("newlink")))),
        (
            "write",
            errno(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&file)
                    .and_then(|mut f| {
                        f.write_all(b"x")?;
                        f.sync_all()
                    }),
            ),
        ),
        (
            "truncate",
            errno(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&file)
                    .and_then(|f| f.set_len(1)),
            ),
        ),
        ("rename", errno(std::fs::rename(&file, m.join("renamed")))),
        ("unlink", errno(std::fs::remove_file(&file))),
        (
            "rmdir",
            errno(std::fs::remove_dir(m.join(format!("{c}-dir/{c}-empty")))),
        ),
        ("link", errno(std::fs::hard_link(&file, m.join("hard2")))),
        (
            "chmod",
            errno(std::fs::set_permissions(
                &file,
                std::os::unix::fs::PermissionsExt::from_mode(0o600),
            )),
        ),
        ("setxattr", errno(xattr::try_set(&file, "user.other", b"v"))),
    ];
    for (what, e) in &checks {
        assert!(refused.contains(e), "{what}: errno {e}");
    }
    assert_eq!(
        read_tree(&w.mnt),
        want_tree(),
        "the readers changed nothing"
    );

    // A plain mount sees the tree's directory and sealed names only, and changes nothing.
    let plain_mnt = procs.dir.path().join("plain");
    let log =
        std::env::temp_dir().join(format!("byzfs-encryption-plain-{}.log", std::process::id()));
    let p = Mount::start(&procs.config(), &plain_mnt, &log);
    let tree = plain_mnt.join(format!("g-{id}"));
    let names: Vec<String> = std::fs::read_dir(&tree)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 3);
    assert!(names.iter().all(|n| !n.contains(c)), "{names:?}");
    assert!(refused.contains(&errno(std::fs::write(tree.join("new"), "x"))));
    assert!(refused.contains(&errno(std::fs::create_dir(tree.join("newdir")))));
    assert!(refused.contains(&errno(std::fs::remove_file(tree.join(&names[0])))));
    drop(p);
    drop(r);
    drop(w);

    // Nothing a replica keeps or logs holds a canary.
    let mut all = Vec::new();
    files_under(procs.dir.path(), &mut all);
    assert!(
        all.iter().any(|p| p.to_string_lossy().contains("data-0")),
        "{all:?}"
    );
    let mut scanned = 0u64;
    for path in &all {
        let bytes = std::fs::read(path).unwrap();
        scanned += bytes.len() as u64;
        assert!(
            !bytes.windows(CANARY.len()).any(|w| w == CANARY.as_bytes()),
            "{} holds a canary",
            path.display()
        );
    }
    assert!(
        scanned > 3 << 20,
        "the big file's sealed blocks were scanned ({scanned} bytes)"
    );
}

/// A `memory` cluster, its owner's group `team` with Bob as a second writer, and both
/// mounted.
struct TwoWriters {
    // Field order is drop order: the mounts go before the cluster.
    o: Mount,
    b: Mount,
    procs: Procs,
    _keys: tempfile::TempDir,
    owner: PathBuf,
    bob: PathBuf,
    bob_key: String,
    id: String,
}

impl TwoWriters {
    fn start() -> TwoWriters {
        let procs = Procs::with("memory", "fs", vec![Vec::new(); 4]);
        let keys = tempfile::tempdir().unwrap();
        let (owner, _) = identity(keys.path(), "owner.id");
        let (bob, bob_key) = identity(keys.path(), "bob.id");
        let created = group(&procs, &owner, &["create", "team"]);
        let id = created.trim().rsplit(' ').next().unwrap().to_string();
        group(
            &procs,
            &owner,
            &["add", "team", "--member", &bob_key, "--writer"],
        );
        let o = mount_as(&procs, &owner, "team", "owner");
        let b = mount_with(&procs, &bob, &id, "bob", &["--owner", &owner_key(&owner)]);
        TwoWriters {
            o,
            b,
            procs,
            _keys: keys,
            owner,
            bob,
            bob_key,
            id,
        }
    }
}

/// A mount whose kept tree nodes are older than the file (another mount rewrote it while
/// this one's kernel still trusted its cached attributes) reads the header again when the
/// blocks do not fit, instead of answering `EIO`.
#[test]
fn a_mount_with_old_nodes_reads_the_new_header_when_blocks_do_not_fit() {
    if skip_without_fuse() {
        return;
    }
    let _serial = common::serial();
    let t = TwoWriters::start();
    let late = mount_with(
        &t.procs,
        &t.owner,
        "team",
        "late",
        &["--cache-timeout", "600"],
    );
    let (one, two) = (vec![b'1'; 9_000], vec![b'2'; 9_000]);
    std::fs::write(t.o.mnt.join("doc"), &one).unwrap();
    // Held open: no new open asks for the attributes again.
    let held = std::fs::File::open(late.mnt.join("doc")).unwrap();
    let mut got = vec![0; 9_000];
    std::os::unix::fs::FileExt::read_exact_at(&held, &mut got, 0).unwrap();
    assert_eq!(got, one);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(t.o.mnt.join("doc"))
        .unwrap();
    f.write_all(&two).unwrap();
    f.sync_all().unwrap();
    drop(f);
    // The late mount's kernel keeps the attributes; its page cache goes, so the read
    // reaches the mount, which still holds the old header's nodes.
    std::fs::write("/proc/sys/vm/drop_caches", "1").unwrap();
    std::os::unix::fs::FileExt::read_exact_at(&held, &mut got, 0).unwrap();
    assert_eq!(got, two);
}

/// Reads in lanes (`byzfs-fuse/src/crypt_read_lane.rs`): four processes reading one
/// 2 MiB file at once through a second mount each get their part's bytes, the mount's
/// reads sent in lanes and opened without its lock; after the owner rewrites the file, the
/// same readers — their kernel's pages dropped, the mount's nodes for the file old — get
/// the new bytes (the lane's blocks do not open; the locked path reads the new header).
#[test]
fn encrypted_reads_in_lanes_get_every_byte_before_and_after_a_rewrite() {
    if skip_without_fuse() {
        return;
    }
    let _serial = common::serial();
    let t = TwoWriters::start();
    let version =
        |v: usize| -> Vec<u8> { (0..2 << 20).map(|i| ((i * 7 + v) % 251) as u8).collect() };
    write_synced(&t.o.mnt.join("big"), &version(1));
    let (reader, log) = mount_logged(
        &t.procs,
        &t.owner,
        "team",
        "reader",
        &["--threads", "4", "--cache-timeout", "600"],
        &[("RUST_LOG", "byzfs_fuse::cluster=trace")],
    );
    let held = std::sync::Arc::new(std::fs::File::open(reader.mnt.join("big")).unwrap());
    let read_in_four = |want: Vec<u8>| {
        let want = std::sync::Arc::new(want);
        let readers: Vec<_> = (0..4)
            .map(|k| {
                let (held, want) = (std::sync::Arc::clone(&held), std::sync::Arc::clone(&want));
                std::thread::spawn(move || {
                    let part = 512 * 1024;
                    for at in (k * part..(k + 1) * part).step_by(128 * 1024) {
                        let mut got = vec![0; 128 * 1024];
                        std::os::unix::fs::FileExt::read_exact_at(&*held, &mut got, at as u64)
                            .unwrap();
                        assert!(got == want[at..at + got.len()], "bytes at {at}");
                    }
                })
            })
            .collect();
        for r in readers {
            r.join().unwrap();
        }
    };
    read_in_four(version(1));
    let text = std::fs::read_to_string(&log).unwrap();
    let lanes = text.matches("send in a lane op=\"read_gather\"").count();
    assert!(
        lanes >= 8,
        "{lanes} gathered reads in lanes for 2 MiB:\n{text}"
    );

    write_synced(&t.o.mnt.join("big"), &version(2));
    std::fs::write("/proc/sys/vm/drop_caches", "1").unwrap();
    read_in_four(version(2));
}

/// Revocation: a removed writer's next write is refused; current members read what it
/// wrote; what is written afterwards, and its own file once rewritten, move to the new
/// key version, which its mount cannot open; a new mount of it is refused.
#[test]
fn a_removed_writer_is_refused_and_what_it_wrote_stays_readable() {
    if skip_without_fuse() {
        return;
    }
    let _serial = common::serial();
    let t = TwoWriters::start();
    let (procs, owner, bob, bob_key, id, o, b) = (
        &t.procs,
        &t.owner,
        &t.bob,
        t.bob_key.as_str(),
        t.id.as_str(),
        &t.o,
        &t.b,
    );
    std::fs::write(b.mnt.join("by-bob"), "bob's").unwrap();
    assert_eq!(
        std::fs::read_to_string(o.mnt.join("by-bob")).unwrap(),
        "bob's"
    );
    // Bob removed: version 3, whose keys he cannot open.
    group(procs, owner, &["remove", "team", "--member", bob_key]);
    // His mount may still hold the tree's delegation and answer the creation itself: the
    // refusal then comes with `fsync`.
    let e = errno(
        std::fs::File::create(b.mnt.join("after")).and_then(|mut f| {
            f.write_all(b"no")?;
            f.sync_all()
        }),
    );
    assert!([libc::EACCES, libc::EPERM].contains(&e), "errno {e}");
    // The owner reads Bob's file (sealed under version 2) and writes under version 3.
    assert_eq!(
        std::fs::read_to_string(o.mnt.join("by-bob")).unwrap(),
        "bob's"
    );
    std::fs::write(o.mnt.join("by-owner"), "new").unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(o.mnt.join("by-bob"))
        .unwrap()
        .write_all(b" and the owner's")
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(o.mnt.join("by-bob")).unwrap(),
        "bob's and the owner's"
    );
    assert_eq!(
        std::fs::read_to_string(o.mnt.join("by-owner")).unwrap(),
        "new"
    );
    // Bob's mount, still holding version 2's keys, opens neither what was written after
    // his removal nor his own file once rewritten: both moved to version 3 (their
    // headers are signed and sealed under it), which he cannot derive.
    for name in ["by-owner", "by-bob"] {
        let e = errno(std::fs::read(b.mnt.join(name)));
        assert_eq!(e, libc::EIO, "{name}");
    }
    // A new mount of his is refused at once.
    std::fs::create_dir_all(procs.dir.path().join("bob-again")).unwrap();
    let refused = Command::new(BIN)
        .args(["mount", "--config"])
        .arg(procs.config())
        .args(["--identity", bob.to_str().unwrap(), "--group", id])
        .args(["--owner", &owner_key(owner)])
        .arg(procs.dir.path().join("bob-again"))
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("not a member"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

/// Two writers change one file in turns, each in blocks the other changed just before:
/// the second builds its change on a header the first has replaced, the replicas refuse
/// it (`ESTALE`, `Op::Signed`'s `expect`), and its mount builds it again on the new
/// header — nothing either wrote is lost, and both read every byte back.
#[test]
fn two_writers_taking_turns_on_one_file_lose_nothing() {
    if skip_without_fuse() {
        return;
    }
    let _serial = common::serial();
    let t = TwoWriters::start();
    let (o, b) = (&t.o, &t.b);
    std::fs::write(o.mnt.join("shared"), b"").unwrap();
    let mut want = Vec::new();
    for round in 0..12u8 {
        let m = if round % 2 == 0 { &o.mnt } else { &b.mnt };
        // 5,000 bytes: each round shares a block with the one before.
        let bytes = vec![b'a' + round; 5_000];
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(m.join("shared"))
            .unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, &bytes, want.len() as u64).unwrap();
        f.sync_all().unwrap();
        drop(f);
        want.extend_from_slice(&bytes);
    }
    for m in [&o.mnt, &b.mnt] {
        assert!(
            std::fs::read(m.join("shared")).unwrap() == want,
            "every round's bytes, read at {}",
            m.display()
        );
    }
}

/// A replica that flips every byte of what it answers — read data, sealed headers,
/// names, link targets, attribute values — never gets a flipped byte to the application
/// of an encrypted mount: the reply vote outvotes it, and what would pass the vote would
/// not open. Needs the test-only feature `byzantine` (`scripts/test.sh` turns it on).
#[cfg(feature = "byzantine")]
#[test]
fn a_replica_that_tampers_with_every_reply_changes_nothing_read() {
    if skip_without_fuse() {
        return;
    }
    let _serial = common::serial();
    let (procs, _keys, owner) = cluster_with_team("memory", liars(&[0], "lie-replies"));
    let w = mount_as(&procs, &owner, "team", "writer");
    assert_eq!(fill(&w.mnt), want_tree());
    drop(w);
    // A fresh mount: nothing cached, every byte read from the replicas again.
    let again = mount_as(&procs, &owner, "team", "again");
    assert_eq!(read_tree(&again.mnt), want_tree());
    drop(again);
    let log = std::fs::read_to_string(procs.dir.path().join("replica-0.log")).unwrap();
    assert!(
        log.contains("TEST-ONLY fault injection"),
        "replica 0 ran as a liar"
    );
}

/// A replica that rolls every file's attributes back to the first it reported (an old
/// size and an old sealed header of an encrypted file) is outvoted: a fresh mount reads
/// the latest contents, size and all. Needs the test-only feature `byzantine`.
#[cfg(feature = "byzantine")]
#[test]
fn a_replica_that_rolls_headers_back_is_outvoted() {
    if skip_without_fuse() {
        return;
    }
    let _serial = common::serial();
    let (procs, _keys, owner) = cluster_with_team("memory", liars(&[1], "stale-replies"));
    let w = mount_as(&procs, &owner, "team", "writer");
    let f = w.mnt.join("f");
    std::fs::write(&f, "first").unwrap();
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 5);
    for (i, more) in [
        "-second",
        "-third, longer than a block: ",
        &"x".repeat(5000),
    ]
    .iter()
    .enumerate()
    {
        let mut h = std::fs::OpenOptions::new().append(true).open(&f).unwrap();
        h.write_all(more.as_bytes()).unwrap();
        h.sync_all().unwrap();
        drop(h);
        let fresh = mount_as(&procs, &owner, "team", &format!("fresh-{i}"));
        let got = std::fs::read_to_string(fresh.mnt.join("f")).unwrap();
        assert!(got.ends_with(more), "read {} bytes", got.len());
        assert_eq!(
            std::fs::metadata(fresh.mnt.join("f")).unwrap().len() as usize,
            got.len()
        );
    }
    let want = format!(
        "first-second-third, longer than a block: {}",
        "x".repeat(5000)
    );
    assert_eq!(std::fs::read_to_string(&f).unwrap(), want);
}

/// The same rollback by `f + 1` replicas answering alike: the client takes the first `f + 1`
/// matching replies, so the old header (validly signed, once current) gets through
/// whenever theirs come first — what neither the reply quorum nor a writer's signature can
/// stop (docs/ENCRYPTION.md "Freshness"). The test shows the attack, so the one
/// above can fail.
#[cfg(feature = "byzantine")]
#[test]
fn f_plus_one_replicas_rolling_back_alike_are_believed() {
    if skip_without_fuse() {
        return;
    }
    let _serial = common::serial();
    // Colluding liars agree on a lie only where each sends the full result: a test liar's
    // digest-only reply carries a digest of its own (`byzfs_net` `liar.rs`), and a
    // lookup's reply, with its 252-byte signed header, is over the default threshold.
    let procs = Procs::with_protocol(
        "memory",
        "fs",
        liars(&[1, 2], "stale-replies"),
        &[("full_reply_threshold", "4096")],
    );
    let keys = tempfile::tempdir().unwrap();
    let (owner, _) = identity(keys.path(), "owner.id");
    group(&procs, &owner, &["create", "team"]);
    let w = mount_as(&procs, &owner, "team", "writer");
    std::fs::write(w.mnt.join("f"), "").unwrap();
    std::fs::metadata(w.mnt.join("f")).unwrap();
    let mut h = std::fs::OpenOptions::new()
        .append(true)
        .open(w.mnt.join("f"))
        .unwrap();
    h.write_all(b"written after the liars first saw the file")
        .unwrap();
    h.sync_all().unwrap();
    drop(h);
    // Fresh mounts that cache no attribute and order every read (`--strict`: the first
    // `f + 1` matching replies decide, with no read-only try first): every `stat` asks
    // the replicas again.
    let mut rolled_back = 0;
    for i in 0..3 {
        let fresh = mount_with(
            &procs,
            &owner,
            "team",
            &format!("fresh-{i}"),
            &["--cache-timeout", "0", "--strict"],
        );
        for _ in 0..10 {
            if std::fs::metadata(fresh.mnt.join("f")).unwrap().len() == 0 {
                rolled_back += 1;
            }
        }
    }
    eprintln!("{rolled_back} of 30 looks at the file saw the rolled-back size");
    assert!(rolled_back > 0, "f + 1 liars never got through");
}

/// `bytes` written to `path` and synced: at the replicas when this returns.
#[cfg(feature = "byzantine")]
fn write_synced(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
}

/// One fresh mount's read of `name`: the bytes, or the errno.
#[cfg(feature = "byzantine")]
fn fresh_read(procs: &Procs, owner: &Path, i: usize, name: &str) -> Result<Vec<u8>, i32> {
    let fresh = mount_with(
        procs,
        owner,
        "team",
        &format!("fresh-{i}"),
        &["--cache-timeout", "0", "--strict"],
    );
    std::fs::read(fresh.mnt.join(name)).map_err(|e| e.raw_os_error().unwrap_or(-1))
}

/// Replicas answering reads from an old snapshot of the files, consistent in itself (old
/// signed header, old blocks, old tree nodes; `--byzantine old-snapshot`): one is
/// outvoted and every read returns the latest data; two (`f + 1`) get the old version
/// through to some reads — whole and as it was, never a mix of versions, which the signed
/// root would refuse — the rollback only more than `f` liars can make.
#[cfg(feature = "byzantine")]
#[test]
fn old_snapshots_are_outvoted_and_only_f_plus_one_roll_a_file_back_whole() {
    if skip_without_fuse() {
        return;
    }
    let _serial = common::serial();
    let (one, two) = (vec![b'1'; 10_000], vec![b'2'; 10_000]);
    for liar_ids in [&[1][..], &[1, 2][..]] {
        let (procs, _keys, owner) = cluster_with_team("memory", liars(liar_ids, "old-snapshot"));
        let w = mount_as(&procs, &owner, "team", "writer");
        write_synced(&w.mnt.join("doc"), &one);
        // The liars see the file once as it is now...
        assert_eq!(fresh_read(&procs, &owner, 100, "doc"), Ok(one.clone()));
        // ...and it changes.
        write_synced(&w.mnt.join("doc"), &two);
        let reads: Vec<_> = (0..20)
            .map(|i| fresh_read(&procs, &owner, i, "doc"))
            .collect();
        let old = reads.iter().filter(|r| **r == Ok(one.clone())).count();
        let new = reads.iter().filter(|r| **r == Ok(two.clone())).count();
        eprintln!(
            "{} liar(s): {old} old, {new} new, {} refused of 20 reads",
            liar_ids.len(),
            20 - old - new
        );
        if liar_ids.len() == 1 {
            assert_eq!(new, 20, "one liar is outvoted: {reads:?}");
        } else {
            assert!(
                reads
                    .iter()
                    .all(|r| matches!(r, Ok(b) if *b == one || *b == two) || *r == Err(libc::EIO)),
                "a version whole, or EIO: {reads:?}"
            );
            assert!(old > 0, "f + 1 liars never got the old version through");
        }
    }
}

/// The id of `owner`'s group `team`, in hex.
fn hex_id(owner: &byzfs_crypt::member::Identity) -> String {
    owner
        .group_id("team")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The identity file's secrets (hex fields of `byzfs identity new`'s TOML).
fn load_identity(path: &Path) -> byzfs_crypt::member::Identity {
    let text = std::fs::read_to_string(path).unwrap();
    let field = |name: &str| -> [u8; 32] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{name} = ")))
            .unwrap();
        let hex_text = line.split('"').nth(1).unwrap();
        let bytes: Vec<u8> = (0..hex_text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex_text[i..i + 2], 16).unwrap())
            .collect();
        bytes.try_into().unwrap()
    };
    byzfs_crypt::member::Identity::from_secrets(field("x25519_secret"), field("ed25519_secret"))
}

/// Writes sent straight to the replicas over the network, with valid MACs and a missing,
/// forged, replayed or misplaced writer proof, are refused by every replica alike: each
/// gets `EACCES`, and all four replicas' states stay equal and unchanged.
#[test]
fn forged_writes_sent_straight_to_the_replicas_are_refused_alike() {
    use byzfs_fs::proto::signed::sign;
    use byzfs_fs::{decode_result, Credentials, Errno, Op, Reply, Request};
    if skip_without_fuse() {
        return;
    }
    let _serial = common::serial();
    let (procs, _keys, owner) = cluster_with_team("memory", liars(&[], ""));
    let id = hex_id(&load_identity(&owner));
    let w = mount_as(&procs, &owner, "team", "writer");
    std::fs::write(w.mnt.join("f"), "the owner's").unwrap();
    drop(w);

    let rt = common::rt();
    let mut client = rt
        .block_on(byzfs_net::ByzClient::connect(
            &procs.cluster,
            &procs.credential(),
        ))
        .unwrap();
    let me = client.id();
    let cred = Credentials::root();
    let grant = byzfs_fuse::fsclient::signed_grant(&procs.credential()).unwrap();
    let mut call = |op: Op| -> Result<Reply, Errno> {
        let ro = op.is_read_only();
        let out = rt
            .block_on(client.invoke(
                Request::granted(cred.clone(), op, grant.clone()).encode(),
                ro,
            ))
            .unwrap();
        decode_result(&out).unwrap()
    };
    let top = match call(Op::Lookup {
        dir: byzfs_fs::FileHandle::ROOT,
        name: format!("g-{id}").into_bytes(),
    }) {
        Ok(Reply::Entry(a)) => a.fh,
        other => panic!("{other:?}"),
    };
    let f = match call(Op::ReadDir {
        dir: top,
        cookie: 0,
        max_entries: 16,
    }) {
        Ok(Reply::ReadDir { entries, .. }) => {
            entries
                .into_iter()
                .find(|e| e.name != b"." && e.name != b"..")
                .unwrap()
                .fh
        }
        other => panic!("{other:?}"),
    };
    // The owner's writer key, from its lockbox (the test plays the owner's own machine).
    let record = match call(Op::GroupGet {
        group: byzfs_crypt::member::group_id(&load_identity(&owner).owner_key(), "team"),
    }) {
        Ok(Reply::Group(Some(r))) => r.record,
        other => panic!("{other:?}"),
    };
    let cluster = procs.cluster.cluster_id;
    let team = load_identity(&owner).group_ref(&cluster, "team");
    let mine = byzfs_crypt::member::open_mine(
        &load_identity(&owner),
        &team,
        &record.lockboxes,
        record.version,
        &record.writer,
    )
    .unwrap();
    let (writer, _) = mine.writer.unwrap();
    let group_id = byzfs_crypt::member::group_id(&load_identity(&owner).owner_key(), "team");
    let junk = || Op::Write {
        fh: f,
        offset: 0,
        data: b"forged".to_vec(),
    };
    let before = procs.wait_until("the replicas agree", |s| {
        s.iter().all(|x| x.state_digest == s[0].state_digest)
    });
    let stranger = ed25519_dalek::SigningKey::from_bytes(&[42; 32]);
    // A proof the writer made and used: its sequence number cannot serve again.
    let used = 1 << 43;
    let fine = sign(
        &writer,
        &cluster,
        &[group_id],
        record.version,
        me,
        used,
        &cred,
        Op::Fsync { fh: f },
    );
    assert_eq!(call(fine), Ok(Reply::Done));
    let forged = [
        ("no proof", junk()),
        (
            "a stranger's key",
            sign(
                &stranger,
                &cluster,
                &[group_id],
                record.version,
                me,
                1 << 40,
                &cred,
                junk(),
            ),
        ),
        (
            "another client's proof",
            sign(
                &writer,
                &cluster,
                &[group_id],
                record.version,
                me + 1,
                1 << 41,
                &cred,
                junk(),
            ),
        ),
        (
            "a used sequence number",
            sign(
                &writer,
                &cluster,
                &[group_id],
                record.version,
                me,
                used,
                &cred,
                junk(),
            ),
        ),
        (
            "a proof for another group",
            sign(
                &writer,
                &cluster,
                &[[7; 16]],
                record.version,
                me,
                1 << 42,
                &cred,
                junk(),
            ),
        ),
    ];
    for (what, op) in forged {
        assert_eq!(call(op), Err(Errno::EACCES), "{what}");
    }
    // Executed and refused everywhere: the replicas moved on (the agreed clock) in step.
    let after = procs.wait_until("the replicas agree again", |s| {
        s.iter().all(|x| {
            x.state_digest == s[0].state_digest && x.last_executed > before[0].last_executed
        })
    });
    assert!(after
        .iter()
        .all(|s| s.state_digest == after[0].state_digest));
    // And the file is as the owner wrote it (a fresh mount reads it).
    let check = mount_as(&procs, &owner, "team", "check");
    assert_eq!(
        std::fs::read_to_string(check.mnt.join("f")).unwrap(),
        "the owner's"
    );
}

/// A file an encrypted mount removes while it is open waits in the cluster root's orphan
/// directory under a plain hidden name, as a plain mount's does, so the replicas' sweep
/// can clear it if the mount dies; its contents stay sealed, and the directory it left
/// lists as empty.
#[test]
fn files_removed_while_open_wait_sealed_in_the_shared_orphan_directory() {
    if skip_without_fuse() {
        return;
    }
    let _serial = common::serial();
    let (procs, _keys, owner) = cluster_with_team("memory", liars(&[], ""));
    let w = mount_as(&procs, &owner, "team", "writer");
    std::fs::create_dir(w.mnt.join("d")).unwrap();
    std::fs::write(w.mnt.join(format!("d/{CANARY}")), CANARY).unwrap();
    let mut open = std::fs::File::open(w.mnt.join(format!("d/{CANARY}"))).unwrap();
    std::fs::remove_file(w.mnt.join(format!("d/{CANARY}"))).unwrap();
    assert_eq!(std::fs::read_dir(w.mnt.join("d")).unwrap().count(), 0);
    std::fs::remove_dir(w.mnt.join("d")).unwrap();
    let mut text = String::new();
    open.read_to_string(&mut text).unwrap();
    assert_eq!(text, CANARY, "still readable while open");
    let plain_mnt = procs.dir.path().join("plain");
    let log = std::env::temp_dir().join(format!(
        "byzfs-encryption-orphans-{}.log",
        std::process::id()
    ));
    let p = Mount::start(&procs.config(), &plain_mnt, &log);
    let hidden: Vec<String> = std::fs::read_dir(plain_mnt.join(".byzfs-orphans"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(hidden.len(), 1, "{hidden:?}");
    assert!(hidden[0].starts_with(".byzfs-silly-"), "{hidden:?}");
    let sealed = std::fs::read(plain_mnt.join(".byzfs-orphans").join(&hidden[0])).unwrap();
    assert!(!sealed.windows(CANARY.len()).any(|x| x == CANARY.as_bytes()));
    // Removed at its last close.
    drop(open);
    let start = std::time::Instant::now();
    while std::fs::read_dir(plain_mnt.join(".byzfs-orphans"))
        .unwrap()
        .count()
        > 0
    {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "the hidden file stayed"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    drop(p);
}

/// Issue #43 item 5 (7): a new encrypted directory is made with its header (its names' key
/// version) in one signed request — made at a handle the mount reserved — so no failure
/// between two requests can leave its names under version 1's key.
#[test]
fn a_new_directory_and_its_header_are_one_request() {
    if skip_without_fuse() {
        return;
    }
    let _serial = common::serial();
    let (procs, _keys, owner) = cluster_with_team("memory", liars(&[], ""));
    let log = std::env::temp_dir().join(format!(
        "byzfs-encryption-one-mkdir-{}.log",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&log);
    let w = Mount::start_with_env(
        &procs.config(),
        &procs.dir.path().join("writer"),
        &log,
        &[
            "--timeout-ms",
            "120000",
            "--identity",
            owner.to_str().unwrap(),
            "--group",
            "team",
            // Each creation sent as it comes (not answered early and batched).
            "--no-dir-delegations",
        ],
        &[("RUST_LOG", "byzfs_fuse::cluster=trace")],
    );
    let signed = || {
        std::fs::read_to_string(&log)
            .unwrap()
            .matches("send op=\"signed\"")
            .count()
    };
    let before = signed();
    std::fs::create_dir(w.mnt.join("d")).unwrap();
    assert_eq!(signed() - before, 1, "one signed request for mkdir");
    std::fs::write(w.mnt.join("d/f"), "in d").unwrap();
    drop(w);
    let again = mount_as(&procs, &owner, "team", "again");
    assert_eq!(
        std::fs::read_to_string(again.mnt.join("d/f")).unwrap(),
        "in d"
    );
    let _ = std::fs::remove_file(&log);
}

/// `byzfs mount` as `id` of `group` with `more` flags, which must fail; its stderr.
fn mount_refused(procs: &Procs, id: &Path, group: &str, more: &[&str]) -> String {
    let mnt = procs.dir.path().join("refused");
    std::fs::create_dir_all(&mnt).unwrap();
    let out = Command::new(BIN)
        .args(["mount", "--config"])
        .arg(procs.config())
        .args(["--timeout-ms", "120000", "--identity"])
        .arg(id)
        .args(["--group", group])
        .args(more)
        .arg(&mnt)
        .output()
        .unwrap();
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Issue #43 item 5 (1, 6): a mount takes only its expected owner's group, and never a
/// `/g-<id>` someone else made first (the replicas no longer let anyone join an existing
/// directory to a group, so such a directory is in no group or in the maker's).
#[test]
fn a_mount_refuses_another_owner_and_a_tree_someone_else_made() {
    use byzfs_fs::{decode_result, Credentials, FileHandle, Op, Reply, Request};
    if skip_without_fuse() {
        return;
    }
    let _serial = common::serial();
    let (procs, keys, owner) = cluster_with_team("memory", liars(&[], ""));
    let id = hex_id(&load_identity(&owner));
    // The group by its id, expecting another owner: refused before anything is made.
    let (stranger, _) = identity(keys.path(), "stranger.id");
    let err = mount_refused(&procs, &owner, &id, &["--owner", &owner_key(&stranger)]);
    assert_eq!(
        err.lines().last().unwrap(),
        format!(
            "error: group {id}: the group's record names owner {}, not {}",
            owner_key(&owner),
            owner_key(&stranger)
        )
    );
    // A squatter makes `/g-<id>` first (any client may make a directory at the root).
    let rt = common::rt();
    let mut client = rt
        .block_on(byzfs_net::ByzClient::connect(
            &procs.cluster,
            &procs.credential(),
        ))
        .unwrap();
    let mkdir = Op::Mkdir {
        dir: FileHandle::ROOT,
        name: format!("g-{id}").into_bytes(),
        mode: 0o777,
    };
    let grant = byzfs_fuse::fsclient::signed_grant(&procs.credential()).unwrap();
    let out = rt
        .block_on(client.invoke(
            Request::granted(Credentials::root(), mkdir, grant).encode(),
            false,
        ))
        .unwrap();
    assert!(matches!(decode_result(&out), Some(Ok(Reply::Made { .. }))));
    let err = mount_refused(&procs, &owner, "team", &[]);
    assert_eq!(
        err.lines().last().unwrap(),
        format!(
            "error: /g-{id} is not group {id}'s tree (it is in no group): someone else made \
             it first; refusing to mount it. Its maker can remove it, or use a group of \
             another name"
        )
    );
}

/// Directories made (each at a reserved handle, with its header) between creations a
/// mount answered early and queued (with lower handles, `byzfs_fs::reserve`) lose none of
/// them: every name is there for a fresh mount.
#[test]
fn directories_made_among_queued_creations_lose_nothing() {
    if skip_without_fuse() {
        return;
    }
    let _serial = common::serial();
    let (procs, _keys, owner) = cluster_with_team("memory", liars(&[], ""));
    let w = mount_as(&procs, &owner, "team", "writer");
    let mut want = Vec::new();
    for i in 0..4 {
        std::fs::create_dir(w.mnt.join(format!("d{i}"))).unwrap();
        for j in 0..3 {
            std::fs::write(w.mnt.join(format!("d{i}/f{j}")), format!("{i}{j}")).unwrap();
            want.push(format!("d{i}/f{j} {i}{j}"));
        }
    }
    // A creation queued in a held directory (an empty file: no write held back to send
    // it), then a directory made in one not held (its first creation), which goes at once.
    for i in 0..4 {
        std::fs::File::create(w.mnt.join(format!("d{}/g{i}", (i + 1) % 4))).unwrap();
        want.push(format!("d{}/g{i} ", (i + 1) % 4));
        std::fs::create_dir(w.mnt.join(format!("n{i}"))).unwrap();
        std::fs::create_dir(w.mnt.join(format!("n{i}/m"))).unwrap();
        std::fs::write(w.mnt.join(format!("n{i}/m/h")), "h").unwrap();
        want.push(format!("n{i}/m/h h"));
    }
    std::fs::File::open(&w.mnt).unwrap().sync_all().unwrap();
    drop(w);
    let fresh = mount_as(&procs, &owner, "team", "fresh");
    let mut files = Vec::new();
    files_under(&fresh.mnt, &mut files);
    let mut got: Vec<String> = files
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(&fresh.mnt).unwrap().to_str().unwrap();
            format!("{rel} {}", std::fs::read_to_string(p).unwrap())
        })
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
}
