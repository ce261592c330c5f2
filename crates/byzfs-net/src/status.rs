//! A replica's status: what `byzfs status` shows and what the metrics endpoint exports. The
//! event loop publishes a fresh [`NodeStatus`] periodically; the handshake's status request
//! returns the latest one (see the crate README).

use crate::counters::NetCounters;
use crate::storage::DiskCounters;
use byzfs_bft::replica::Stats;
use byzfs_bft::{DropReason, ReplicaId, Seq, View};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Every core drop reason (exported even when zero, so each series exists from the start).
pub const DROP_REASONS: [DropReason; 9] = [
    DropReason::Malformed,
    DropReason::BadAuth,
    DropReason::WrongEpoch,
    DropReason::OutOfWindow,
    DropReason::Invalid,
    DropReason::Stale,
    DropReason::QueueFull,
    DropReason::Nondet,
    DropReason::ClientQuota,
];

/// Metric label of a core drop reason.
pub fn drop_reason_name(r: DropReason) -> &'static str {
    match r {
        DropReason::Malformed => "malformed",
        DropReason::BadAuth => "bad_auth",
        DropReason::WrongEpoch => "wrong_epoch",
        DropReason::OutOfWindow => "out_of_window",
        DropReason::Invalid => "invalid",
        DropReason::Stale => "stale",
        DropReason::QueueFull => "queue_full",
        DropReason::Nondet => "nondet",
        DropReason::ClientQuota => "client_quota",
    }
}

/// The core's counters ([`Stats`]) in a serialisable form.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)] // One field per `Stats` field; `dropped` is keyed by `drop_reason_name`.
pub struct CoreCounters {
    pub requests_executed: u64,
    pub read_only_executed: u64,
    #[serde(default)]
    pub read_only_on_tentative: u64,
    #[serde(default)]
    pub read_only_queued: u64,
    pub batches_committed: u64,
    /// Of those, run on `2f+1` COMMITs of a view this replica had left.
    #[serde(default)]
    pub batches_caught_up: u64,
    pub pre_prepares_sent: u64,
    /// Quiet spells ended with null batches up to the next checkpoint (as primary).
    #[serde(default)]
    pub idle_checkpoints: u64,
    #[serde(default)]
    pub prepares_sent: u64,
    #[serde(default)]
    pub prepares_withheld: u64,
    #[serde(default)]
    pub vote_horizons: u64,
    pub batched_requests: u64,
    pub view_changes: u64,
    pub views_installed: u64,
    pub checkpoints_stable: u64,
    pub state_transfers: u64,
    #[serde(default)]
    pub state_chunks_fetched: u64,
    #[serde(default)]
    pub state_parts_fetched: u64,
    pub rollbacks: u64,
    #[serde(default)]
    pub busy_steps: u64,
    #[serde(default)]
    pub monitor_complaints: u64,
    #[serde(default)]
    pub bodies_relayed: u64,
    #[serde(default)]
    pub bodies_passed_on: u64,
    pub dropped: BTreeMap<String, u64>,
}

impl From<&Stats> for CoreCounters {
    fn from(s: &Stats) -> Self {
        CoreCounters {
            requests_executed: s.requests_executed,
            read_only_executed: s.read_only_executed,
            read_only_on_tentative: s.read_only_on_tentative,
            read_only_queued: s.read_only_queued,
            batches_committed: s.batches_committed,
            batches_caught_up: s.batches_caught_up,
            pre_prepares_sent: s.pre_prepares_sent,
            idle_checkpoints: s.idle_checkpoints,
            prepares_sent: s.prepares_sent,
            prepares_withheld: s.prepares_withheld,
            vote_horizons: s.vote_horizons,
            batched_requests: s.batched_requests,
            view_changes: s.view_changes,
            views_installed: s.views_installed,
            checkpoints_stable: s.checkpoints_stable,
            state_transfers: s.state_transfers,
            state_chunks_fetched: s.state_chunks_fetched,
            state_parts_fetched: s.state_parts_fetched,
            rollbacks: s.rollbacks,
            busy_steps: s.busy_steps,
            monitor_complaints: s.monitor_complaints,
            bodies_relayed: s.bodies_relayed,
            bodies_passed_on: s.bodies_passed_on,
            dropped: DROP_REASONS
                .iter()
                .chain(s.dropped.keys())
                .map(|r| {
                    let n = s.dropped.get(r).copied().unwrap_or(0);
                    (drop_reason_name(*r).to_string(), n)
                })
                .collect(),
        }
    }
}

/// A snapshot of one replica.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    /// The replica.
    pub replica: ReplicaId,
    /// Current view.
    pub view: View,
    /// Whether the replica holds the NEW-VIEW of its view (false while a view change runs).
    pub has_new_view: bool,
    /// Primary of the current view.
    pub primary: ReplicaId,
    /// Last executed (committed) sequence number.
    pub last_executed: Seq,
    /// Last tentatively executed sequence number.
    pub last_tentative: Seq,
    /// Last stable checkpoint.
    pub last_stable: Seq,
    /// Whether a state transfer is running.
    pub fetching: bool,
    /// Outbound peer links currently connected.
    pub peers_connected: u32,
    /// Clients currently connected.
    pub clients_connected: u32,
    /// Durability mode ("disk" or "memory").
    pub durability: String,
    /// Digest of the live state (service and reply cache) at `state_digest_at`, hex.
    pub state_digest: String,
    /// The `last_tentative` that `state_digest` describes: the digest is recomputed at the
    /// periodic status tick, not at every early publication, so it may lag `last_tentative`.
    /// Compare digests only where `state_digest_at == last_tentative`.
    #[serde(default)]
    pub state_digest_at: Seq,
    /// Digest of the last stable checkpoint, hex (empty if not held).
    pub stable_digest: String,
    /// The core's counters.
    pub core: CoreCounters,
    /// The runtime's counters.
    pub net: NetCounters,
    /// Restored after a power cut, it withholds its PREPAREs in its view up to this
    /// sequence number (`Replica::withholds_prepares_up_to`).
    #[serde(default)]
    pub withholds_prepares_up_to: Option<Seq>,
    /// Bytes its data directory takes on disk (allocated blocks of its files), at the last
    /// status tick; 0 in `memory` mode.
    #[serde(default)]
    pub data_bytes: u64,
    /// What the durability wrote since start (log, database).
    #[serde(default)]
    pub disk: DiskCounters,
    /// The service's own counters since start ([`byzfs_bft::Service::counters`]; for the
    /// file service, its store's writes).
    #[serde(default)]
    pub service: BTreeMap<String, u64>,
}
