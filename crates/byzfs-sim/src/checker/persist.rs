//! Persist before send (PROTOCOL.md §3.6 #11; STYLE.md principle 3; `Action` ordering
//! contract): every vote a correct replica sends must follow the durable record of that
//! promise — PRE-PREPARE and PREPARE after `Prepared{view, seq, digest}` (a PRE-PREPARE's digest
//! is `batch_digest` of its batch), COMMIT after `Committed{..}`, VIEW-CHANGE after
//! `View(view)`. Records survive a restart with state and are lost by a restart without.
//! Every frame a correct replica sends must also parse and decode. Frames another replica
//! authenticated and this one only relays verbatim (e.g. the primary's PRE-PREPARE
//! retransmitted in answer to a STATUS) are not its votes and are not checked.

use super::Sink;
use byzfs_bft::batch::batch_digest;
use byzfs_bft::message::{Message, Tag};
use byzfs_bft::wire::Frame;
use byzfs_bft::{PersistRecord, Principal, Time};
use std::collections::{BTreeMap, BTreeSet};

/// Checker name.
pub const NAME: &str = "persist-before-send";

/// The persist-before-send checker.
#[derive(Clone, Debug)]
pub struct PersistBeforeSend {
    durable: BTreeMap<usize, BTreeSet<PersistRecord>>,
    max_frame: usize,
}

impl PersistBeforeSend {
    /// A checker parsing frames of at most `max_frame` bytes.
    pub fn new(max_frame: usize) -> Self {
        PersistBeforeSend {
            durable: BTreeMap::new(),
            max_frame,
        }
    }

    /// `inst` made `rec` durable.
    pub fn record(&mut self, inst: usize, rec: PersistRecord) {
        self.durable.entry(inst).or_default().insert(rec);
    }

    /// `inst` restarted.
    pub fn on_restart(&mut self, inst: usize, with_state: bool) {
        if !with_state {
            self.durable.remove(&inst);
        }
    }

    /// Correct instance `inst` sends `bytes`.
    pub fn check_send(&mut self, sink: &mut Sink, now: Time, inst: usize, bytes: &[u8]) {
        let frame = match Frame::parse(bytes, self.max_frame) {
            Ok(f) => f,
            Err(e) => {
                sink.report(
                    NAME,
                    now,
                    format!("r{inst} sent a frame that does not parse: {e:?}"),
                );
                return;
            }
        };
        let vote = matches!(
            frame.header.tag,
            Tag::PrePrepare | Tag::Prepare | Tag::Commit | Tag::ViewChange
        );
        if !vote || frame.header.sender != Principal::Replica(inst as u32) {
            return;
        }
        let msg = match frame.decode() {
            Ok(m) => m,
            Err(e) => {
                sink.report(
                    NAME,
                    now,
                    format!(
                        "r{inst} sent a {:?} that does not decode: {e:?}",
                        frame.header.tag
                    ),
                );
                return;
            }
        };
        let need = match &msg {
            Message::PrePrepare(pp) => match batch_digest(&pp.batch) {
                Some(digest) => PersistRecord::Prepared {
                    view: pp.view,
                    seq: pp.seq,
                    digest,
                },
                None => {
                    sink.report(
                        NAME,
                        now,
                        format!("r{inst} sent a PRE-PREPARE with a malformed batch"),
                    );
                    return;
                }
            },
            Message::Prepare(p) => PersistRecord::Prepared {
                view: p.view,
                seq: p.seq,
                digest: p.digest,
            },
            Message::Commit(c) => PersistRecord::Committed {
                view: c.view,
                seq: c.seq,
                digest: c.digest,
            },
            Message::ViewChange(vc) => PersistRecord::View(vc.view),
            _ => return,
        };
        if !self.durable.get(&inst).is_some_and(|d| d.contains(&need)) {
            sink.report(
                NAME,
                now,
                format!(
                    "r{inst} sent {:?} before persisting {need:?}",
                    frame.header.tag
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use byzfs_bft::message::{BatchBody, Commit, PrePrepare, Prepare, ViewChange};
    use byzfs_bft::wire::{encode, Auth, Envelope};
    use byzfs_bft::{Digest, Principal};

    fn frame(m: Message) -> Vec<u8> {
        encode(Envelope::new(Principal::Replica(1), 0), &m, Auth::None)
    }

    #[test]
    fn votes_need_their_record_first() {
        let mut p = PersistBeforeSend::new(1 << 20);
        let mut s = Sink::new(1, "t");
        let d = Digest([3; 32]);
        let prepare = frame(Message::Prepare(Prepare {
            view: 0,
            seq: 1,
            digest: d,
            replica: 1,
        }));
        p.check_send(&mut s, Time(0), 1, &prepare);
        assert_eq!(s.violations().len(), 1, "PREPARE before its record");
        p.record(
            1,
            PersistRecord::Prepared {
                view: 0,
                seq: 1,
                digest: d,
            },
        );
        p.check_send(&mut s, Time(0), 1, &prepare);
        assert_eq!(s.violations().len(), 1);

        let commit = frame(Message::Commit(Commit {
            view: 0,
            seq: 1,
            digest: d,
            replica: 1,
        }));
        p.check_send(&mut s, Time(0), 1, &commit);
        assert_eq!(
            s.violations().len(),
            2,
            "a Prepared record does not cover a COMMIT"
        );
        p.record(
            1,
            PersistRecord::Committed {
                view: 0,
                seq: 1,
                digest: d,
            },
        );
        p.check_send(&mut s, Time(0), 1, &commit);
        assert_eq!(s.violations().len(), 2);

        let batch = BatchBody {
            requests: vec![],
            big: vec![],
            nondet: vec![1, 2],
        };
        let bd = batch_digest(&batch).expect("well formed");
        let pp = frame(Message::PrePrepare(PrePrepare {
            view: 0,
            seq: 2,
            batch,
        }));
        p.record(
            1,
            PersistRecord::Prepared {
                view: 0,
                seq: 2,
                digest: bd,
            },
        );
        p.check_send(&mut s, Time(0), 1, &pp);
        assert_eq!(s.violations().len(), 2);

        let vc = frame(Message::ViewChange(ViewChange {
            view: 1,
            replica: 1,
            last_stable: 0,
            checkpoints: vec![],
            prepared: vec![],
            pre_prepared: vec![],
        }));
        p.check_send(&mut s, Time(0), 1, &vc);
        assert_eq!(s.violations().len(), 3);
        p.record(1, PersistRecord::View(1));
        p.check_send(&mut s, Time(0), 1, &vc);
        assert_eq!(s.violations().len(), 3);

        // A restart with state keeps the records; without, they are gone.
        p.on_restart(1, true);
        p.check_send(&mut s, Time(0), 1, &vc);
        assert_eq!(s.violations().len(), 3);
        p.on_restart(1, false);
        p.check_send(&mut s, Time(0), 1, &vc);
        assert_eq!(s.violations().len(), 4);

        p.check_send(&mut s, Time(0), 1, b"garbage");
        assert_eq!(s.violations().len(), 5);

        // Relaying another replica's vote verbatim is not a vote.
        let theirs = encode(
            Envelope::new(Principal::Replica(2), 0),
            &Message::Prepare(Prepare {
                view: 0,
                seq: 9,
                digest: d,
                replica: 2,
            }),
            Auth::None,
        );
        p.check_send(&mut s, Time(0), 1, &theirs);
        assert_eq!(s.violations().len(), 5);
    }
}
