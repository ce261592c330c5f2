//! Read-only requests waiting to run, and the floor that keeps their answers linearizable
//! (docs/PROTOCOL.md §1.8).

use super::StoredRequest;
use crate::ids::Seq;
use std::collections::VecDeque;

/// The read-only floor and the reads waiting for it.
#[derive(Clone, Debug, Default)]
pub(crate) struct ReadOnly {
    /// A read-only request is answered only once `last_executed` reaches the value this
    /// floor had when the request arrived (§1.8). It is the highest sequence number this
    /// replica sent a COMMIT for, every batch a NEW-VIEW carried over (`max-1`), and, after a
    /// restart, its highest durable vote; it never decreases. A write a client accepted on
    /// `f+1` committed replies was prepared (COMMIT sent) by `f+1` correct replicas before it
    /// completed; none of them answers a later read from older state, so at most `2f` replies
    /// to a read (`f` faulty, `f` correct that never prepared the write) can miss it, short of
    /// the `2f+1` matching replies a read needs (found by the simulator).
    pub floor: Seq,
    /// Read-only requests waiting until they can run (§1.8), with the `floor` at their
    /// arrival.
    pub queue: VecDeque<(Seq, StoredRequest)>,
}

impl ReadOnly {
    /// Raises the floor (it never decreases).
    pub fn raise_floor(&mut self, seq: Seq) {
        self.floor = self.floor.max(seq);
    }
}
