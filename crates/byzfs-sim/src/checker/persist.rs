//! Persist before send (docs/PROTOCOL.md §3.6 #11; docs/STYLE.md principle 3; `Action` ordering
//! contract): every vote a correct replica sends must follow the durable record of that
//! promise — PRE-PREPARE and PREPARE after `Prepared{view, seq, digest}` (a PRE-PREPARE's digest
//! is `batch_digest` of its batch), COMMIT after `Committed{..}`, VIEW-CHANGE after
//! `View(view)`. Records survive a restart with state and are lost by a restart without.
//! The exceptions are the primary's PRE-PREPARE and a backup's PREPARE, whose `Proposed`
//! and `Voted` records need only have been appended (the driver syncs them later: see
//! `PersistRecord::Proposed` and `PersistRecord::Voted`); a crash may lose them, which the
//! core answers by never proposing or preparing again in the view it restarts in. What
//! catches a broken answer is the check that a correct replica never sends PRE-PREPAREs,
//! or PREPAREs, of two digests for one view and sequence number, across its restarts.
//! A backup's PREPARE must also be at or below its durable `VoteHorizon`, so that what a
//! power cut takes is bounded where a restored backup abstains (`PersistRecord::AbstainUpTo`).
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
    /// `Proposed` and `Voted` records appended since the last restart, synced or not.
    proposed: BTreeMap<usize, BTreeSet<PersistRecord>>,
    /// The digest each correct replica voted for at each (kind, view, seq), across its
    /// restarts with state: a second one is an honest replica equivocating.
    votes: BTreeMap<(usize, bool, u64, u64), byzfs_bft::Digest>,
    /// Each replica's highest durable `VoteHorizon`.
    horizon: BTreeMap<usize, u64>,
    max_frame: usize,
}

impl PersistBeforeSend {
    /// A checker parsing frames of at most `max_frame` bytes.
    pub fn new(max_frame: usize) -> Self {
        PersistBeforeSend {
            durable: BTreeMap::new(),
            proposed: BTreeMap::new(),
            votes: BTreeMap::new(),
            horizon: BTreeMap::new(),
            max_frame,
        }
    }

    /// `inst` made `rec` durable.
    pub fn record(&mut self, inst: usize, rec: PersistRecord) {
        if let PersistRecord::VoteHorizon(h) = rec {
            let e = self.horizon.entry(inst).or_default();
            *e = (*e).max(h);
        }
        self.durable.entry(inst).or_default().insert(rec);
    }

    /// `inst` appended `rec`, a `Proposed` or `Voted`, without a sync.
    pub fn proposed(&mut self, inst: usize, rec: PersistRecord) {
        self.proposed.entry(inst).or_default().insert(rec);
    }

    /// `inst` restarted.
    pub fn on_restart(&mut self, inst: usize, with_state: bool) {
        self.proposed.remove(&inst);
        if !with_state {
            self.durable.remove(&inst);
            self.horizon.remove(&inst);
            self.votes.retain(|k, _| k.0 != inst);
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
                Some(digest) => PersistRecord::Proposed {
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
            Message::Prepare(p) => {
                let horizon = self.horizon.get(&inst).copied().unwrap_or(0);
                if p.seq > horizon {
                    sink.report(
                        NAME,
                        now,
                        format!(
                            "r{inst} sent a PREPARE for seq {} above its durable vote horizon \
                             {horizon}",
                            p.seq
                        ),
                    );
                }
                PersistRecord::Voted {
                    view: p.view,
                    seq: p.seq,
                    digest: p.digest,
                }
            }
            Message::Commit(c) => PersistRecord::Committed {
                view: c.view,
                seq: c.seq,
                digest: c.digest,
            },
            Message::ViewChange(vc) => PersistRecord::View(vc.view),
            _ => return,
        };
        // PRE-PREPAREs and PREPAREs (a PREPARE's kind is `false`).
        if let PersistRecord::Proposed {
            view, seq, digest, ..
        }
        | PersistRecord::Voted { view, seq, digest } = need
        {
            let kind = matches!(need, PersistRecord::Proposed { .. });
            let before = *self.votes.entry((inst, kind, view, seq)).or_insert(digest);
            if before != digest {
                sink.report(
                    NAME,
                    now,
                    format!(
                        "r{inst} sent a {:?} for view {view} seq {seq} with another digest \
                         than before (equivocation by a correct replica)",
                        frame.header.tag
                    ),
                );
            }
        }
        let has = |m: &BTreeMap<usize, BTreeSet<PersistRecord>>, r: &PersistRecord| {
            m.get(&inst).is_some_and(|d| d.contains(r))
        };
        let ok = has(&self.durable, &need)
            || (need.is_lazy_vote()
                && (has(&self.proposed, &need) || has(&self.durable, &need.as_promise())));
        if !ok {
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
    fn a_prepare_needs_a_durable_horizon_at_or_above_it() {
        let mut p = PersistBeforeSend::new(1 << 20);
        let mut s = Sink::new(1, "t");
        let d = Digest([3; 32]);
        let prepare = |seq| {
            frame(Message::Prepare(Prepare {
                view: 0,
                seq,
                digest: d,
                replica: 1,
            }))
        };
        for seq in [5, 6] {
            p.record(
                1,
                PersistRecord::Voted {
                    view: 0,
                    seq,
                    digest: d,
                },
            );
        }
        p.check_send(&mut s, Time(0), 1, &prepare(5));
        assert_eq!(s.violations().len(), 1, "no horizon yet");
        p.record(1, PersistRecord::VoteHorizon(5));
        p.check_send(&mut s, Time(0), 1, &prepare(5));
        assert_eq!(s.violations().len(), 1);
        p.check_send(&mut s, Time(0), 1, &prepare(6));
        assert_eq!(s.violations().len(), 2, "above the horizon");
        // Lost with the disk.
        p.on_restart(1, false);
        p.record(
            1,
            PersistRecord::Voted {
                view: 0,
                seq: 5,
                digest: d,
            },
        );
        p.check_send(&mut s, Time(0), 1, &prepare(5));
        assert_eq!(s.violations().len(), 3);
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
        p.record(1, PersistRecord::VoteHorizon(1));
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

    #[test]
    fn a_proposal_needs_only_its_append_and_never_two_digests() {
        let mut p = PersistBeforeSend::new(1 << 20);
        let mut s = Sink::new(1, "t");
        let pp = |nondet: u8| {
            let batch = BatchBody {
                requests: vec![],
                big: vec![],
                nondet: vec![nondet],
            };
            let d = batch_digest(&batch).expect("well formed");
            let f = frame(Message::PrePrepare(PrePrepare {
                view: 0,
                seq: 1,
                batch,
            }));
            (f, d)
        };
        let (first, d1) = pp(1);
        p.check_send(&mut s, Time(0), 1, &first);
        assert_eq!(s.violations().len(), 1, "not even appended");
        let proposed = |digest| PersistRecord::Proposed {
            view: 0,
            seq: 1,
            digest,
        };
        p.proposed(1, proposed(d1));
        p.check_send(&mut s, Time(0), 1, &first);
        assert_eq!(s.violations().len(), 1, "appended, not synced: enough");
        // A crash tore the record off; the restarted primary proposes seq 1 again.
        p.on_restart(1, true);
        let (second, d2) = pp(2);
        p.proposed(1, proposed(d2));
        p.check_send(&mut s, Time(0), 1, &second);
        assert_eq!(s.violations().len(), 2, "a second digest for one slot");
        assert!(s.violations()[1].to_string().contains("equivocation"));
    }
}
