//! The mount session: checking that FUSE and the mount point are usable, mounting (the
//! cluster connection, the adapter's state, the background thread) and unmounting.

use super::{
    client_key_path, delegations, dirs, groups, locks, reclaim, spawn_background, Arc, AttrCache,
    ByzFuse, ClientCredential, ClusterConfig, Duration, Files, Gather, HashMap, Inner, Known, Link,
    MountOption, Mutex, OnceLock, Path, PathBuf, DEFAULT_CLIENT, MAX_IO, WRITE_OVERHEAD,
};
use crate::cluster::Cluster;
use crate::wire::Wire;
use anyhow::{bail, Context as _};

/// How to mount (the flags `byzfs mount` and `byzfs up --mount` share).
pub struct MountOptions {
    /// Give up on an operation after this long (the caller gets `EIO`); `None`: wait until
    /// the cluster answers (a hard mount).
    pub timeout: Option<Duration>,
    /// Let other users access the mount.
    pub allow_other: bool,
    /// Talk to one unreplicated server (NO-REP) instead of the cluster.
    pub unreplicated: bool,
    /// Order read-only operations too (BFS-strict).
    pub strict: bool,
    /// Send every write at once instead of gathering a file's consecutive writes until
    /// its `close` or `fsync` (`gather.rs`).
    pub sync_writes: bool,
    /// How long attributes and names (missing ones too) are cached
    /// ([`crate::DEFAULT_CACHE_TIMEOUT`]).
    pub cache_timeout: Duration,
    /// Hold directory delegations and answer creations and removals in them early
    /// (`dirs.rs`).
    pub delegate_dirs: bool,
    /// Hold file delegations: `open` and `close` of a file only this mount uses answered
    /// here, its writes written back (`held_files.rs`). Never on an encrypted mount (its
    /// writes are not sent at their own time, so a held file's `open` still asks for its
    /// attributes: measured, no gain) nor with `--sync-writes`.
    pub delegate_files: bool,
    /// Mount a group's encrypted tree with this identity (`crypt.rs`); `None`: the
    /// cluster's plain tree.
    pub encryption: Option<crate::crypt::Encryption>,
    /// FUSE threads ([`crate::DEFAULT_THREADS`]): with more than one, read-only operations
    /// of several processes are at the replicas together (`lib.rs` `call`).
    pub threads: usize,
}

/// A mounted file system, served by a background thread.
pub struct Mounted {
    session: fuser::BackgroundSession,
    mountpoint: PathBuf,
}

impl Mounted {
    /// Completes when the session ends without us (`fusermount3 -u` from outside).
    pub async fn ended(&self) {
        while !self.session.guard.is_finished() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Unmounts and waits for the session thread. If the mount is busy (a process has its
    /// working directory or an open file inside), detaches it lazily instead (`umount -l`):
    /// it disappears from the namespace now and for good once its last user leaves.
    pub fn unmount(self) -> anyhow::Result<()> {
        let mnt = self.mountpoint;
        if self.session.guard.is_finished() {
            // The session ended without us: `fusermount3 -u` from outside ends it cleanly;
            // anything else (a callback's panic, a read error on /dev/fuse) is said here.
            return self
                .session
                .join()
                .with_context(|| format!("the FUSE session of {} failed", mnt.display()));
        }
        match self.session.umount_and_join() {
            Ok(()) => Ok(()),
            Err(e) => {
                let lazy = std::process::Command::new("fusermount3")
                    .arg("-u")
                    .arg("-z")
                    .arg(&mnt)
                    .status();
                match lazy {
                    Ok(s) if s.success() => {
                        eprintln!(
                            "warning: {} was busy ({e}); detached it lazily",
                            mnt.display()
                        );
                        Ok(())
                    }
                    _ => Err(e).with_context(|| format!("cannot unmount {}", mnt.display())),
                }
            }
        }
    }
}

/// Fails with a one-line fix if this machine cannot mount FUSE file systems.
pub fn check_fuse() -> anyhow::Result<()> {
    if !Path::new("/dev/fuse").exists() {
        bail!(
            "FUSE is unavailable: no /dev/fuse (load the module with `modprobe fuse`; in a \
             container, pass --device /dev/fuse --cap-add SYS_ADMIN); install fuse3 \
             (apt-get install fuse3)"
        );
    }
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("fusermount3").exists()));
    if !found {
        bail!("FUSE is unavailable: no fusermount3 on PATH; install fuse3 (apt-get install fuse3)");
    }
    Ok(())
}

/// Checks that `mnt` can be mounted on: an existing directory (created first if `create`)
/// that is not already a mount point. A stale FUSE mount (its process died: "transport
/// endpoint is not connected") is unmounted first.
pub fn check_mountpoint(mnt: &Path, create: bool) -> anyhow::Result<()> {
    match std::fs::metadata(mnt) {
        Err(e) if e.raw_os_error() == Some(nix::libc::ENOTCONN) => {
            eprintln!(
                "{} is a stale FUSE mount (its process died): unmounting it",
                mnt.display()
            );
            let ok = std::process::Command::new("fusermount3")
                .arg("-u")
                .arg("-z")
                .arg(mnt)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                bail!(
                    "{} is a stale FUSE mount and `fusermount3 -u -z {}` failed",
                    mnt.display(),
                    mnt.display()
                );
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
            std::fs::create_dir_all(mnt)
                .with_context(|| format!("cannot create the mount point {}", mnt.display()))?;
        }
        Err(e) => return Err(e).with_context(|| format!("mount point {}", mnt.display())),
        Ok(m) if !m.is_dir() => bail!("mount point {} is not a directory", mnt.display()),
        Ok(_) => {}
    }
    if is_mount_point(mnt) {
        bail!(
            "{} is already mounted (busy); unmount it first (`fusermount3 -u {}` or `umount {}`)",
            mnt.display(),
            mnt.display(),
            mnt.display()
        );
    }
    Ok(())
}

/// Whether `mnt` is a mount point: listed in `/proc/self/mounts` (paths compared after
/// canonicalising), or the root of a FUSE file system on another device than its parent —
/// which holds however the path is spelled (a FUSE mount missed here would be mounted over).
fn is_mount_point(mnt: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(abs) = std::fs::canonicalize(mnt) else {
        return false;
    };
    let dev = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
    let fuse = nix::sys::statfs::statfs(&abs)
        .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::FUSE_SUPER_MAGIC);
    if fuse && dev(&abs) != abs.parent().and_then(dev) {
        return true;
    }
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        // Spaces in mount points are escaped as \040 in this file.
        .filter_map(|l| l.split_whitespace().nth(1))
        .any(|m| Path::new(&m.replace("\\040", " ")) == abs)
}

/// Connects to the cluster of `config` with the credential `key` (default: client-1.key
/// beside the config) and mounts its file service on `mountpoint`. Must not be called from
/// inside a tokio runtime (the adapter blocks on its own).
pub fn mount(
    config: &Path,
    key: Option<&Path>,
    mountpoint: &Path,
    opts: &MountOptions,
) -> anyhow::Result<Mounted> {
    let cluster = ClusterConfig::load(config)?;
    let key = key.map(Path::to_path_buf).unwrap_or_else(|| {
        client_key_path(
            config.parent().unwrap_or_else(|| ".".as_ref()),
            DEFAULT_CLIENT,
        )
    });
    let cred = ClientCredential::load(&key, &cluster)?;
    // The client, driven by whichever thread waits for it (`wire.rs`); between operations
    // the background thread drives it every tick (`spawn_background`), so the links
    // notice a replica's restart and reconnect (the fault test's restarted replica must
    // see this client again).
    let wire = std::sync::Arc::new(Wire::connect(&cluster, &cred, opts.unreplicated)?);
    let client_id = wire.id();
    let grant = wire.grant().clone();
    let crypt = match &opts.encryption {
        Some(enc) => Some(Box::new(crate::crypt_tree::start(
            &wire,
            enc,
            &cluster.cluster_id,
            client_id,
            &crate::own_credentials(),
        )?)),
        None => None,
    };
    let notifier = Arc::new(OnceLock::new());
    let mut write_chunk = cluster
        .bft
        .op_bytes_max
        .saturating_sub(WRITE_OVERHEAD)
        .clamp(4096, MAX_IO as usize);
    if crypt.is_some() {
        // Sealed, a write carries a 76-byte entry beside each block, the blocks it changes
        // only in part (read and sealed whole: two more at most), and, for a truncation,
        // the entries it clears after the new end (a chunk's at most).
        use byzfs_crypt::layout::{CHUNK_BLOCKS, ENTRY};
        let room = write_chunk.saturating_sub(CHUNK_BLOCKS as usize * ENTRY);
        write_chunk = (room / (4096 + ENTRY)).saturating_sub(2).max(1) * 4096;
    }
    let (nudge_tx, nudge_rx) = std::sync::mpsc::channel();
    let sealed = crypt.is_some();
    let fs = ByzFuse {
        write_chunk,
        ttl: opts.cache_timeout,
        inner: Arc::new(Mutex::new(Inner {
            link: Link {
                cluster: Cluster::new(wire, opts.timeout, opts.strict, opts.threads > 1),
                gather: match (sealed, opts.sync_writes) {
                    (false, false) => Gather::new(write_chunk),
                    (true, false) => Gather::new(write_chunk).sealed(),
                    (false, true) => Gather::new(write_chunk).sending_each(),
                    (true, true) => Gather::new(write_chunk).sealed().sending_each(),
                },
                attrs: AttrCache::default(),
                stamps: Default::default(),
                reclaim: reclaim::Reclaimer::new(Some(nudge_tx.clone())),
                dirs: dirs::Dirs::new(opts.delegate_dirs, Some(nudge_tx.clone())),
                files: crate::held_files::HeldFiles::new(
                    opts.delegate_files && crypt.is_none() && !opts.sync_writes,
                ),
                inflight: Default::default(),
                handles: Default::default(),
                crypt,
                lease: Default::default(),
            },
            files: Files {
                known: HashMap::from([(
                    byzfs_fs::proto::handle::ROOT_INO,
                    Known {
                        generation: byzfs_fs::proto::handle::ROOT_GENERATION,
                        lookups: 1,
                    },
                )]),
                open: crate::open_files::OpenFiles::default(),
                open_dirs: HashMap::new(),
                listings: Default::default(),
                silly: HashMap::new(),
                tmp_next: 0,
                orphans: None,
            },
            locking: locks::Locking::new(delegations::Delegations::new(client_id, Some(nudge_tx))),
        })),
        notifier: Arc::clone(&notifier),
        groups: groups::GroupCache::default(),
        client_id,
        grant,
        released: std::sync::Condvar::new(),
        waits_for_release: opts.threads > 1,
    };
    spawn_background(Arc::downgrade(&fs.inner), nudge_rx);
    let mut config = fuser::Config::default();
    config.n_threads = Some(opts.threads.max(1));
    // Each thread its own descriptor (`FUSE_DEV_IOC_CLONE`, Linux 4.5+): no contention on
    // one file's reads.
    config.clone_fd = opts.threads > 1;
    config.mount_options = vec![
        MountOption::FSName("byzfs".into()),
        MountOption::Subtype("byzfs".into()),
        MountOption::DefaultPermissions,
    ];
    if opts.allow_other {
        config.acl = fuser::SessionACL::All;
    }
    let session = fuser::spawn_mount(fs, mountpoint, &config)
        .with_context(|| format!("cannot mount on {}", mountpoint.display()))?;
    let _ = notifier.set(session.notifier());
    Ok(Mounted {
        session,
        mountpoint: mountpoint.to_path_buf(),
    })
}
