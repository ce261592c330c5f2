//! Outputs of the replica state machine, drained by the driver with `poll_action` in order.
//!
//! **Ordering contract (durability):** a [`Action::Persist`] must be durable before the driver
//! performs any later action of the same replica. A driver may group-commit: write every
//! consecutive `Persist`, fsync once, then perform the sends that follow. The simulator checks
//! that every vote (PRE-PREPARE, PREPARE, COMMIT, VIEW-CHANGE) leaves only after its record.

use crate::crypto::Digest;
use crate::ids::{ClientId, ReplicaId, RequestId, Seq, View};
use crate::message::BatchBody;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Something the driver must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send a frame to one replica.
    Send {
        /// Destination.
        to: ReplicaId,
        /// The frame.
        bytes: Arc<[u8]>,
    },
    /// Send the same frame to every other replica.
    Broadcast {
        /// The frame.
        bytes: Arc<[u8]>,
    },
    /// Send a frame (a REPLY) to a client.
    SendClient {
        /// Destination.
        client: ClientId,
        /// The frame.
        bytes: Arc<[u8]>,
    },
    /// Make a promise durable before any later action.
    Persist(PersistRecord),
    /// Make data durable before any later action (same contract as `Persist`). Emitted only
    /// by a replica whose driver keeps its state on disk ([`crate::Replica::set_store_state`]);
    /// a driver without disk may ignore it.
    Store(StoreRecord),
    /// An observation for logs, metrics and the simulator's checkers. Needs no action.
    Event(Event),
    /// Make every earlier `Persist` and `Store` durable before any later action, the
    /// `Executed` records a driver may keep unsynced included. Emitted (only with
    /// [`crate::Replica::set_store_state`]) before the replica announces a checkpoint: a
    /// CHECKPOINT vouches for the executions it covers, and a replica that forgot them in a
    /// crash would leave that checkpoint without the `f+1` reports a new view needs.
    Sync,
}

/// A promise a replica must not forget across a restart (docs/PROTOCOL.md §3.6 #11), or (for
/// `Executed`) a fact a disk restart replays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum PersistRecord {
    /// The replica moved to `view` (never vote in a lower one again).
    View(View),
    /// The replica pre-prepared or prepared `digest` at `(view, seq)`.
    Prepared {
        /// View.
        view: View,
        /// Sequence number.
        seq: Seq,
        /// Batch digest.
        digest: Digest,
    },
    /// The replica committed `digest` at `(view, seq)`.
    Committed {
        /// View.
        view: View,
        /// Sequence number.
        seq: Seq,
        /// Batch digest.
        digest: Digest,
    },
    /// The batch `digest` at `seq` committed here and was executed in order. Emitted only when
    /// the state is stored ([`StoreRecord`]); [`crate::Replica::restore`] re-executes these
    /// after the stored checkpoint. Not a vote: it is no promise to other replicas, and
    /// nothing sent depends on it (the batch's `Committed` records, durable at `2f+1`
    /// replicas, already make it survive a crash of all of them), so a driver may let it
    /// become durable later, with the next promise or [`Action::Sync`]; a crash that loses a
    /// suffix of these only makes the restored replica re-learn those batches from the
    /// others. The one exception is a CHECKPOINT, which vouches for them: the replica emits
    /// [`Action::Sync`] before it.
    Executed {
        /// Sequence number.
        seq: Seq,
        /// Batch digest.
        digest: Digest,
    },
    /// A NEW-VIEW this replica installed chose checkpoint `seq` (`f+1` VIEW-CHANGEs reported
    /// it) above the replica's own stable checkpoint; until its state transfer stores that
    /// checkpoint, its VIEW-CHANGEs list it too. Durable so that a crash before the transfer
    /// completes does not make the cluster forget a checkpoint only it and one other still
    /// vouch for (simulator: total-crash 3282).
    Certified {
        /// Sequence number of the checkpoint.
        seq: Seq,
        /// State digest.
        digest: Digest,
    },
    // New variants go last: logs store these with postcard, which numbers them in order
    // (`the_log_encoding_of_records_is_stable`). One build put `Proposed` before
    // `Certified`, which moved `Certified`'s number; it is back where the first logs had it.
    /// The primary pre-prepared `digest` at `(view, seq)`: the meaning of `Prepared`, restored
    /// as one, but a driver may append it without waiting for the disk, as `Executed`
    /// (written before the sends that follow it, so only a power loss can lose it; it
    /// becomes durable with the next promise or [`Action::Sync`]). That saves the primary's
    /// `fdatasync` on every request's critical path. What makes the loss harmless: every vote
    /// the primary casts later for the batch (COMMIT, a tentative reply) follows a synced
    /// promise, which makes this record durable too; and a primary restored from records
    /// that may lack one ([`crate::replica::DurableState::proposals_durable`] false) never
    /// proposes again in the view it restarts in, so it cannot assign `seq` twice.
    Proposed {
        /// View.
        view: View,
        /// Sequence number.
        seq: Seq,
        /// Batch digest.
        digest: Digest,
    },
    /// A backup accepted the PRE-PREPARE of `digest` at `(view, seq)` and sends its PREPARE:
    /// the meaning of `Prepared`, restored as one, but, like [`PersistRecord::Proposed`],
    /// appended without waiting for the disk. That saves the backups' `fdatasync` on every
    /// request's critical path, leaving one (`Committed`). What makes the loss harmless:
    /// every later promise of the replica follows a synced record, which makes this one
    /// durable too (the COMMIT's, or the `View` before a VIEW-CHANGE: see below); the one
    /// danger is a restored backup voting again in the same view for another digest at
    /// `seq`, which a faulty primary could ask of it. So a replica restored from records
    /// that may lack one ([`crate::replica::DurableState::proposals_durable`] false) records
    /// [`PersistRecord::Abstain`] and sends no PREPARE in the view it restarts in.
    Voted {
        /// View.
        view: View,
        /// Sequence number.
        seq: Seq,
        /// Batch digest.
        digest: Digest,
    },
    /// The replica was restored in `View` from records that may lack some of its unsynced
    /// votes: it sends no new PREPARE in that view, across later restarts too (a later
    /// restart with every append kept would otherwise forget that the earlier one did not).
    /// Kept with the view, outside the log. Written by binaries before the vote horizon
    /// (Deviations 25); later ones write [`PersistRecord::AbstainUpTo`], and read this as abstaining at every `seq`.
    Abstain(View),
    /// The backup sends PREPAREs only for sequence numbers up to `Seq` until it records a
    /// higher horizon. Durable before the sends that follow, unlike the `Voted` records it
    /// bounds: a backup restored from records that may lack some votes knows they were all
    /// at or below its durable horizon, and abstains only there
    /// ([`PersistRecord::AbstainUpTo`]). Written once per log window of votes, so it costs
    /// one sync in that many. Drivers keep the highest outside the log, with the view (a
    /// stable checkpoint must not drop it: it bounds votes above the checkpoint too).
    VoteHorizon(Seq),
    /// The replica was restored in `view` from records that may lack some of its unsynced
    /// votes, all of them at or below `seq` (its durable [`PersistRecord::VoteHorizon`], or
    /// its stable checkpoint if higher): it sends no PREPARE in `view` for a sequence number
    /// up to `seq`, across later restarts too. Kept with the view, outside the log.
    AbstainUpTo {
        /// The view it restarted in.
        view: View,
        /// The highest sequence number it may have voted for.
        seq: Seq,
    },
}

impl PersistRecord {
    /// The promise this record makes: a [`PersistRecord::Proposed`] or
    /// [`PersistRecord::Voted`] is a `Prepared`; any other record is itself.
    pub fn as_promise(self) -> PersistRecord {
        match self {
            PersistRecord::Proposed { view, seq, digest }
            | PersistRecord::Voted { view, seq, digest } => {
                PersistRecord::Prepared { view, seq, digest }
            }
            other => other,
        }
    }

    /// Whether a driver may append this record without waiting for the disk
    /// ([`PersistRecord::Executed`], [`PersistRecord::Proposed`], [`PersistRecord::Voted`]).
    pub fn may_wait(self) -> bool {
        matches!(
            self,
            PersistRecord::Executed { .. }
                | PersistRecord::Proposed { .. }
                | PersistRecord::Voted { .. }
        )
    }

    /// Whether this is a vote a driver may append without waiting for the disk, with the
    /// bodies of the batch it votes for ([`PersistRecord::Proposed`],
    /// [`PersistRecord::Voted`]).
    pub fn is_lazy_vote(self) -> bool {
        matches!(
            self,
            PersistRecord::Proposed { .. } | PersistRecord::Voted { .. }
        )
    }
}

/// Bulk data a replica on disk keeps so that it can rebuild itself after a crash
/// ([`crate::Replica::restore`]): the service state of its last stable checkpoint and the
/// bodies of the batches it voted for or executed above it. A driver stores the latest image
/// of each partition and every batch, and forgets batches at or below a stored checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreRecord {
    /// The body of a batch this replica voted for or executed at `seq`, with the frames of its
    /// big requests (in `body.big` order). A batch may be stored again with a higher `seq` (a
    /// new view re-proposed it); keep the highest.
    Batch {
        /// Highest sequence number the batch was seen at.
        seq: Seq,
        /// Batch digest.
        digest: Digest,
        /// The batch.
        body: Arc<BatchBody>,
        /// Frames of the big requests, one per `body.big` digest.
        big: Vec<Arc<[u8]>>,
    },
    /// Checkpoint `seq` became stable. Carries only the partitions whose digest differs from
    /// the previously stored image (all of them the first time); the others are unchanged.
    /// Votes, `Executed` records and batches at or below `seq` may be dropped once it is stored.
    Checkpoint(Arc<CheckpointImage>),
}

/// A stable checkpoint, as changed partitions (see [`StoreRecord::Checkpoint`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointImage {
    /// Sequence number.
    pub seq: Seq,
    /// Root digest (service and reply-cache partitions).
    pub digest: Digest,
    /// Total number of partitions: the service's, then the library's (reply cache).
    pub partitions: u32,
    /// The partitions that changed since the previous image: (index, digest, content). The
    /// content of the service's partitions is empty when the service persists its own state
    /// ([`crate::Service::persists_state`]).
    pub changed: Vec<(u32, Digest, Vec<u8>)>,
}

/// Observable protocol progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A batch was executed (tentatively or committed). `requests` lists the requests that ran
    /// (duplicates answered from the reply cache are not listed).
    Executed {
        /// Sequence number.
        seq: Seq,
        /// Batch digest.
        digest: Digest,
        /// Non-deterministic input used.
        nondet: Vec<u8>,
        /// Requests executed, in order.
        requests: Vec<(ClientId, RequestId)>,
        /// Each executed request's digest, in the same order: the digest its client's frame
        /// carries (and that its authentication covers), so an observer can tell whether
        /// what ran is what the client sent (simulator checker `exactly-once`).
        request_digests: Vec<Digest>,
        /// Executed before the commit certificate was complete.
        tentative: bool,
    },
    /// A prepared certificate completed here: the pre-prepare for `digest` at `(view, seq)` and
    /// `2f` matching PREPAREs (INV-PREPARED, docs/PROTOCOL.md §6.6, is checked on these).
    Prepared {
        /// View.
        view: View,
        /// Sequence number.
        seq: Seq,
        /// Batch digest.
        digest: Digest,
    },
    /// A commit certificate completed here (`committed-local`): prepared plus `2f+1` matching
    /// COMMITs. It must imply that `f+1` correct replicas prepared the same `(view, seq, digest)`.
    CommittedLocal {
        /// View.
        view: View,
        /// Sequence number.
        seq: Seq,
        /// Batch digest.
        digest: Digest,
    },
    /// The batch at `seq` is committed and executed (`last_executed = seq`).
    Committed {
        /// Sequence number.
        seq: Seq,
        /// Batch digest.
        digest: Digest,
    },
    /// Tentative execution was undone; the state is that of checkpoint `to`.
    RolledBack {
        /// The checkpoint restored.
        to: Seq,
    },
    /// A checkpoint was taken.
    CheckpointTaken {
        /// Sequence number.
        seq: Seq,
        /// State digest.
        digest: Digest,
    },
    /// A checkpoint became stable.
    CheckpointStable {
        /// Sequence number.
        seq: Seq,
        /// State digest.
        digest: Digest,
        /// What proved it stable.
        via: StableVia,
    },
    /// A view change started: the replica sent VIEW-CHANGE for `view`.
    ViewChangeStarted {
        /// The new view.
        view: View,
    },
    /// This backup found the primary of `view` too slow under load and votes it out
    /// (`replica/monitor.rs`); a [`Event::ViewChangeStarted`] follows.
    PrimaryTooSlow {
        /// The view whose primary was judged.
        view: View,
        /// Work executed in the judged period (requests, plus one per 4 KiB of operation).
        units: u64,
        /// What the period had to reach.
        required: u64,
    },
    /// A NEW-VIEW was installed.
    ViewInstalled {
        /// The view.
        view: View,
        /// The checkpoint chosen as `min`.
        min: Seq,
    },
    /// State transfer brought the state to checkpoint `seq`.
    StateTransferred {
        /// The checkpoint.
        seq: Seq,
        /// Its digest.
        digest: Digest,
    },
    /// A read-only request was answered without ordering (§1.8), from a state whose
    /// committed prefix ends at `committed` (the read-only checker holds the result to the
    /// result on that prefix).
    ReadOnlyExecuted {
        /// The client.
        client: ClientId,
        /// The request.
        rid: RequestId,
        /// `last_executed` when it ran.
        committed: Seq,
        /// Batches after `committed` had executed tentatively (the per-object floor).
        on_tentative: bool,
        /// Digest of the result.
        result_digest: Digest,
    },
    /// An input was dropped.
    Dropped(DropReason),
}

/// Why an input was dropped (counted by the driver's metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DropReason {
    /// The frame did not parse or decode.
    Malformed,
    /// A MAC or signature did not verify, or the sender is unknown.
    BadAuth,
    /// Wrong configuration epoch.
    WrongEpoch,
    /// Outside the watermark window or for another view.
    OutOfWindow,
    /// Semantically invalid (e.g. conflicting pre-prepare, bad NEW-VIEW, bad nondet).
    Invalid,
    /// A stale or duplicate message.
    Stale,
    /// A bounded queue was full.
    QueueFull,
    /// A PRE-PREPARE whose non-deterministic choice fails this replica's check (§1.13) and
    /// that fewer than `f+1` other replicas prepared yet: a faulty primary's choice, or,
    /// usually, a time-based choice older than the tolerance, retransmitted to a replica
    /// that is catching up after a restart (accepted once `f+1` PREPAREs vouch for it).
    Nondet,
    /// A request from a client that already has as many requests stored at this replica as
    /// it may (two `client_window`s; see `replica::request_store`): refused until some run.
    ClientQuota,
}

#[cfg(test)]
mod tests {
    use super::PersistRecord;
    use crate::crypto::Digest;

    #[test]
    fn the_log_encoding_of_records_is_stable() {
        // `byzfs-net`'s log stores records with postcard: a variant's first byte is its
        // position in the enum. Moving one would make older logs decode as other records.
        let d = Digest([7; 32]);
        let (view, seq, digest) = (1, 2, d);
        let cases = [
            (PersistRecord::View(1), 0u8),
            (PersistRecord::Prepared { view, seq, digest }, 1),
            (PersistRecord::Committed { view, seq, digest }, 2),
            (PersistRecord::Executed { seq, digest }, 3),
            (PersistRecord::Certified { seq, digest }, 4),
            (PersistRecord::Proposed { view, seq, digest }, 5),
            (PersistRecord::Voted { view, seq, digest }, 6),
            (PersistRecord::Abstain(1), 7),
            (PersistRecord::VoteHorizon(2), 8),
            (PersistRecord::AbstainUpTo { view, seq }, 9),
        ];
        for (rec, tag) in cases {
            let bytes = postcard::to_allocvec(&rec).expect("encodes");
            assert_eq!(bytes[0], tag, "{rec:?}");
            assert_eq!(
                postcard::from_bytes::<PersistRecord>(&bytes).ok(),
                Some(rec)
            );
        }
    }
}

/// What made a checkpoint stable at a replica ([`Event::CheckpointStable`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StableVia {
    /// `2f+1` matching CHECKPOINTs, its own included (§2.2).
    Quorum,
    /// The NEW-VIEW it installed starts at that checkpoint (§3.4).
    NewView,
    /// A state transfer installed it (§2.4).
    Transfer,
}
