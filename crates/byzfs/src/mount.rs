//! `byzfs mount`: parses the flags and mounts with [`byzfs_fuse::mount`] until a signal or
//! an unmount from outside.

use byzfs_fuse::{check_fuse, check_mountpoint, mount, MountOptions, DEFAULT_CACHE_TIMEOUT};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct MountArgs {
    /// The cluster file.
    #[arg(long)]
    config: PathBuf,
    /// The client credential (default: client-1.key beside the config).
    #[arg(long)]
    key: Option<PathBuf>,
    /// Give up on an operation after this long and return EIO to the caller (a "soft" mount).
    /// Default 0: a "hard" mount, like NFS's default — an operation waits, retrying, until
    /// the cluster answers (a warning is logged every 10 s), so a program never sees an
    /// error because replicas were down for a while.
    #[arg(long, default_value_t = 0)]
    timeout_ms: u64,
    #[command(flatten)]
    access: AccessArgs,
    /// Talk to one `byzfs unreplicated --service fs` server at replica 0's address instead of
    /// the replicated cluster (the NO-REP baseline of the benchmarks).
    #[arg(long)]
    unreplicated: bool,
    /// Order every operation, reads included (the seeds' BFS-strict): no read-only
    /// optimisation. Default: getattr, lookup, access, readlink, read, readdir and statfs
    /// take the read-only path (answered by 2f+1 matching replicas without ordering).
    #[arg(long)]
    strict: bool,
    /// Send every write to the cluster before acknowledging it. Default: a file's
    /// consecutive writes are acknowledged at once and sent together before any other
    /// operation, at close and fsync, and within 1 s (NFS's write-behind); an error only
    /// the replicas can find (ENOSPC) is then reported by close or fsync.
    #[arg(long)]
    sync_writes: bool,
    /// FUSE threads: with more than one, the operations of several processes (stat, lookup,
    /// read, readdir; and setattr, create, mkdir, unlink, rename, fsync outside the
    /// directories the mount holds) are at the replicas together, in the order sent; locks,
    /// delegations and write-back still go one at a time.
    #[arg(long, default_value_t = byzfs_fuse::DEFAULT_THREADS as u16, value_parser = clap::value_parser!(u16).range(1..=64))]
    threads: u16,
    #[command(flatten)]
    cache: CacheArgs,
    #[command(flatten)]
    encrypt: EncryptArgs,
    /// Where to mount.
    mountpoint: PathBuf,
}

/// An encrypted mount (issue #28): `byzfs mount --identity FILE [--group G]`.
#[derive(Args, Debug, Clone)]
pub struct EncryptArgs {
    /// Mount a group's encrypted tree as this identity (`byzfs identity new`): names,
    /// contents, link targets and extended attributes are sealed before they leave this
    /// machine, and only the group's writers can change anything in it.
    #[arg(long, value_name = "FILE")]
    identity: Option<PathBuf>,
    /// With --identity: the group, by its name or by its 32-hex-digit id (default:
    /// `default`). A name is your own group's, or --owner's.
    #[arg(long, requires = "identity")]
    group: Option<String>,
    /// With --identity: the owner the group must have, by its `owner_key` (`byzfs identity
    /// show` on the owner's side; 64 hex digits). Needed for a group you do not own; the
    /// mount refuses a group record this owner did not sign (default: your identity).
    #[arg(long, requires = "identity", value_name = "KEY")]
    owner: Option<String>,
    /// Mount the plain tree even though --identity is given.
    #[arg(long)]
    plaintext: bool,
}

impl EncryptArgs {
    /// What to mount encrypted, if anything.
    pub fn encryption(&self) -> anyhow::Result<Option<byzfs_fuse::crypt::Encryption>> {
        let Some(path) = &self.identity else {
            return Ok(None);
        };
        if self.plaintext {
            return Ok(None);
        }
        let identity = crate::identity::load(path)?;
        let (group, owner) = crate::group::expected(
            self.group.as_deref().unwrap_or("default"),
            self.owner.as_deref(),
            &identity,
        )?;
        Ok(Some(byzfs_fuse::crypt::Encryption {
            identity,
            group,
            owner,
        }))
    }
}

pub fn run(a: MountArgs) -> anyhow::Result<ExitCode> {
    crate::logging::init("warn");
    check_fuse()?;
    check_mountpoint(&a.mountpoint, false)?;
    let opts = MountOptions {
        timeout: (a.timeout_ms > 0).then(|| Duration::from_millis(a.timeout_ms)),
        allow_other: a.access.allow_other(),
        unreplicated: a.unreplicated,
        strict: a.strict,
        sync_writes: a.sync_writes,
        cache_timeout: a.cache.timeout(),
        delegate_dirs: !a.cache.no_dir_delegations,
        delegate_files: !a.cache.no_file_delegations,
        encryption: a.encrypt.encryption()?,
        threads: usize::from(a.threads),
    };
    let mounted = mount(&a.config, a.key.as_deref(), &a.mountpoint, &opts)?;
    eprintln!(
        "byzfs mounted on {} (Ctrl-C or `fusermount3 -u {}` to unmount)",
        a.mountpoint.display(),
        a.mountpoint.display()
    );
    // Wait for a signal, or for the session to end (unmounted from outside).
    byzfs_net::signals::runtime()?.block_on(async {
        tokio::select! {
            why = byzfs_net::signals::shutdown(false) => tracing::info!(why, "unmounting"),
            () = mounted.ended() => {}
        }
    });
    mounted.unmount()?;
    Ok(ExitCode::SUCCESS)
}

/// Who may use the mount, shared by `byzfs mount` and `byzfs up --mount`: run as root,
/// every local user (as the kernel NFS client lets them), with permissions checked by the
/// kernel as on a local file system; otherwise only the user who mounted (FUSE's default).
#[derive(Args, Debug, Clone)]
pub struct AccessArgs {
    /// Let every local user use the mount, permissions checked as on a local file system.
    /// The default when run as root; others need `user_allow_other` in /etc/fuse.conf.
    #[arg(long, conflicts_with = "private")]
    allow_other: bool,
    /// Only the user who mounted may use the mount (the default when not run as root).
    #[arg(long)]
    private: bool,
}

impl AccessArgs {
    /// Whether every local user may use the mount.
    pub fn allow_other(&self) -> bool {
        self.allow_other || (!self.private && effective_uid() == Some(0))
    }

    /// Whether either flag was given (`byzfs up` accepts them only with `--mount`).
    pub fn given(&self) -> bool {
        self.allow_other || self.private
    }
}

/// This process's effective uid: the owner of `/proc/self`.
fn effective_uid() -> Option<u32> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// `--cache-timeout` and `--no-dir-delegations`, shared by `byzfs mount` and `byzfs up
/// --mount`.
#[derive(Args, Debug, Clone)]
pub struct CacheArgs {
    /// Seconds the kernel may cache attributes and names, missing names too (NFS's
    /// `acregmin` and `lookupcache=all`): `stat` or `ls` may show another client's change,
    /// or a name it created, this late. `open` always fetches fresh attributes
    /// (close-to-open). 0 turns these caches off.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_CACHE_TIMEOUT.as_secs_f64(),
          value_parser = parse_cache_timeout)]
    pub cache_timeout: f64,
    /// Do not hold directory delegations: every creation and removal waits for the
    /// cluster. Default: a directory only this mount uses is delegated to it, and
    /// creations and removals in it are answered at once and sent together, made durable
    /// by `close`, `fsync` and `fsyncdir` (README "Mounting").
    #[arg(long)]
    pub no_dir_delegations: bool,
    /// Do not hold file delegations: every `open` asks the cluster and every `close` sends
    /// the file's writes. Default: a file opened for writing that no other mount uses is
    /// delegated to it, and its `open` and `close` are answered at once, its writes sent
    /// within a second, at `fsync`, or when another mount opens it (README "Mounting").
    #[arg(long)]
    pub no_file_delegations: bool,
}

impl CacheArgs {
    /// The timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.cache_timeout)
    }
}

/// Longest `--cache-timeout` accepted.
const MAX_CACHE_TIMEOUT_S: f64 = 3600.0;

fn parse_cache_timeout(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds (e.g. 3 or 0.5)"))?;
    if v.is_finite() && (0.0..=MAX_CACHE_TIMEOUT_S).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "the cache timeout must be between 0 and {MAX_CACHE_TIMEOUT_S} seconds"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_timeouts_are_seconds_within_bounds() {
        assert_eq!(parse_cache_timeout("3"), Ok(3.0));
        assert_eq!(parse_cache_timeout("0.25"), Ok(0.25));
        assert_eq!(parse_cache_timeout("0"), Ok(0.0));
        for bad in ["-1", "3601", "NaN", "inf", "3s", ""] {
            let e = parse_cache_timeout(bad).unwrap_err();
            assert!(e.contains("seconds"), "{bad}: {e}");
        }
    }
}
