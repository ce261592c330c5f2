//! The two connections of a link between replicas: **control** (PREPARE, COMMIT,
//! CHECKPOINT, STATUS, FETCH, VIEW-CHANGE, NEW-VIEW) and **bulk** (request bodies,
//! PRE-PREPAREs, batches, state transfer, client introductions), each with its own queue,
//! writer and TCP connection.
//!
//! One FIFO connection put every agreement message behind the bodies queued before it: at
//! 1 Mb/s between sites a 1 MiB body holds a link for 8 s (25 s when the primary relays it
//! to three backups over its one uplink), and a PREPARE, COMMIT or VIEW-CHANGE queued
//! behind it waited as long — new views failed before their NEW-VIEW crossed (BENCHMARKS.md
//! "Andrew-Tcl across sites"). A second queue alone is not enough: a frame being written
//! cannot be interrupted, and the kernel's send buffer (several MiB once TCP has grown it)
//! holds seconds of bulk bytes ahead of anything queued later; a second connection has its
//! own buffer, and the links' queues interleave the two flows' packets.
//!
//! PRE-PREPAREs stay behind the bodies: a primary relays a big body just before the
//! PRE-PREPARE naming it (docs/PROTOCOL.md §1.10), and a backup that got the PRE-PREPARE first
//! would ask every peer for the body in its next STATUS — a second copy on the same slow
//! link (`tests/sites.rs` `bandwidth_counts_each_update_on_every_link`). Introductions stay
//! ahead of the requests they authenticate, on the same connection. A frame that is neither
//! (unknown or malformed) goes on the bulk connection, where it delays no agreement message.
//! The core accepts a PREPARE or COMMIT before its PRE-PREPARE, as any network may reorder
//! them (the simulator delays each message independently).

use crate::counters::Counters;
use crate::queue::OutQueue;
use byzfs_bft::message::Tag;
use std::sync::Arc;

/// One of a replica link's two connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkLane {
    /// Agreement messages: small, and never behind a body.
    Control = 0,
    /// Bodies, PRE-PREPAREs, batches, state, introductions.
    Bulk = 1,
}

impl LinkLane {
    /// Both lanes, in index order.
    pub const ALL: [LinkLane; 2] = [LinkLane::Control, LinkLane::Bulk];

    /// The lane a frame goes on, by the tag of its protocol header (`"BZ"`, version 1, tag).
    pub fn of(frame: &[u8]) -> LinkLane {
        match Tag::of_frame(frame) {
            Some(t) if t.is_agreement() => LinkLane::Control,
            _ => LinkLane::Bulk,
        }
    }

    /// Its index in per-lane arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// For logs.
    pub fn name(self) -> &'static str {
        match self {
            LinkLane::Control => "control",
            LinkLane::Bulk => "bulk",
        }
    }
}

/// The outbound queues of a link to one peer, one per lane.
#[derive(Clone, Debug)]
pub(crate) struct PeerQueues {
    pub lanes: [OutQueue; 2],
}

impl PeerQueues {
    /// Queues `frame` on its lane ([`LinkLane::of`]), or drops and counts it if that lane is
    /// full: a full bulk queue never drops a control frame.
    pub fn push(&self, frame: Arc<[u8]>, counters: &Counters) -> bool {
        self.lanes[LinkLane::of(&frame).index()].push(frame, counters)
    }

    /// Whether the connection writers are gone (the node is stopping).
    #[cfg(feature = "byzantine")]
    pub fn is_closed(&self) -> bool {
        self.lanes.iter().all(OutQueue::is_closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::NetDrop;
    use crate::queue::out_queue;

    fn frame(tag: u8) -> Arc<[u8]> {
        Arc::from(&[b'B', b'Z', 1, tag, 0, 0][..])
    }

    #[test]
    fn agreement_messages_go_on_control_bodies_and_the_rest_on_bulk() {
        let lanes: Vec<(u8, &str)> = (0..=14u8)
            .map(|t| (t, LinkLane::of(&frame(t)).name()))
            .collect();
        assert_eq!(
            lanes,
            vec![
                (0, "bulk"),
                (1, "bulk"),     // REQUEST
                (2, "bulk"),     // REPLY (never on a replica link)
                (3, "bulk"),     // PRE-PREPARE, behind the bodies it names
                (4, "control"),  // PREPARE
                (5, "control"),  // COMMIT
                (6, "control"),  // CHECKPOINT
                (7, "control"),  // VIEW-CHANGE
                (8, "control"),  // NEW-VIEW
                (9, "control"),  // STATUS
                (10, "control"), // FETCH
                (11, "bulk"),    // BATCH-DATA
                (12, "bulk"),    // STATE-META
                (13, "bulk"),    // STATE-PART
                (14, "bulk"),
            ]
        );
        let intro = crate::intro::PREFIX;
        assert_eq!(LinkLane::of(&intro), LinkLane::Bulk);
        assert_eq!(
            LinkLane::of(&[b'B', b'Z', 2, 4]),
            LinkLane::Bulk,
            "version 2"
        );
        assert_eq!(LinkLane::of(&[]), LinkLane::Bulk);
    }

    #[tokio::test]
    async fn a_full_bulk_queue_drops_no_control_frame() {
        let counters = Counters::default();
        let (c, mut crx) = out_queue(4, 1 << 20);
        let (b, _brx) = out_queue(1, 1 << 20);
        let q = PeerQueues { lanes: [c, b] };
        assert!(q.push(frame(1), &counters));
        assert!(!q.push(frame(3), &counters), "bulk is full");
        assert!(q.push(frame(4), &counters));
        assert!(q.push(frame(9), &counters));
        assert_eq!(counters.drops(NetDrop::QueueFull), 1);
        drop(q);
        let mut out = Vec::new();
        crx.write_to(&mut out, &counters).await.unwrap();
        // Two framed control frames (4-byte length, 6 bytes each), in order.
        assert_eq!(out.len(), 2 * (4 + 6));
        assert_eq!((out[4 + 3], out[10 + 4 + 3]), (4, 9));
    }
}
