//! `df` tells the truth on real processes (`byzfs_fs::capacity`): with two of the four
//! replicas' data directories on small disks (tmpfs, so root only), the replicas' capacity
//! reports lower the mount's `df` below the configured capacity, the cluster answers
//! `ENOSPC` there, and the small disks never fill.

use crate::common;

use common::*;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
/// The small disks.
const SMALL: u64 = 256 * MIB;
const SMALL_REPLICAS: [usize; 2] = [2, 3];

/// tmpfs file systems, unmounted when dropped (after the replicas using them stopped:
/// declare it before the `Procs`).
struct Tmpfs {
    dir: tempfile::TempDir,
    mounted: std::cell::RefCell<Vec<PathBuf>>,
}

impl Tmpfs {
    fn new() -> Tmpfs {
        Tmpfs {
            dir: tempfile::tempdir().unwrap(),
            mounted: Default::default(),
        }
    }

    /// A fresh tmpfs of `bytes`, or `None` if mounting is not allowed here.
    fn mount(&self, name: &str, bytes: u64) -> Option<PathBuf> {
        let at = self.dir.path().join(name);
        std::fs::create_dir(&at).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(&at)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return None;
        }
        self.mounted.borrow_mut().push(at.clone());
        Some(at)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        for at in self.mounted.borrow().iter() {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(at)
                .status();
        }
    }
}

/// `df`'s total and free bytes at `mnt`.
fn df(mnt: &Path) -> (u64, u64) {
    let s = nix::sys::statvfs::statvfs(mnt).unwrap();
    (
        s.blocks() * s.fragment_size(),
        s.blocks_available() * s.fragment_size(),
    )
}

#[test]
fn df_follows_the_replicas_disks_and_enospc_comes_before_they_fill() {
    let _g = serial();
    if skip_without_fuse() {
        return;
    }
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: mounting tmpfs needs root");
        return;
    }
    let tmpfs = Tmpfs::new();
    let mut mounted = true;
    let procs = Procs::prepared("disk", "fs", vec![Vec::new(); 4], &[], |p| {
        for i in SMALL_REPLICAS {
            match tmpfs.mount(&format!("data-{i}"), SMALL) {
                Some(at) => std::os::unix::fs::symlink(at, p.data(i)).unwrap(),
                None => mounted = false,
            }
        }
    });
    if !mounted {
        eprintln!("skipped: mount -t tmpfs is not allowed here");
        return;
    }
    let configured = procs.cluster.fs.capacity_bytes;
    let mnt = procs.dir.path().join("mnt");
    let m = Mount::start(&procs.config(), &mnt, &procs.dir.path().join("mount.log"));

    // The reports arrive within seconds of start; then `df` shows at most what one small
    // disk could hold (less: a replica on a loopback cluster counts its disk as shared
    // by the four), far below the configured capacity.
    let start = Instant::now();
    let (total, _) = loop {
        let (total, free) = df(&mnt);
        if total <= SMALL * 10 / 25 {
            break (total, free);
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "df still shows {total} bytes (configured {configured}); replica 2's log:\n{}",
            tail(&procs.log(2))
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        configured > 4 * SMALL,
        "the configured capacity is the large disk's"
    );
    assert!(total >= 8 * MIB, "df shows {total} bytes");
    // Each small replica's reporter logs once it has read the agreed capacity back, which
    // may come a moment after the agreed value already reached the mount's `df`.
    for i in SMALL_REPLICAS {
        while !procs.log(i).contains("reported this disk's capacity") {
            assert!(
                start.elapsed() < Duration::from_secs(90),
                "replica {i} never logged its report:\n{}",
                tail(&procs.log(i))
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    // Writing until ENOSPC stops about where df said it would.
    let path = m.path("fill");
    let mut f = std::fs::File::create(&path).unwrap();
    let chunk = vec![0x5a_u8; MIB as usize];
    let mut written = 0u64;
    let err = loop {
        let r = f.write_all(&chunk).and_then(|()| f.sync_data());
        match r {
            Ok(()) => written += MIB,
            Err(e) => break e,
        }
        assert!(written <= total, "wrote {written} bytes, df said {total}");
    };
    assert_eq!(err.raw_os_error(), Some(nix::libc::ENOSPC), "{err}");
    assert!(
        written + 4 * MIB >= total,
        "ENOSPC after {written} of {total} bytes"
    );
    drop(f);
    eprintln!("df showed {total} bytes (configured {configured}); ENOSPC after {written}");

    // The small disks kept room to spare, and their replicas still take part.
    for i in SMALL_REPLICAS {
        let free = nix::sys::statvfs::statvfs(&procs.data(i)).unwrap();
        let free = free.blocks_available() * free.fragment_size();
        assert!(free > SMALL / 4, "replica {i}'s disk has {free} bytes left");
    }
    std::fs::remove_file(&path).unwrap();
    let before = procs.status(2).expect("replica 2 answers").last_executed;
    std::fs::write(m.path("after"), b"ok").unwrap();
    procs.wait_until("replica 2 executes after ENOSPC", |s| {
        s[2].last_executed > before
    });
    drop(m);
}
