//! End to end over a mounted ByzFS: `byzfs up --mount` (and a second client with `byzfs
//! mount`), then ordinary file-system calls through FUSE, checked against what Linux file
//! systems return. Skipped, with a message, only where FUSE is unavailable.
//!
//! One cluster serves every section (clusters are costly on a small machine); each section
//! works in its own directory of the mount.

use crate::common;

use common::{is_mounted, skip_without_fuse, Mount, Up, BIN};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::fs::{self, File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Runs `cmd` and asserts it succeeded. On failure the message holds the first lines of its
/// stderr only: a command failing on every file of a tree (say, once the mount is gone)
/// would otherwise bury the cause (`byzfs up`'s log, printed after) in CI's truncated log.
#[track_caller]
fn run_ok(cmd: &mut Command, what: &str) {
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = err.lines().collect();
        panic!(
            "{what}: {} ({} lines of stderr, the first ones:)\n{}",
            out.status,
            lines.len(),
            lines[..lines.len().min(8)].join("\n")
        );
    }
}

/// Asserts that `r` failed with Linux errno `want`.
#[track_caller]
fn errno<T: std::fmt::Debug>(r: std::io::Result<T>, want: i32, what: &str) {
    match r {
        Ok(v) => panic!("{what}: succeeded ({v:?}), wanted errno {want}"),
        Err(e) => assert_eq!(e.raw_os_error(), Some(want), "{what}: {e}"),
    }
}

/// Polls `cond` for up to 5 s (for effects of the kernel's asynchronous RELEASE).
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    cond()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

/// A deterministic pseudo-random byte stream (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| (self.next() >> 56) as u8).collect()
    }
}

#[test]
fn mount_unavailable_says_what_to_install() {
    // No fusermount3 on PATH: a one-line error naming the package, before anything starts.
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["mount", "--config", "nowhere.toml"])
        .arg(dir.path())
        .env("PATH", "")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("apt-get install fuse3"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // --mount is the file service: another service is refused before anything starts.
    let out = Command::new(BIN)
        .args(["up", "--service", "kv", "--mount"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--mount needs --service fs"), "{err}");
    // Who may use a mount is said with the mount.
    let out = Command::new(BIN)
        .args(["up", "--private", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("add --mount MOUNTPOINT"), "{err}");
}

#[test]
fn mounted_cluster_behaves_like_a_linux_file_system() {
    if skip_without_fuse() {
        return;
    }
    // The owner of /proc/self is the effective user.
    let root = fs::metadata("/proc/self").unwrap().uid() == 0;
    // A soft mount: an operation the cluster leaves unanswered fails this test (EIO) where
    // it happens, with `up`'s log, instead of hanging it.
    let soft = ["--timeout-ms", "120000"];
    // Run as root, the mount lets every user in by default (`permissions` checks it).
    let up = Up::start_mounted(&soft);
    let mnt = up.mountpoint.clone().unwrap();
    assert!(
        is_mounted(&mnt),
        "up --mount mounted before saying it is up"
    );

    let t = Instant::now();
    basics(&mnt.join("basics"));
    errnos(&mnt.join("errno"), 255);
    renames(&mnt.join("rename"));
    rename_flags(&mnt.join("rename2"));
    data(&mnt.join("data"));
    random_io(&mnt.join("random-io"));
    removed_while_open(&mnt.join("silly"), true);
    tmpfile(&mnt.join("tmpfile"));
    xattrs(&mnt.join("xattr"));
    if root {
        permissions(&up, &mnt.join("perm"));
    } else {
        eprintln!("EACCES section skipped: needs root to run a child as another user");
    }
    eprintln!("single-mount sections: {:?}", t.elapsed());

    let t = Instant::now();
    busy_mountpoint_is_refused(&mnt);
    two_mounts(&up, &mnt);
    eprintln!("two mounts: {:?}", t.elapsed());

    let t = Instant::now();
    tree_copy(&mnt.join("tree"));
    eprintln!("tree copy: {:?}", t.elapsed());
    let t = Instant::now();
    git(&mnt.join("repo"));
    eprintln!("git: {:?}", t.elapsed());

    // A file still open in the mount at shutdown: `up` detaches the busy mount lazily.
    let held = File::open(mnt.join("basics/file")).unwrap();
    drop(up);
    assert!(!is_mounted(&mnt), "unmounted on SIGTERM, even busy");
    drop(held);
}

/// The single-mount sections, a tree copy and git over an encrypted mount (`up --encrypt`,
/// issue #28): the crypto layer under every name, byte, target and attribute.
#[test]
fn an_encrypted_mount_behaves_like_a_linux_file_system_too() {
    if skip_without_fuse() {
        return;
    }
    let up = Up::start_mounted(&["--timeout-ms", "120000", "--encrypt"]);
    let mnt = up.mountpoint.clone().unwrap();
    basics(&mnt.join("basics"));
    // Sealed names take 255 bytes from 159 plain ones (docs/ENCRYPTION.md).
    errnos(&mnt.join("errno"), 159);
    renames(&mnt.join("rename"));
    rename_flags(&mnt.join("rename2"));
    data(&mnt.join("data"));
    random_io(&mnt.join("random-io"));
    removed_while_open(&mnt.join("silly"), false);
    tmpfile(&mnt.join("tmpfile"));
    xattrs(&mnt.join("xattr"));
    tree_copy(&mnt.join("tree"));
    git(&mnt.join("repo"));
    drop(up);
    assert!(!is_mounted(&mnt));
}

/// Files, directories, links, fifo, listing.
fn basics(d: &Path) {
    fs::create_dir_all(d.join("sub")).unwrap();
    let f = d.join("file");
    let content: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    fs::write(&f, &content).unwrap();
    assert_eq!(fs::read(&f).unwrap(), content);
    assert_eq!(fs::metadata(&f).unwrap().len(), content.len() as u64);
    // Hard links share the inode; the link count follows.
    fs::hard_link(&f, d.join("hard")).unwrap();
    let (a, b) = (
        fs::metadata(&f).unwrap(),
        fs::metadata(d.join("hard")).unwrap(),
    );
    assert_eq!((a.ino(), a.nlink()), (b.ino(), 2));
    fs::remove_file(d.join("hard")).unwrap();
    assert_eq!(fs::metadata(&f).unwrap().nlink(), 1);
    // Directories count their subdirectories' "..".
    assert_eq!(fs::metadata(d).unwrap().nlink(), 3);
    // Symbolic links: readlink, following, dangling.
    std::os::unix::fs::symlink("file", d.join("sym")).unwrap();
    assert_eq!(fs::read_link(d.join("sym")).unwrap(), Path::new("file"));
    assert_eq!(fs::read(d.join("sym")).unwrap(), content);
    std::os::unix::fs::symlink("nowhere", d.join("dangling")).unwrap();
    errno(
        fs::metadata(d.join("dangling")),
        2,
        "stat of a dangling symlink",
    );
    assert!(fs::symlink_metadata(d.join("dangling"))
        .unwrap()
        .file_type()
        .is_symlink());
    // A fifo (mknod).
    run_ok(Command::new("mkfifo").arg(d.join("fifo")), "mkfifo");
    assert!(fs::symlink_metadata(d.join("fifo"))
        .unwrap()
        .file_type()
        .is_fifo());
    // chmod, and the mode the kernel then reports.
    fs::set_permissions(&f, fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(fs::metadata(&f).unwrap().mode() & 0o7777, 0o640);
    // Listing.
    assert_eq!(names(d), ["dangling", "fifo", "file", "sub", "sym"]);
    // A device node (root only, as on Linux): its number survives the round trip.
    if nix::unistd::geteuid().is_root() {
        run_ok(
            Command::new("mknod")
                .arg(d.join("null"))
                .args(["c", "1", "3"]),
            "mknod c 1 3",
        );
        let m = fs::symlink_metadata(d.join("null")).unwrap();
        assert!(m.file_type().is_char_device());
        assert_eq!(m.rdev(), 0x0103, "device number 1:3");
        fs::remove_file(d.join("null")).unwrap();
    }
}

/// Error numbers as Linux file systems return them; names up to `name_max` bytes work.
fn errnos(d: &Path, name_max: usize) {
    fs::create_dir_all(d.join("full/inner")).unwrap();
    let f = d.join("f");
    fs::write(&f, b"x").unwrap();
    errno(fs::metadata(d.join("missing")), 2, "ENOENT stat");
    errno(File::open(d.join("missing")), 2, "ENOENT open");
    errno(fs::remove_file(d.join("missing")), 2, "ENOENT unlink");
    errno(
        OpenOptions::new().write(true).create_new(true).open(&f),
        17,
        "EEXIST: O_CREAT|O_EXCL on a file",
    );
    errno(
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(d.join("full")),
        17,
        "EEXIST: O_CREAT|O_EXCL on a directory",
    );
    errno(fs::create_dir(d.join("full")), 17, "EEXIST mkdir");
    errno(
        fs::hard_link(&f, d.join("full")),
        17,
        "EEXIST link onto a name",
    );
    errno(fs::remove_dir(d.join("full")), 39, "ENOTEMPTY rmdir");
    errno(
        OpenOptions::new().write(true).open(d.join("full")),
        21,
        "EISDIR open for writing",
    );
    errno(fs::remove_file(d.join("full")), 21, "EISDIR unlink");
    errno(fs::read_dir(&f).map(|_| ()), 20, "ENOTDIR opendir");
    errno(fs::write(f.join("x"), b""), 20, "ENOTDIR below a file");
    errno(fs::remove_dir(&f), 20, "ENOTDIR rmdir");
    let long = "n".repeat(name_max + 1);
    errno(fs::write(d.join(&long), b""), 36, "ENAMETOOLONG create");
    errno(fs::metadata(d.join(&long)), 36, "ENAMETOOLONG lookup");
    // Again once the mount holds the directory's listing (a delegated directory answers
    // misses itself, but not for a name no directory can hold).
    assert!(fs::read_dir(d).unwrap().count() > 0);
    errno(
        fs::metadata(d.join("n".repeat(name_max + 2))),
        36,
        "ENAMETOOLONG lookup in a listed directory",
    );
    let max = "m".repeat(name_max);
    fs::write(d.join(&max), b"ok").unwrap();
    assert_eq!(fs::read(d.join(&max)).unwrap(), b"ok");
    errno(
        fs::hard_link(d.join("full"), d.join("dirlink")),
        1,
        "EPERM hard link to a directory",
    );
    // An ioctl the file system does not know (`tcgetattr`'s TCGETS, as `isatty` sends on
    // an output file): ENOTTY, as Linux file systems answer.
    errno(
        nix::sys::termios::tcgetattr(File::open(&f).unwrap()).map_err(std::io::Error::from),
        25,
        "ENOTTY ioctl on a file",
    );
}

fn renames(d: &Path) {
    fs::create_dir_all(d.join("a/b")).unwrap();
    fs::create_dir_all(d.join("empty")).unwrap();
    fs::create_dir_all(d.join("nonempty/x")).unwrap();
    fs::write(d.join("one"), b"one").unwrap();
    fs::write(d.join("two"), b"two").unwrap();
    // Over an existing file: replaced atomically.
    fs::rename(d.join("one"), d.join("two")).unwrap();
    assert_eq!(fs::read(d.join("two")).unwrap(), b"one");
    errno(fs::metadata(d.join("one")), 2, "source gone after rename");
    // A directory over an empty directory: replaced; over a non-empty one: ENOTEMPTY.
    fs::rename(d.join("a"), d.join("empty")).unwrap();
    assert!(d.join("empty/b").is_dir());
    errno(
        fs::rename(d.join("empty"), d.join("nonempty")),
        39,
        "ENOTEMPTY rename over a non-empty dir",
    );
    errno(
        fs::rename(d.join("two"), d.join("nonempty")),
        21,
        "EISDIR rename a file over a dir",
    );
    errno(
        fs::rename(d.join("nonempty"), d.join("two")),
        20,
        "ENOTDIR rename a dir over a file",
    );
    errno(
        fs::rename(d.join("empty"), d.join("empty/b/inside")),
        22,
        "EINVAL rename a dir into its own subtree",
    );
    errno(
        fs::rename(d.join("missing"), d.join("x")),
        2,
        "ENOENT rename",
    );
    // Across directories, and onto itself (a no-op).
    fs::rename(d.join("two"), d.join("nonempty/x/two")).unwrap();
    fs::rename(d.join("nonempty/x/two"), d.join("nonempty/x/two")).unwrap();
    assert_eq!(fs::read(d.join("nonempty/x/two")).unwrap(), b"one");
    assert_eq!(names(d), ["empty", "nonempty"]);
}

/// O_APPEND, O_TRUNC, truncate, sparse files, a large file.
/// Writes, truncations and reads at random places around the 1 MiB chunks an encrypted
/// file is stored in (`byzfs_crypt::file`: entries before each chunk, a cut clears those
/// after it), each compared with a model of the file; the same on a plain mount.
fn random_io(d: &Path) {
    fs::create_dir_all(d).unwrap();
    let path = d.join("f");
    let mut f = OpenOptions::new()
        .create(true)
        .read(true)
        .write(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let mut model: Vec<u8> = Vec::new();
    // A fixed xorshift: a failure reproduces.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    const MIB: u64 = 1 << 20;
    // Places near chunk and block edges, where the layout's cases are.
    let place = |next: &mut dyn FnMut(u64) -> u64| {
        let edge = [0, 4096, MIB - 4096, MIB, MIB + 4096, 2 * MIB][next(6) as usize];
        (edge + next(3 * 4096)).saturating_sub(4096)
    };
    for step in 0..120 {
        match next(10) {
            0..=5 => {
                let at = place(&mut next);
                let most = if next(4) == 0 { 300_000 } else { 9000 };
                let len = 1 + next(most);
                let bytes: Vec<u8> = (0..len).map(|i| (i as u8) ^ (step as u8)).collect();
                f.seek(SeekFrom::Start(at)).unwrap();
                f.write_all(&bytes).unwrap();
                let end = (at + len) as usize;
                if model.len() < end {
                    model.resize(end, 0);
                }
                model[at as usize..end].copy_from_slice(&bytes);
            }
            6..=7 => {
                let to = place(&mut next);
                f.set_len(to).unwrap();
                model.resize(to as usize, 0);
            }
            _ => {
                let at = place(&mut next);
                let len = 1 + next(200_000);
                let mut got = vec![0; len as usize];
                f.seek(SeekFrom::Start(at)).unwrap();
                let mut n = 0;
                loop {
                    match f.read(&mut got[n..]).unwrap() {
                        0 => break,
                        k => n += k,
                    }
                }
                let from = (at as usize).min(model.len());
                let to = (at + len).min(model.len() as u64) as usize;
                assert_eq!(&got[..n], &model[from..to], "step {step}: read {at}+{len}");
            }
        }
        assert_eq!(
            f.metadata().unwrap().len(),
            model.len() as u64,
            "step {step}"
        );
    }
    drop(f);
    assert!(
        fs::read(&path).unwrap() == model,
        "the whole file at the end"
    );
}

fn data(d: &Path) {
    fs::create_dir_all(d).unwrap();
    let f = d.join("append");
    fs::write(&f, b"a").unwrap();
    let mut w = OpenOptions::new().append(true).open(&f).unwrap();
    w.write_all(b"b").unwrap();
    // Appends go to the end whatever the offset.
    w.seek(SeekFrom::Start(0)).unwrap();
    w.write_all(b"c").unwrap();
    drop(w);
    assert_eq!(fs::read(&f).unwrap(), b"abc");
    // O_TRUNC.
    let mut w = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&f)
        .unwrap();
    w.write_all(b"z").unwrap();
    drop(w);
    assert_eq!(fs::read(&f).unwrap(), b"z");

    // Truncate up reads zeros; truncate down drops data; a write past the end leaves a hole.
    let s = d.join("sparse");
    let file = OpenOptions::new()
        .create(true)
        .read(true)
        .write(true)
        .truncate(true)
        .open(&s)
        .unwrap();
    file.set_len(1 << 20).unwrap();
    let back = fs::read(&s).unwrap();
    assert_eq!(back.len(), 1 << 20);
    assert!(back.iter().all(|&b| b == 0), "truncate up reads zeros");
    let far = 5 << 20;
    let mut file = file;
    file.seek(SeekFrom::Start(far)).unwrap();
    file.write_all(b"end").unwrap();
    drop(file);
    let m = fs::metadata(&s).unwrap();
    assert_eq!(m.len(), far + 3);
    let back = fs::read(&s).unwrap();
    assert!(
        back[..far as usize].iter().all(|&b| b == 0),
        "hole reads zeros"
    );
    assert_eq!(&back[far as usize..], b"end");
    eprintln!(
        "sparse file: size {} bytes, {} bytes allocated",
        m.len(),
        m.blocks() * 512
    );
    OpenOptions::new()
        .write(true)
        .open(&s)
        .unwrap()
        .set_len(2)
        .unwrap();
    assert_eq!(fs::read(&s).unwrap(), [0, 0]);

    // 20 MB written in odd-sized pieces, read back in other pieces.
    let big = d.join("big");
    let mut rng = Rng(0x5eed);
    let content = rng.bytes(20 << 20);
    let t = Instant::now();
    let mut w = File::create(&big).unwrap();
    for piece in content.chunks(1_000_003) {
        w.write_all(piece).unwrap();
    }
    w.sync_all().unwrap();
    drop(w);
    let wrote = t.elapsed();
    let t = Instant::now();
    let mut back = Vec::new();
    File::open(&big).unwrap().read_to_end(&mut back).unwrap();
    eprintln!("20 MB: write {wrote:?}, read {:?}", t.elapsed());
    assert!(back == content, "20 MB file read back identical");
    // One 4 MiB write(2): the kernel hands the adapter pieces of up to 1 MiB, which must be
    // split below the cluster's request limit (they once failed with EIO).
    let one = d.join("one-write");
    let blob = rng.bytes(4 << 20);
    File::create(&one).unwrap().write_all(&blob).unwrap();
    assert!(
        fs::read(&one).unwrap() == blob,
        "4 MiB single write read back"
    );
    // A read in the middle.
    let mut r = File::open(&big).unwrap();
    r.seek(SeekFrom::Start(12_345_678)).unwrap();
    let mut buf = vec![0; 100_000];
    r.read_exact(&mut buf).unwrap();
    assert_eq!(buf, content[12_345_678..12_445_678]);
    fs::remove_file(&big).unwrap();
}

/// An open file that is removed keeps working until closed (silly rename), then is gone.
/// `listed`: whether the orphan directory shows at the mount's root (an encrypted mount's
/// is at the cluster's root, outside its tree: `tests/encryption.rs` looks there).
fn removed_while_open(d: &Path, listed: bool) {
    fs::create_dir_all(d).unwrap();
    let tmp = d.join("tmp");
    let mut open = OpenOptions::new()
        .create(true)
        .read(true)
        .write(true)
        .truncate(true)
        .open(&tmp)
        .unwrap();
    open.write_all(b"still here").unwrap();
    fs::remove_file(&tmp).unwrap();
    assert!(!tmp.exists());
    let mut back = String::new();
    open.seek(SeekFrom::Start(0)).unwrap();
    open.read_to_string(&mut back).unwrap();
    assert_eq!(back, "still here");
    // Replaced by a rename while open: the same.
    fs::write(d.join("new"), b"new").unwrap();
    let old = d.join("old");
    fs::write(&old, b"old").unwrap();
    let mut held = File::open(&old).unwrap();
    fs::rename(d.join("new"), &old).unwrap();
    let mut s = String::new();
    held.read_to_string(&mut s).unwrap();
    assert_eq!(s, "old");
    assert_eq!(fs::read(&old).unwrap(), b"new");
    // Hidden files wait in the orphan directory at the root, not in the directory they came
    // from, which lists as empty and can be removed meanwhile, as on a local file system.
    assert_eq!(names(d), ["old"]);
    let sub = d.join("sub");
    fs::create_dir(&sub).unwrap();
    fs::write(sub.join("f"), b"in sub").unwrap();
    let mut in_sub = File::open(sub.join("f")).unwrap();
    fs::remove_file(sub.join("f")).unwrap();
    fs::remove_dir(&sub).expect("rmdir while a removed file in it is still open");
    let mut s = String::new();
    in_sub.read_to_string(&mut s).unwrap();
    assert_eq!(s, "in sub");
    let orphans = d.parent().unwrap().join(".byzfs-orphans");
    if listed {
        assert_eq!(names(&orphans).len(), 3, "{:?}", names(&orphans));
    }
    drop(in_sub);
    drop(open);
    drop(held);
    assert!(
        !listed || eventually(|| names(&orphans).is_empty()),
        "hidden files removed at close: {:?}",
        names(&orphans)
    );
    assert_eq!(names(d), ["old"]);
}

/// `O_TMPFILE`: a file in no directory, which `linkat` can name and which is gone at its
/// last close otherwise.
fn tmpfile(d: &Path) {
    use std::os::unix::fs::OpenOptionsExt as _;
    use std::os::unix::io::AsRawFd as _;
    fs::create_dir_all(d).unwrap();
    let open_tmp = || {
        OpenOptions::new()
            .read(true)
            .write(true)
            .mode(0o640)
            .custom_flags(nix::libc::O_TMPFILE)
            .open(d)
            .unwrap()
    };
    // Named by linkat (through /proc/self/fd, as unprivileged callers do).
    let mut kept = open_tmp();
    kept.write_all(b"made in the dark").unwrap();
    let meta = kept.metadata().unwrap();
    assert_eq!(
        (meta.nlink(), meta.len(), meta.mode() & 0o777),
        (0, 16, 0o640)
    );
    assert!(names(d).is_empty(), "in no directory: {:?}", names(d));
    let proc_path = format!("/proc/self/fd/{}", kept.as_raw_fd());
    nix::unistd::linkat(
        nix::fcntl::AT_FDCWD,
        proc_path.as_str(),
        nix::fcntl::AT_FDCWD,
        &d.join("named"),
        nix::fcntl::AtFlags::AT_SYMLINK_FOLLOW,
    )
    .unwrap();
    assert_eq!(names(d), ["named"]);
    assert_eq!(kept.metadata().unwrap().nlink(), 1);
    // Another one, never named, written and read back through its descriptor; its directory
    // may go meanwhile.
    let sub = d.join("sub");
    fs::create_dir(&sub).unwrap();
    let mut in_sub = OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_TMPFILE)
        .open(&sub)
        .unwrap();
    fs::remove_dir(&sub).expect("rmdir while an O_TMPFILE file made in it is open");
    in_sub.write_all(b"homeless").unwrap();
    drop(in_sub);
    let mut gone = open_tmp();
    gone.write_all(b"scratch").unwrap();
    gone.seek(SeekFrom::Start(0)).unwrap();
    let mut back = String::new();
    gone.read_to_string(&mut back).unwrap();
    assert_eq!(back, "scratch");
    assert_eq!(names(d), ["named"]);
    drop(kept);
    drop(gone);
    assert_eq!(fs::read(d.join("named")).unwrap(), b"made in the dark");
    assert_eq!(fs::metadata(d.join("named")).unwrap().nlink(), 1);
    // The hidden names are removed at the last close: the directory can be emptied.
    fs::remove_file(d.join("named")).unwrap();
    assert!(
        eventually(|| fs::remove_dir(d).is_ok()),
        "hidden O_TMPFILE names left in {}",
        d.display()
    );
}

/// EACCES through `default_permissions`: a child running as `nobody` (the mount allows
/// other users; the test runs as root).
fn permissions(up: &Up, d: &Path) {
    use std::os::unix::process::CommandExt as _;
    // The mount point's ancestors (a 0700 temporary directory) must let `nobody` through.
    fs::set_permissions(up.dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    fs::create_dir_all(d).unwrap();
    fs::write(d.join("public"), b"public").unwrap();
    fs::write(d.join("secret"), b"secret").unwrap();
    fs::set_permissions(d.join("secret"), fs::Permissions::from_mode(0o600)).unwrap();
    let as_nobody = |script: &str| {
        let out = Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .current_dir("/")
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let p = |name: &str| d.join(name).to_str().unwrap().to_string();
    let (ok, out, err) = as_nobody(&format!("cat {}", p("public")));
    assert!(ok && out == "public", "nobody reads a 0644 file: {err}");
    let (ok, _, err) = as_nobody(&format!("cat {}", p("secret")));
    assert!(
        !ok && err.contains("Permission denied"),
        "EACCES read: {err}"
    );
    let (ok, _, err) = as_nobody(&format!("echo x > {}", p("public")));
    assert!(
        !ok && err.contains("Permission denied"),
        "EACCES write: {err}"
    );
    let (ok, _, err) = as_nobody(&format!("mkdir {}", p("new")));
    assert!(
        !ok && err.contains("Permission denied"),
        "EACCES mkdir: {err}"
    );
    // After chown, nobody may write there.
    std::os::unix::fs::chown(d, Some(65534), Some(65534)).unwrap();
    let (ok, _, err) = as_nobody(&format!("echo mine > {}", p("mine")));
    assert!(ok, "nobody writes in its own directory: {err}");
    assert_eq!(fs::metadata(d.join("mine")).unwrap().uid(), 65534);
    // A write by another user to a set-user-ID file succeeds and clears the bit (and
    // set-group-ID, the file being group-executable), as on Linux; root's writes keep it.
    let suid = d.join("suid");
    fs::write(&suid, b"").unwrap();
    fs::set_permissions(&suid, fs::Permissions::from_mode(0o6777)).unwrap();
    let (ok, _, err) = as_nobody(&format!("printf x >> {}", p("suid")));
    assert!(ok, "a non-owner's write to a 6777 file: {err}");
    let m = fs::metadata(&suid).unwrap();
    assert_eq!(
        (m.mode() & 0o7777, m.len()),
        (0o777, 1),
        "bits cleared by the write"
    );
    fs::set_permissions(&suid, fs::Permissions::from_mode(0o6777)).unwrap();
    OpenOptions::new()
        .append(true)
        .open(&suid)
        .unwrap()
        .write_all(b"y")
        .unwrap();
    assert_eq!(
        fs::metadata(&suid).unwrap().mode() & 0o7777,
        0o6777,
        "root's write"
    );
    // `--private`: the same files through a second mount are root's alone; FUSE refuses
    // every other user before any permission check.
    let dir = up.dir.path();
    let private = Mount::start_with(
        &up.config,
        &dir.join("mnt-private"),
        &dir.join("mount-private.log"),
        &["--private"],
    );
    let public = private
        .mnt
        .join(d.strip_prefix(up.mountpoint.as_ref().unwrap()).unwrap());
    assert_eq!(fs::read(public.join("public")).unwrap(), b"public");
    let (ok, _, err) = as_nobody(&format!("cat {}", public.join("public").display()));
    assert!(
        !ok && err.contains("Permission denied"),
        "--private refuses nobody: {err}"
    );
}

/// Extended attributes: `user.` names are stored; names the replicas refuse for themselves
/// (ACLs, `security.`, malformed) get the replicas' answer from the mount.
fn xattrs(d: &Path) {
    use std::ffi::CString;
    fs::create_dir_all(d).unwrap();
    let f = d.join("f");
    fs::write(&f, b"x").unwrap();
    let path = CString::new(f.to_str().unwrap()).unwrap();
    let c = |name: &str| CString::new(name).unwrap();
    let errno = || std::io::Error::last_os_error().raw_os_error();
    let set = |name: &str, value: &[u8]| {
        // SAFETY: valid C strings and a buffer of `value.len()` bytes.
        let r = unsafe {
            libc::setxattr(
                path.as_ptr(),
                c(name).as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(errno())
        }
    };
    let get = |name: &str| {
        let mut buf = [0u8; 64];
        // SAFETY: valid C strings and a buffer of `buf.len()` bytes.
        let r = unsafe {
            libc::getxattr(
                path.as_ptr(),
                c(name).as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        match usize::try_from(r) {
            Ok(n) => Ok(buf[..n].to_vec()),
            Err(_) => Err(errno()),
        }
    };
    let remove = |name: &str| {
        // SAFETY: valid C strings.
        let r = unsafe { libc::removexattr(path.as_ptr(), c(name).as_ptr()) };
        if r == 0 {
            Ok(())
        } else {
            Err(errno())
        }
    };
    let unsupported = Err(Some(libc::EOPNOTSUPP));
    assert_eq!(set("user.note", b"kept"), Ok(()));
    assert_eq!(get("user.note"), Ok(b"kept".to_vec()));
    assert_eq!(remove("user.note"), Ok(()));
    assert_eq!(get("user.note"), Err(Some(libc::ENODATA)));
    // A minimal ACL, as `cp -a` and `setfacl` set it: version 2, then (tag, permissions,
    // id) for user::rw-, group::r--, other::r--.
    let mut acl = 2u32.to_le_bytes().to_vec();
    for (tag, perm) in [(1u16, 6u16), (4, 4), (0x20, 4)] {
        acl.extend(tag.to_le_bytes());
        acl.extend(perm.to_le_bytes());
        acl.extend(u32::MAX.to_le_bytes());
    }
    assert_eq!(set("system.posix_acl_access", &acl), unsupported);
    assert_eq!(get("system.posix_acl_access").map(drop), unsupported);
    assert_eq!(remove("system.posix_acl_access"), unsupported);
    assert_eq!(set("security.selinux", b"x"), unsupported);
    assert_eq!(get("security.capability"), Err(Some(libc::ENODATA)));
    assert_eq!(set("user.", b"x"), Err(Some(libc::EINVAL)));
    assert_eq!(fs::read(&f).unwrap(), b"x");
}

/// A second `byzfs up --mount` on a mounted directory fails at once, saying why.
fn busy_mountpoint_is_refused(mnt: &Path) {
    let other = tempfile::tempdir().unwrap();
    let err = other.path().join("stderr");
    let mut child = Command::new(BIN)
        .args(["up", "--base-port", "0", "--dir"])
        .arg(other.path().join("c"))
        .arg("--mount")
        .arg(mnt)
        .stdout(Stdio::null())
        .stderr(File::create(&err).unwrap())
        .spawn()
        .unwrap();
    // Had the check missed the mount, `up` would mount over it and run until stopped: wait
    // for its exit on another thread, at most 60 s.
    let pid = Pid::from_raw(child.id() as i32);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let Ok(status) = rx.recv_timeout(Duration::from_secs(60)) else {
        let _ = kill(pid, Signal::SIGTERM);
        panic!("a second `up --mount` on a mounted directory did not fail at once");
    };
    let status = status.unwrap();
    assert!(!status.success());
    let err = fs::read_to_string(&err).unwrap();
    assert!(err.contains("already mounted"), "{err}");
}

/// open + read(2) until EOF, with no stat on the way (`fs::read` asks for the size first,
/// which can refresh attributes on its own and hide a stale cache).
fn read_after_open(path: &Path) -> Vec<u8> {
    let mut f = File::open(path).unwrap();
    let (mut out, mut buf) = (Vec::new(), [0u8; 4096]);
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// Close-to-open consistency between two mounts of one cluster.
fn two_mounts(up: &Up, a_root: &Path) {
    let dir = up.dir.path();
    let b = Mount::start(&up.config, &dir.join("mnt-b"), &dir.join("mount-b.log"));
    let (a, b_dir) = (a_root.join("shared"), b.mnt.join("shared"));
    fs::create_dir(&a).unwrap();
    // A new directory and file on A: seen by B.
    fs::write(a.join("f"), b"version 1").unwrap();
    assert_eq!(read_after_open(&b_dir.join("f")), b"version 1");
    // Opened again unchanged: B keeps its cached pages (FOPEN_KEEP_CACHE)...
    assert_eq!(read_after_open(&b_dir.join("f")), b"version 1");
    // ...which must not outlive a change: A overwrites it in place, same size, then longer.
    fs::write(a.join("f"), b"version 2").unwrap();
    assert_eq!(read_after_open(&b_dir.join("f")), b"version 2");
    let mut w = OpenOptions::new().append(true).open(a.join("f")).unwrap();
    w.write_all(b" and more").unwrap();
    drop(w);
    assert_eq!(read_after_open(&b_dir.join("f")), b"version 2 and more");
    // A replaces it by a rename (a new inode): B opens the new one.
    fs::write(a.join("f.tmp"), b"replaced").unwrap();
    fs::rename(a.join("f.tmp"), a.join("f")).unwrap();
    assert_eq!(read_after_open(&b_dir.join("f")), b"replaced");
    // And the other way round: B writes, A reads.
    fs::create_dir(b_dir.join("from-b")).unwrap();
    fs::write(b_dir.join("from-b/g"), b"written on B").unwrap();
    assert_eq!(read_after_open(&a.join("from-b/g")), b"written on B");
    // A removes: B no longer finds it.
    fs::remove_file(a.join("from-b/g")).unwrap();
    errno(
        File::open(b_dir.join("from-b/g")),
        2,
        "removed on A, open on B",
    );
    write_behind(&a, &b_dir);
    drop(b);
    cache_timeout(up, a_root);
}

/// `--cache-timeout`: a name missing when looked up stays missing for that long on a mount
/// that cached the miss, and is seen at once on a mount that caches nothing.
fn cache_timeout(up: &Up, a_root: &Path) {
    let dir = up.dir.path();
    let long = Mount::start_with(
        &up.config,
        &dir.join("mnt-long"),
        &dir.join("mount-long.log"),
        &["--cache-timeout", "60"],
    );
    let none = Mount::start_with(
        &up.config,
        &dir.join("mnt-none"),
        &dir.join("mount-none.log"),
        &["--cache-timeout", "0"],
    );
    let a = a_root.join("cache");
    fs::create_dir(&a).unwrap();
    for m in [&long, &none] {
        errno(fs::metadata(m.mnt.join("cache/late")), 2, "not created yet");
    }
    fs::write(a.join("late"), b"now").unwrap();
    assert_eq!(read_after_open(&none.mnt.join("cache/late")), b"now");
    errno(
        File::open(long.mnt.join("cache/late")),
        2,
        "a miss cached for 60 s",
    );
    // A directory open on one mount and removed through another: `fstat` on the open
    // descriptor still describes it, with no links, as on a local file system.
    fs::create_dir(a.join("gone")).unwrap();
    let open_dir = File::open(none.mnt.join("cache/gone")).unwrap();
    let before = open_dir.metadata().unwrap();
    fs::remove_dir(a.join("gone")).unwrap();
    let after = open_dir.metadata().unwrap();
    assert!(after.is_dir());
    assert_eq!(
        (after.ino(), after.mode(), after.nlink()),
        (before.ino(), before.mode(), 0)
    );
}

/// Write-behind (`byzfs-fuse/src/gather.rs`): writes held back on A are seen at once by A itself and
/// by B after A's close; an error only the replicas can find is reported by `close`.
fn write_behind(a: &Path, b_dir: &Path) {
    use std::os::unix::fs::FileExt as _;
    use std::os::unix::io::IntoRawFd as _;
    let mut w = File::create(a.join("held")).unwrap();
    w.write_all_at(b"world", 6).unwrap();
    w.write_all_at(b"hello ", 0).unwrap();
    assert_eq!(fs::metadata(a.join("held")).unwrap().len(), 11);
    assert_eq!(read_after_open(&a.join("held")), b"hello world");
    w.write_all_at(b"!", 11).unwrap();
    w.flush().unwrap();
    drop(w);
    assert_eq!(read_after_open(&b_dir.join("held")), b"hello world!");
    // `cp -p`: the data, then its times and mode, held back with it (one WriteSetAttr):
    // seen at once here, and on B after close.
    let t = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    let times = fs::FileTimes::new().set_modified(t).set_accessed(t);
    for (name, stat_before_close) in [("copied", true), ("copied2", false)] {
        let w = File::create(a.join(name)).unwrap();
        w.write_all_at(b"data", 0).unwrap();
        w.set_times(times).unwrap();
        w.set_permissions(fs::Permissions::from_mode(0o640))
            .unwrap();
        if stat_before_close {
            let m = w.metadata().unwrap();
            assert_eq!(
                (m.len(), m.mode() & 0o7777, m.modified().unwrap()),
                (4, 0o640, t)
            );
        }
        drop(w);
        let m = fs::metadata(b_dir.join(name)).unwrap();
        assert_eq!(
            (
                m.len(),
                m.mode() & 0o7777,
                m.modified().unwrap(),
                m.accessed().unwrap()
            ),
            (4, 0o640, t, t),
            "{name} on B"
        );
        assert_eq!(read_after_open(&b_dir.join(name)), b"data");
    }
    // Removed on B while open for writing on A: A's next writes are held back, then fail
    // at the replicas (the file is gone), and A's close says so.
    let w = OpenOptions::new().write(true).open(a.join("held")).unwrap();
    fs::remove_file(b_dir.join("held")).unwrap();
    w.write_all_at(b"lost", 0).unwrap();
    let fd = w.into_raw_fd();
    // SAFETY: `fd` is an open descriptor owned by nothing else (`into_raw_fd`).
    let closed = unsafe { nix::libc::close(fd) };
    let err = std::io::Error::last_os_error();
    assert_eq!(closed, -1, "close must report the failed write");
    assert_eq!(err.raw_os_error(), Some(116), "ESTALE: {err}");
}

/// `renameat2` with `RENAME_NOREPLACE` and `RENAME_EXCHANGE` (what `mv --no-clobber` and
/// `mv --exchange` use).
fn rename_flags(d: &Path) {
    use nix::fcntl::{renameat2, RenameFlags, AT_FDCWD};
    fs::create_dir_all(d.join("dir")).unwrap();
    fs::write(d.join("a"), b"A").unwrap();
    fs::write(d.join("b"), b"B").unwrap();
    fs::write(d.join("dir/inside"), b"I").unwrap();
    let r2 = |x: &str, y: &str, flags| renameat2(AT_FDCWD, &d.join(x), AT_FDCWD, &d.join(y), flags);
    assert_eq!(
        r2("a", "b", RenameFlags::RENAME_NOREPLACE),
        Err(nix::errno::Errno::EEXIST)
    );
    assert_eq!(fs::read(d.join("b")).unwrap(), b"B", "not replaced");
    r2("a", "c", RenameFlags::RENAME_NOREPLACE).unwrap();
    assert_eq!(names(d), vec!["b", "c", "dir"]);
    // A file and a directory trade places; both stay usable under their new names.
    r2("c", "dir", RenameFlags::RENAME_EXCHANGE).unwrap();
    assert_eq!(fs::read(d.join("dir")).unwrap(), b"A");
    assert_eq!(fs::read(d.join("c/inside")).unwrap(), b"I");
    assert!(fs::metadata(d.join("c")).unwrap().is_dir());
    assert_eq!(
        r2("b", "missing", RenameFlags::RENAME_EXCHANGE),
        Err(nix::errno::Errno::ENOENT)
    );
    assert_eq!(
        r2(
            "b",
            "c",
            RenameFlags::RENAME_NOREPLACE | RenameFlags::RENAME_EXCHANGE
        ),
        Err(nix::errno::Errno::EINVAL)
    );
}

/// A generated tree of ~500 files of random sizes, copied in with `cp -a` (or by hand) and
/// read back byte-identical.
fn tree_copy(dst: &Path) {
    let src = tempfile::tempdir().unwrap();
    let mut rng = Rng(42);
    let mut expected = Vec::new();
    for i in 0..500 {
        let depth = rng.next() % 4;
        let mut rel = PathBuf::new();
        for _ in 0..depth {
            rel.push(format!("d{}", rng.next() % 6));
        }
        rel.push(format!("file-{i}"));
        let size = match rng.next() % 10 {
            0 => 0,
            1..=6 => (rng.next() % 4096) as usize,
            7 | 8 => (rng.next() % 65_536) as usize,
            _ => (rng.next() % 300_000) as usize,
        };
        let p = src.path().join(&rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, rng.bytes(size)).unwrap();
        expected.push(rel);
    }
    std::os::unix::fs::symlink("file-0", src.path().join("link")).unwrap();
    run_ok(
        Command::new("cp").arg("-a").arg(src.path()).arg(dst),
        "cp -a into the mount",
    );
    let mut bytes = 0;
    for rel in &expected {
        let (want, got) = (
            fs::read(src.path().join(rel)).unwrap(),
            fs::read(dst.join(rel)).unwrap(),
        );
        assert!(want == got, "{} differs after the copy", rel.display());
        bytes += got.len();
        let (ms, md) = (
            fs::metadata(src.path().join(rel)).unwrap(),
            fs::metadata(dst.join(rel)).unwrap(),
        );
        assert_eq!(ms.mode(), md.mode(), "{}", rel.display());
        assert_eq!(
            ms.mtime(),
            md.mtime(),
            "{}: cp -a keeps mtime",
            rel.display()
        );
    }
    assert_eq!(
        fs::read_link(dst.join("link")).unwrap(),
        Path::new("file-0")
    );
    eprintln!("tree: {} files, {bytes} bytes identical", expected.len());
    // And the whole tree compared by diff, if present.
    if have("diff") {
        let out = Command::new("diff")
            .arg("-r")
            .arg("--no-dereference")
            .arg(src.path())
            .arg(dst)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "diff -r: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    run_ok(Command::new("rm").arg("-rf").arg(dst), "rm -rf the tree");
    errno(fs::metadata(dst), 2, "rm -rf removed the tree");
}

/// `git init`, `add`, `commit` on the mount (skipped without git).
fn git(d: &Path) {
    if !have("git") {
        eprintln!("git section skipped: git is not installed");
        return;
    }
    fs::create_dir_all(d.join("src")).unwrap();
    for i in 0..20 {
        fs::write(
            d.join(format!("src/f{i}.txt")),
            format!("file {i}\n").repeat(50),
        )
        .unwrap();
    }
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(["-c", "init.defaultBranch=main", "-c", "safe.directory=*"])
            .args(args)
            .current_dir(d)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "first"]);
    fs::write(d.join("src/f0.txt"), "changed\n").unwrap();
    git(&["commit", "-q", "-am", "second"]);
    assert_eq!(git(&["status", "--porcelain"]), "");
    assert_eq!(git(&["log", "--oneline"]).lines().count(), 2);
    git(&["fsck", "--strict"]);
}
