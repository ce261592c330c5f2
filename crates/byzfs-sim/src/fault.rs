//! Timed faults the scenario schedules and the simulator applies (docs/PROTOCOL.md §6.4). Some are
//! resolved when they fire (who the primary is *then*), so plans stay independent of the run.

use crate::network::{NetFaults, NodeIdx};
use crate::partition::Shape;
use crate::vc_history::VcHistoryPlan;
use byzfs_bft::{ReplicaId, Time};

/// Whom a crash hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A fixed replica.
    Replica(ReplicaId),
    /// Whoever correct replicas currently consider primary (skipped if it is down or faulty).
    CurrentPrimary,
}

/// A fault event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Crash a replica; it restarts after `down_us` (keeping its durable state or not), or at
    /// the start of the liveness phase, whichever is first. With `at_next_send` it dies just
    /// before its next send (after the records preceding it are durable), or after 50 ms.
    Crash {
        /// Who.
        target: Target,
        /// Die mid-step, before a send.
        at_next_send: bool,
        /// Downtime.
        down_us: u64,
        /// Restart with the durable state (else amnesia: an empty disk).
        with_state: bool,
    },
    /// Cut links of a partition shape for `dur_us`, then heal them in random order; repeat
    /// `flaps` more times.
    Partition {
        /// Shape.
        shape: Shape,
        /// Duration of each cut.
        dur_us: u64,
        /// Extra repetitions (flapping).
        flaps: u32,
    },
    /// Cut every link of one replica (clients included) for `dur_us` (state-transfer scenario).
    Isolate {
        /// Who.
        replica: ReplicaId,
        /// Duration.
        dur_us: u64,
    },
    /// Power-cut a correct replica just after it next broadcasts a PREPARE (or let the
    /// order lapse after 500 ms): the vote's log record is then the newest unsynced one, so
    /// the cut tears it off about half the time. It restarts from its disk after `down_us`.
    CrashAfterPrepare {
        /// Who.
        replica: ReplicaId,
        /// Downtime.
        down_us: u64,
    },
    /// Power-cut the current primary (if correct and up) just after it next sends a
    /// PRE-PREPARE (or let the order lapse after 500 ms): its `Proposed` record is then the
    /// newest unsynced one, so the cut tears it off about half the time. It restarts from
    /// its disk after `down_us`, short enough to come back in the view it led.
    CrashAfterProposal {
        /// Downtime.
        down_us: u64,
    },
    /// Power-cut every correct replica `after_us` after `replica` next installs a
    /// checkpoint it fetched (or let the order lapse after 3 s): its record of that
    /// checkpoint then waits on its disk (PROTOCOL.md §2.7), and the others have seen what
    /// it did since. Each restarts from its disk after `down_us` and up to 5 ms more;
    /// `amnesiac`, if any, is cut too and restarts with an empty disk.
    CutAllAfterTransfer {
        /// Whose transfer.
        replica: ReplicaId,
        /// How long after the transfer.
        after_us: u64,
        /// Downtime.
        down_us: u64,
        /// The replica that loses its disk in this cut (it counts against `f`).
        amnesiac: Option<ReplicaId>,
    },
    /// Re-draw which peers each twin talks to.
    TwinLinks,
    /// Start the second twin instance.
    StartTwin,
    /// Change the network's per-frame faults.
    SetNet(NetFaults),
    /// Slow down `links` random directed replica-to-replica links (chosen when it fires) by
    /// an extra delay in `extra_min_us..=extra_max_us` each, for `dur_us`.
    SlowLinks {
        /// How many links (drawn with repetition).
        links: usize,
        /// Least extra delay.
        extra_min_us: u64,
        /// Largest extra delay.
        extra_max_us: u64,
        /// How long.
        dur_us: u64,
    },
    /// Start the `vc-history` director (see [`crate::vc_history`]).
    VcHistory(VcHistoryPlan),
    /// The replica's next restart reads a new wall clock, `offset_us` from true time (its
    /// rate error stays): a rebooted machine's clock may step, backwards too. The runtime's
    /// clock is monotonic within a process, so a step happens only across a restart.
    ClockAtRestart {
        /// Who.
        replica: ReplicaId,
        /// The new offset.
        offset_us: i64,
    },
}

/// Internal follow-ups the simulator schedules for itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FollowUp {
    /// Crash `inst` now (fallback for a pending crash at the next send).
    CrashNow {
        /// Instance.
        inst: NodeIdx,
    },
    /// Drop `inst`'s pending crash after a PREPARE ordered at `ordered` (none came in time).
    CancelCrashAfterPrepare {
        /// Instance.
        inst: NodeIdx,
        /// When the crash was ordered (a later order stays).
        ordered: Time,
    },
    /// Drop `inst`'s pending crash after a PRE-PREPARE ordered at `ordered` (none came in
    /// time).
    CancelCrashAfterProposal {
        /// Instance.
        inst: NodeIdx,
        /// When the crash was ordered (a later order stays).
        ordered: Time,
    },
    /// Drop `inst`'s pending cut after a transfer ordered at `ordered` (none came in time).
    CancelCutAllAfterTransfer {
        /// Instance.
        inst: NodeIdx,
        /// When the cut was ordered (a later order stays).
        ordered: Time,
    },
    /// Power-cut every correct replica that is up, and `amnesiac`; each restarts from its
    /// disk (`amnesiac` with an empty one) after `down_us` and up to 5 ms more.
    CutAll {
        /// Downtime.
        down_us: u64,
        /// The replica that loses its disk.
        amnesiac: Option<NodeIdx>,
    },
    /// Restart `inst`.
    Restart {
        /// Instance.
        inst: NodeIdx,
        /// Keep the durable state.
        with_state: bool,
    },
    /// Heal these links in random order, then (if `flaps > 0`) cut them again later.
    Heal {
        /// Links.
        links: Vec<(NodeIdx, NodeIdx)>,
        /// Remaining repetitions.
        flaps: u32,
        /// Duration of each cut.
        dur_us: u64,
    },
    /// Cut these links again (flapping).
    Recut {
        /// Links.
        links: Vec<(NodeIdx, NodeIdx)>,
        /// Remaining repetitions.
        flaps: u32,
        /// Duration.
        dur_us: u64,
    },
    /// Remove the extra delay of these directed links.
    Unslow {
        /// Links.
        links: Vec<(NodeIdx, NodeIdx)>,
    },
    /// Bring one directed link up.
    LinkUp {
        /// From.
        from: NodeIdx,
        /// To.
        to: NodeIdx,
    },
}
