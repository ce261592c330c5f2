//! The cluster file (`cluster.toml`): shared by every node, holds no secrets (docs/DEPLOY.md:
//! it goes to every replica and client, each node's secrets to its own key file). It names
//! the cluster, lists the replicas (id, address, public keys), carries the admin public key
//! that signs client certificates, and the protocol parameters of [`byzfs_bft::Config`] in
//! human units.
//!
//! [`ClusterConfig::load`] refuses anything inconsistent with a one-line [`SetupError`]:
//! `n ≠ 3f+1`, duplicate or missing ids, duplicate addresses, invalid public keys, or
//! parameters that fail [`Config::validate`].

use crate::error::{toml_error, SetupError};
use crate::hex::Hex;
use byzfs_bft::{Config, ReplicaId};
use core::time::Duration;
use ed25519_dalek::VerifyingKey;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Default file name of the cluster file.
pub const CLUSTER_FILE: &str = "cluster.toml";

/// Protocol parameters as written in the cluster file (`[protocol]`); every field is optional
/// and defaults to [`Config::new`]'s value.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)] // One field per `Config` field; see `byzfs_bft::Config` for meanings.
pub struct ProtocolParams {
    pub checkpoint_interval: u64,
    pub log_window: u64,
    pub batch_window: u64,
    pub batch_bytes_max: usize,
    pub big_request_threshold: usize,
    pub relay_big_requests: bool,
    pub relay_fan_out: u32,
    pub full_reply_threshold: usize,
    pub tentative_execution: bool,
    pub read_only_optimisation: bool,
    pub read_only_to_quorum: bool,
    pub view_change_timeout_ms: u64,
    pub view_change_timeout_max_ms: u64,
    pub unreachable_primary_timeout_ms: u64,
    pub idle_checkpoint_ms: u64,
    pub status_interval_ms: u64,
    pub link_rate_kbps: u64,
    pub client_window: u64,
    pub client_retransmit_ms: u64,
    pub client_retransmit_max_ms: u64,
    pub message_bytes_max: usize,
    pub op_bytes_max: usize,
    pub state_chunk_bytes: usize,
    pub monitor_enabled: bool,
    pub monitor_period_ms: u64,
    pub monitor_grace_ms: u64,
    pub monitor_patience_ms: u64,
    pub monitor_percent: u32,
    pub monitor_raise_percent: u32,
    pub monitor_views: u32,
    pub monitor_floor_per_s: u64,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Default for ProtocolParams {
    fn default() -> Self {
        ProtocolParams::from_config(&Config::new(1))
    }
}

impl ProtocolParams {
    /// The parameters of `c` (its `f` and `epoch` live elsewhere in the file).
    pub fn from_config(c: &Config) -> Self {
        ProtocolParams {
            checkpoint_interval: c.checkpoint_interval,
            log_window: c.log_window,
            batch_window: c.batch_window,
            batch_bytes_max: c.batch_bytes_max,
            big_request_threshold: c.big_request_threshold,
            relay_big_requests: c.relay_big_requests,
            relay_fan_out: c.relay_fan_out,
            full_reply_threshold: c.full_reply_threshold,
            tentative_execution: c.tentative_execution,
            read_only_optimisation: c.read_only_optimisation,
            read_only_to_quorum: c.read_only_to_quorum,
            view_change_timeout_ms: millis(c.view_change_timeout),
            view_change_timeout_max_ms: millis(c.view_change_timeout_max),
            unreachable_primary_timeout_ms: millis(c.unreachable_primary_timeout),
            idle_checkpoint_ms: millis(c.idle_checkpoint),
            status_interval_ms: millis(c.status_interval),
            link_rate_kbps: c.link_rate_kbps,
            client_window: c.client_window,
            client_retransmit_ms: millis(c.client_retransmit),
            client_retransmit_max_ms: millis(c.client_retransmit_max),
            message_bytes_max: c.message_bytes_max,
            op_bytes_max: c.op_bytes_max,
            state_chunk_bytes: c.state_chunk_bytes,
            monitor_enabled: c.monitor.enabled,
            monitor_period_ms: millis(c.monitor.period),
            monitor_grace_ms: millis(c.monitor.grace),
            monitor_patience_ms: millis(c.monitor.patience),
            monitor_percent: c.monitor.percent,
            monitor_raise_percent: c.monitor.raise_percent,
            monitor_views: c.monitor.views,
            monitor_floor_per_s: c.monitor.floor_per_s,
        }
    }

    /// Sets one parameter from `key=value`, as it would be written under `[protocol]` in
    /// the cluster file (the value is a TOML literal: `5000`, `false`).
    ///
    /// ```
    /// use byzfs_net::cluster::ProtocolParams;
    /// let mut p = ProtocolParams::default();
    /// p.set("monitor_period_ms=10000").unwrap();
    /// assert_eq!(p.monitor_period_ms, 10_000);
    /// assert!(p.set("monitor_period=1").unwrap_err().contains("unknown field"));
    /// ```
    pub fn set(&mut self, assignment: &str) -> Result<(), String> {
        let (key, value) = assignment.split_once('=').ok_or_else(|| {
            format!("`{assignment}`: expected KEY=VALUE, e.g. monitor_period_ms=5000")
        })?;
        let (key, value) = (key.trim(), value.trim());
        let value: toml::Value = toml::from_str::<toml::Table>(&format!("v = {value}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .ok_or_else(|| format!("`{assignment}`: `{value}` is not a TOML value"))?;
        let mut table = toml::Table::try_from(&*self).map_err(|e| e.to_string())?;
        table.insert(key.to_string(), value);
        *self = table
            .try_into()
            .map_err(|e: toml::de::Error| format!("`{assignment}`: {}", e.message()))?;
        Ok(())
    }

    /// The core's configuration.
    pub fn to_config(&self, f: u32, epoch: u32) -> Config {
        Config {
            f,
            epoch,
            checkpoint_interval: self.checkpoint_interval,
            log_window: self.log_window,
            batch_window: self.batch_window,
            batch_bytes_max: self.batch_bytes_max,
            big_request_threshold: self.big_request_threshold,
            relay_big_requests: self.relay_big_requests,
            relay_fan_out: self.relay_fan_out,
            full_reply_threshold: self.full_reply_threshold,
            tentative_execution: self.tentative_execution,
            read_only_optimisation: self.read_only_optimisation,
            read_only_to_quorum: self.read_only_to_quorum,
            view_change_timeout: Duration::from_millis(self.view_change_timeout_ms),
            view_change_timeout_max: Duration::from_millis(self.view_change_timeout_max_ms),
            unreachable_primary_timeout: Duration::from_millis(self.unreachable_primary_timeout_ms),
            idle_checkpoint: Duration::from_millis(self.idle_checkpoint_ms),
            status_interval: Duration::from_millis(self.status_interval_ms),
            link_rate_kbps: self.link_rate_kbps,
            client_window: self.client_window,
            client_retransmit: Duration::from_millis(self.client_retransmit_ms),
            client_retransmit_max: Duration::from_millis(self.client_retransmit_max_ms),
            message_bytes_max: self.message_bytes_max,
            op_bytes_max: self.op_bytes_max,
            state_chunk_bytes: self.state_chunk_bytes,
            monitor: byzfs_bft::MonitorConfig {
                enabled: self.monitor_enabled,
                period: Duration::from_millis(self.monitor_period_ms),
                grace: Duration::from_millis(self.monitor_grace_ms),
                patience: Duration::from_millis(self.monitor_patience_ms),
                percent: self.monitor_percent,
                raise_percent: self.monitor_raise_percent,
                views: self.monitor_views,
                floor_per_s: self.monitor_floor_per_s,
            },
            // The walk is the fast mode's (issue #49), not an operator's choice yet.
            view_change_rule: byzfs_bft::ViewChangeRule::Pbft,
        }
    }
}

/// One `[[replica]]` entry as written in the file.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ReplicaEntry {
    /// Replica id, `0..n`.
    pub id: ReplicaId,
    /// `host:port` the replica listens on and peers dial.
    pub address: String,
    /// Absolute path of a Unix-domain socket the replica also listens on. Peers and clients
    /// on the same host connect there first and fall back to `address` (see
    /// [`crate::stream`]); on other hosts the path does not exist and they use `address`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_socket: Option<String>,
    /// X25519 public key (key agreement for MAC keys).
    pub x25519_public_key: Hex<32>,
    /// Ed25519 public key (VIEW-CHANGE and NEW-VIEW signatures).
    pub ed25519_public_key: Hex<32>,
}

/// `[fs]`: the file service's replicated limits — the most `df` on a mount shows, and
/// where `ENOSPC` begins at the latest — and how far behind its clock a replica takes the
/// agreed time. Part of the cluster file because every replica must use the same ones
/// (they decide results). `byzfs keygen` and `byzfs up` derive the limits from the free
/// disk ([`FsLimits::fitting`]); the replicas' reports of their disks lower them at run
/// time (`byzfs_fs::capacity`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FsLimits {
    /// Bytes of file data, symlink targets and extended attributes.
    pub capacity_bytes: u64,
    /// Inodes: files, directories, links of other kinds.
    pub max_inodes: u64,
    /// How far behind its own clock a replica accepts the time a primary proposed, in
    /// milliseconds ([`CLOCK_LAG_TOLERANCE_MS`] unless set; `byzfs_fs::FsConfig::
    /// clock_lag_tolerance`): a PRE-PREPARE leaves after the bodies queued before it, and
    /// on a slow link between sites that can be longer than 10 s (a 592 KB body crosses
    /// 1 Mb/s in 5 s, and the primary sends it twice). A higher value lets a faulty
    /// primary hold the agreed clock back that much longer (leases then end late, never
    /// early). Between 1,000 and 600,000.
    #[serde(
        default = "clock_lag_tolerance_ms_default",
        skip_serializing_if = "is_default_clock_lag"
    )]
    pub clock_lag_tolerance_ms: u64,
}

/// The default of `[fs] clock_lag_tolerance_ms`: 10 s.
pub const CLOCK_LAG_TOLERANCE_MS: u64 = 10_000;

fn clock_lag_tolerance_ms_default() -> u64 {
    CLOCK_LAG_TOLERANCE_MS
}

fn is_default_clock_lag(ms: &u64) -> bool {
    *ms == CLOCK_LAG_TOLERANCE_MS
}

impl Default for FsLimits {
    /// What files written before the section existed mean: 1 TiB, 2³² inodes.
    fn default() -> Self {
        FsLimits {
            capacity_bytes: 1 << 40,
            max_inodes: 1 << 32,
            clock_lag_tolerance_ms: CLOCK_LAG_TOLERANCE_MS,
        }
    }
}

/// Disk bytes a replica needs per byte of capacity, in tenths: a write is stored once in
/// the live table and its undo records until the next stable checkpoint (measured: 1.8
/// bytes written per byte and replica in `bench largefile` at 1 GiB, docs/BENCHMARKS.md
/// "Large files and space"), and the file grows before compaction gives space back.
pub const DISK_TENTHS_PER_BYTE: u64 = 25;

impl FsLimits {
    /// Limits that `replicas` replicas sharing `free_bytes` of disk can hold: capacity
    /// `free / replicas / 2.5`, one inode per 512 bytes of it (at least 65,536, at most 2³²).
    ///
    /// ```
    /// use byzfs_net::cluster::FsLimits;
    /// let l = FsLimits::fitting(100 << 30, 4);
    /// assert_eq!(l.capacity_bytes, 10 << 30);
    /// assert_eq!(l.max_inodes, 20_971_520);
    /// ```
    pub fn fitting(free_bytes: u64, replicas: u64) -> FsLimits {
        let capacity = FsLimits::capacity_of_disk(free_bytes / replicas.max(1));
        FsLimits {
            capacity_bytes: capacity,
            max_inodes: (capacity / 512).clamp(1 << 16, 1 << 32),
            clock_lag_tolerance_ms: CLOCK_LAG_TOLERANCE_MS,
        }
    }

    /// The capacity `disk_bytes` of one replica's disk can hold (`disk / 2.5`).
    pub fn capacity_of_disk(disk_bytes: u64) -> u64 {
        disk_bytes / DISK_TENTHS_PER_BYTE * 10
    }

    /// Disk a replica needs to hold this capacity.
    pub fn disk_needed(&self) -> u64 {
        self.capacity_bytes.saturating_mul(DISK_TENTHS_PER_BYTE) / 10
    }
}

/// The file as written.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    /// Random cluster identifier; salts every key derivation and binds client certificates.
    pub cluster_id: Hex<16>,
    /// Configuration epoch (carried in every message header).
    pub epoch: u32,
    /// Faults tolerated; the file must list `3f+1` replicas.
    pub f: u32,
    /// Ed25519 public key of the admin who signs client certificates.
    pub admin_public_key: Hex<32>,
    /// Protocol parameters.
    #[serde(default)]
    pub protocol: ProtocolParams,
    /// The file service's limits.
    #[serde(default)]
    pub fs: FsLimits,
    /// The replicas.
    #[serde(rename = "replica", default)]
    pub replicas: Vec<ReplicaEntry>,
}

/// One replica of a validated configuration.
#[derive(Clone, Debug)]
pub struct ReplicaInfo {
    /// Replica id (its index in [`ClusterConfig::replicas`]).
    pub id: ReplicaId,
    /// `host:port`.
    pub address: String,
    /// The Unix-domain socket it also listens on, if any (absolute).
    pub local_socket: Option<PathBuf>,
    /// X25519 public key.
    pub x25519_public: x25519_dalek::PublicKey,
    /// Ed25519 public key.
    pub ed25519_public: VerifyingKey,
}

/// A validated cluster configuration.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// Where it was read from (named in error messages).
    pub path: PathBuf,
    /// Cluster identifier.
    pub cluster_id: [u8; 16],
    /// Admin public key (client certificates).
    pub admin_public: VerifyingKey,
    /// The core's configuration (`f`, epoch, protocol parameters).
    pub bft: Config,
    /// The file service's limits (`[fs]`).
    pub fs: FsLimits,
    /// Replicas, indexed by id.
    pub replicas: Vec<ReplicaInfo>,
}

/// Whether `a` looks like `host:port`.
fn valid_address(a: &str) -> bool {
    match a.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p != 0),
        None => false,
    }
}

/// Longest Unix socket path Linux accepts (`sun_path` holds 108 bytes with the final NUL).
pub const LOCAL_SOCKET_PATH_MAX: usize = 107;

/// Why `path` cannot name a replica's Unix socket, if it cannot.
fn check_local_socket(path: &str) -> Result<(), &'static str> {
    if !Path::new(path).is_absolute() {
        return Err("must be an absolute path");
    }
    if path.len() > LOCAL_SOCKET_PATH_MAX {
        return Err(
            "is longer than the 107 bytes a Unix socket path may have; choose a shorter path",
        );
    }
    if path.contains('\0') {
        return Err("contains a NUL byte");
    }
    Ok(())
}

impl ClusterConfig {
    /// Reads and validates a cluster file.
    pub fn load(path: &Path) -> Result<ClusterConfig, SetupError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(SetupError::Missing {
                    path: path.to_path_buf(),
                    hint: "create one with: byzfs keygen --replicas 4 --out DIR".into(),
                })
            }
            Err(source) => {
                return Err(SetupError::Io {
                    path: path.to_path_buf(),
                    action: "read",
                    error: source,
                })
            }
        };
        Self::parse(&text, path)
    }

    /// Parses and validates the text of a cluster file; `path` is used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<ClusterConfig, SetupError> {
        let file: ClusterFile = toml::from_str(text).map_err(|e| toml_error(path, text, &e))?;
        Self::from_file(file, path)
    }

    /// Validates a parsed file.
    pub fn from_file(file: ClusterFile, path: &Path) -> Result<ClusterConfig, SetupError> {
        let bad = |message: String| SetupError::Inconsistent {
            path: path.to_path_buf(),
            message,
        };
        let n = 3 * file.f as usize + 1;
        if file.replicas.len() != n {
            return Err(bad(format!(
                "f = {} needs n = 3f+1 = {n} replicas but {} are listed; list exactly {n} [[replica]] entries or change f",
                file.f,
                file.replicas.len()
            )));
        }
        let mut by_id: BTreeMap<ReplicaId, &ReplicaEntry> = BTreeMap::new();
        for r in &file.replicas {
            if r.id as usize >= n {
                return Err(bad(format!(
                    "replica id {} is out of range; ids must be 0 to {}",
                    r.id,
                    n - 1
                )));
            }
            if by_id.insert(r.id, r).is_some() {
                return Err(bad(format!(
                    "replica id {} appears twice; give each [[replica]] a distinct id from 0 to {}",
                    r.id,
                    n - 1
                )));
            }
        }
        let mut addresses: BTreeMap<String, ReplicaId> = BTreeMap::new();
        let mut x_keys: BTreeMap<[u8; 32], ReplicaId> = BTreeMap::new();
        let mut sockets: BTreeMap<&str, ReplicaId> = BTreeMap::new();
        let mut replicas = Vec::with_capacity(n);
        for (&id, r) in &by_id {
            if !valid_address(&r.address) {
                return Err(bad(format!(
                    "replica {id} has address {:?}; write it as host:port, e.g. 127.0.0.1:7000",
                    r.address
                )));
            }
            if let Some(other) = addresses.insert(r.address.to_ascii_lowercase(), id) {
                return Err(bad(format!(
                    "replicas {other} and {id} both have address {}; give each replica its own address",
                    r.address
                )));
            }
            if let Some(s) = &r.local_socket {
                check_local_socket(s)
                    .map_err(|m| bad(format!("replica {id}: local_socket {s:?} {m}")))?;
                if let Some(other) = sockets.insert(s, id) {
                    return Err(bad(format!(
                        "replicas {other} and {id} both have local_socket {s:?}; give each replica its own"
                    )));
                }
            }
            if let Some(other) = x_keys.insert(r.x25519_public_key.0, id) {
                return Err(bad(format!(
                    "replicas {other} and {id} have the same x25519_public_key; each replica needs its own keys (byzfs keygen)"
                )));
            }
            let ed = VerifyingKey::from_bytes(&r.ed25519_public_key.0)
                .ok()
                .filter(|k| !k.is_weak())
                .ok_or_else(|| {
                    bad(format!(
                        "replica {id}: ed25519_public_key is not a valid Ed25519 public key"
                    ))
                })?;
            replicas.push(ReplicaInfo {
                id,
                address: r.address.clone(),
                local_socket: r.local_socket.as_ref().map(PathBuf::from),
                x25519_public: x25519_dalek::PublicKey::from(r.x25519_public_key.0),
                ed25519_public: ed,
            });
        }
        let admin_public = VerifyingKey::from_bytes(&file.admin_public_key.0)
            .ok()
            .filter(|k| !k.is_weak())
            .ok_or_else(|| bad("admin_public_key is not a valid Ed25519 public key".into()))?;
        let bft = file.protocol.to_config(file.f, file.epoch);
        bft.validate()
            .map_err(|m| bad(format!("invalid protocol parameters: {m}")))?;
        if file.fs.capacity_bytes == 0 || file.fs.max_inodes == 0 {
            return Err(bad(
                "[fs] capacity_bytes and max_inodes must be above 0".into()
            ));
        }
        if !(1_000..=600_000).contains(&file.fs.clock_lag_tolerance_ms) {
            return Err(bad(format!(
                "[fs] clock_lag_tolerance_ms = {} is out of range: give 1000 to 600000 (10000 if unset)",
                file.fs.clock_lag_tolerance_ms
            )));
        }
        Ok(ClusterConfig {
            path: path.to_path_buf(),
            cluster_id: file.cluster_id.0,
            admin_public,
            bft,
            fs: file.fs,
            replicas,
        })
    }

    /// The file form of this configuration.
    pub fn to_file(&self) -> ClusterFile {
        ClusterFile {
            cluster_id: Hex(self.cluster_id),
            epoch: self.bft.epoch,
            f: self.bft.f,
            admin_public_key: Hex(self.admin_public.to_bytes()),
            protocol: ProtocolParams::from_config(&self.bft),
            fs: self.fs,
            replicas: self
                .replicas
                .iter()
                .map(|r| ReplicaEntry {
                    id: r.id,
                    address: r.address.clone(),
                    local_socket: r
                        .local_socket
                        .as_ref()
                        .map(|p| p.to_string_lossy().into_owned()),
                    x25519_public_key: Hex(r.x25519_public.to_bytes()),
                    ed25519_public_key: Hex(r.ed25519_public.to_bytes()),
                })
                .collect(),
        }
    }

    /// The TOML text of this configuration, with a header comment.
    pub fn to_toml(&self) -> String {
        let body = toml::to_string(&self.to_file())
            // Plain strings, integers, booleans and tables always serialise.
            .expect("a cluster file always serialises to TOML");
        format!(
            "# ByzFS cluster configuration: shared by every replica and client. No secrets here.\n\
             # Durations are in milliseconds; see byzfs_bft::Config for each parameter.\n\n{body}"
        )
    }

    /// Number of replicas.
    pub fn n(&self) -> usize {
        self.replicas.len()
    }

    /// Replica `id`, or an error naming the valid range.
    pub fn replica(&self, id: ReplicaId) -> Result<&ReplicaInfo, SetupError> {
        self.replicas
            .get(id as usize)
            .ok_or(SetupError::UnknownReplica {
                path: self.path.clone(),
                id,
                max: self.n().saturating_sub(1) as ReplicaId,
            })
    }
}
