//! The log (docs/PROTOCOL.md §1.4, §1.7, §2.2): the slots above the last stable checkpoint,
//! how far execution got, and the batch bodies the slots name.

use super::slot::Slot;
use crate::crypto::Digest;
use crate::ids::{ReplicaId, Seq};
use crate::message::BatchBody;
use crate::time::Time;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The slots, the execution marks and the batch bodies.
#[derive(Clone, Debug, Default)]
pub(crate) struct Log {
    /// Log entries by sequence number, all above `last_stable`.
    pub slots: BTreeMap<Seq, Slot>,
    /// Last sequence number assigned (primary) or known to be assigned by the new view.
    pub seqno: Seq,
    /// Last committed-and-executed sequence number.
    pub last_executed: Seq,
    /// Last tentatively executed sequence number (≥ `last_executed`).
    pub last_tentative: Seq,
    /// Last stable checkpoint `h`: the log window starts above it.
    pub last_stable: Seq,
    /// Digests of executed batches above the latest checkpoint (replayed after a rollback).
    pub executed: BTreeMap<Seq, Digest>,
    /// Batch bodies by digest (for execution, relaying and new-view re-proposal).
    pub batches: BTreeMap<Digest, Arc<BatchBody>>,
    /// Batch digests known but whose body is missing (asked for in STATUS).
    pub missing_batches: BTreeSet<Digest>,
    /// Normal-case frames of our view just above the log window (within one checkpoint
    /// interval), by slot, sender and tag, handled once the window reaches them (see
    /// `hold_ahead`).
    pub ahead: BTreeMap<(Seq, ReplicaId, u8), Arc<[u8]>>,
    /// The primary proposes null batches while no request waits, up to and including this
    /// slot (an idle checkpoint, `replica/idle.rs`).
    pub pad_to: Seq,
    /// When this primary last proposed a batch: the idle timer's quiet starts there.
    pub last_proposed: Time,
}
