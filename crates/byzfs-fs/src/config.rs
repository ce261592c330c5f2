//! The file service's configuration ([`FsConfig`]): identical at every replica, since it
//! decides results (capacity, partitions, the root's owner, who may report disks and state
//! which credentials).

use crate::policy::ClientPolicy;
use core::time::Duration;

/// Configuration of the file service. Must be identical at every replica (it decides
/// results: capacity, partitions, the root's owner).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsConfig {
    /// Number of state partitions (default 4096).
    pub partitions: u32,
    /// Replicated capacity in bytes of data and symlink targets (`ENOSPC` beyond; `statfs`).
    pub capacity_bytes: u64,
    /// Most inodes (`ENOSPC` beyond).
    pub max_inodes: u64,
    /// Who may report their disk's capacity; with reports, capacity and inodes are what
    /// the replicas' disks hold, never above the two limits above ([`crate::capacity`]). `None`:
    /// the limits as configured.
    pub reporters: Option<Reporters>,
    /// How far ahead of its own clock a backup accepts a proposed timestamp (leases expire
    /// by the agreed clock: ahead would end them early).
    pub clock_tolerance: Duration,
    /// How far behind its own clock a backup accepts a proposed timestamp: more than
    /// `clock_tolerance`, since a PRE-PREPARE can leave seconds after its timestamp was
    /// taken (its primary's stable-checkpoint sync), and a clock held back only ends
    /// leases late (default 10 s; `byzfs_bft::services::timestamp::check_window`).
    pub clock_lag_tolerance: Duration,
    /// Owner of the root directory.
    pub root_uid: u32,
    /// Group of the root directory.
    pub root_gid: u32,
    /// Mode of the root directory.
    pub root_mode: u32,
    /// The cluster's id (`cluster.toml`'s `cluster_id`): group records' and writer
    /// proofs' signatures name it ([`crate::crypt_group`], [`crate::crypt_write`]), so none made for
    /// another cluster is accepted here.
    pub cluster_id: [u8; 16],
    /// How long a client's record locks outlive its last lock operation or lease renewal,
    /// in agreed time ([`crate::lock`]; default 30 s).
    pub lock_lease: Duration,
    /// Which credentials each client may state ([`crate::policy`]). Default
    /// [`ClientPolicy::Closed`] (every request refused): a replica or server names
    /// [`ClientPolicy::Certified`], a test its [`ClientPolicy::Trusted`] ([`FsConfig::trusted`]).
    pub client_policy: ClientPolicy,
}

impl FsConfig {
    /// The default configuration, taking every client's credentials as sent
    /// ([`ClientPolicy::Trusted`]): for tests and simulations that build a service in
    /// memory, never for one that serves clients over a network.
    pub fn trusted() -> FsConfig {
        FsConfig {
            client_policy: ClientPolicy::Trusted,
            ..FsConfig::default()
        }
    }
}

impl Default for FsConfig {
    fn default() -> Self {
        FsConfig {
            partitions: 4096,
            capacity_bytes: 1 << 40,
            max_inodes: 1 << 32,
            reporters: None,
            clock_tolerance: Duration::from_secs(1),
            clock_lag_tolerance: Duration::from_secs(10),
            root_uid: 0,
            root_gid: 0,
            cluster_id: [0; 16],
            root_mode: 0o755,
            lock_lease: Duration::from_secs(30),
            client_policy: ClientPolicy::Closed,
        }
    }
}

/// Which protocol clients may report for which replica: replica `r`'s reports come from
/// sessions of certificate id `first + r` (the session number in the low `session_bits`
/// bits; `byzfs_net::cert::REPLICA_CLIENT_FIRST`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reporters {
    /// Certificate id of replica 0's client.
    pub first: u64,
    /// Bits of a protocol client id below the certificate id.
    pub session_bits: u32,
    /// Number of replicas, `3f+1`.
    pub replicas: u32,
}

impl Reporters {
    /// The replica that protocol client `client` reports for, if any.
    ///
    /// ```
    /// use byzfs_fs::config::Reporters;
    /// let r = Reporters { first: 100, session_bits: 40, replicas: 4 };
    /// assert_eq!(r.replica_of(102 << 40 | 7), Some(2));
    /// assert_eq!(r.replica_of(104 << 40), None);
    /// assert_eq!(r.replica_of(99 << 40), None);
    /// ```
    pub fn replica_of(&self, client: u64) -> Option<u32> {
        let cert = client.checked_shr(self.session_bits).unwrap_or(0);
        let r = cert.checked_sub(self.first)?;
        u32::try_from(r).ok().filter(|&r| r < self.replicas)
    }

    /// Faults tolerated.
    pub(crate) fn f(&self) -> usize {
        (self.replicas.saturating_sub(1) / 3) as usize
    }
}
