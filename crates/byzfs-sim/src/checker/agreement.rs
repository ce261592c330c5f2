//! INV-AGREE (docs/PROTOCOL.md §6.6): for every sequence number, all correct replicas that
//! committed it committed the same batch digest, and executed the same requests with the same
//! non-deterministic input. Also ByzzFuzz's *integrity* (§5.2): a correct replica never commits
//! two different digests at one sequence number.
//!
//! Bookkeeping: per replica, the executions not yet committed (`Executed`, discarded by
//! `RolledBack{to}` above `to`); a `Committed{seq, digest}` pairs with the execution of the same
//! digest at `seq`. The first correct commit of a sequence number fixes the agreed history.

use super::history::{AgreedHistory, Content, Entry};
use super::Sink;
use byzfs_bft::{Digest, Event, Seq, Time};
use std::collections::btree_map::Entry as MapEntry;
use std::collections::BTreeMap;

/// Checker name.
pub const NAME: &str = "agreement";

#[derive(Clone, Debug, Default)]
struct Log {
    execs: BTreeMap<Seq, (Digest, Content)>,
    committed: BTreeMap<Seq, Digest>,
}

/// The agreement checker and the agreed history it builds.
#[derive(Clone, Debug, Default)]
pub struct Agreement {
    logs: BTreeMap<usize, Log>,
    /// The agreed history.
    pub history: AgreedHistory,
}

impl Agreement {
    /// An event of correct replica instance `inst`. Returns a sequence number whose content
    /// just became known.
    pub fn on_event(&mut self, sink: &mut Sink, now: Time, inst: usize, ev: &Event) -> Option<Seq> {
        let log = self.logs.entry(inst).or_default();
        match ev {
            Event::Executed {
                seq,
                digest,
                nondet,
                requests,
                request_digests,
                ..
            } => {
                let content = Content {
                    nondet: nondet.clone(),
                    requests: requests.clone(),
                    digests: request_digests.clone(),
                };
                if log.committed.get(seq) == Some(digest) {
                    // Re-executed after the commit (e.g. replay from a checkpoint).
                    return self.learn(sink, now, inst, *seq, *digest, Some(content));
                }
                log.execs.insert(*seq, (*digest, content));
                None
            }
            Event::RolledBack { to } => {
                let committed = &log.committed;
                log.execs
                    .retain(|s, _| *s <= *to || committed.contains_key(s));
                None
            }
            Event::Committed { seq, digest } => {
                if let Some(prev) = log.committed.insert(*seq, *digest) {
                    if prev != *digest {
                        sink.report(
                            NAME,
                            now,
                            format!("r{inst} committed two digests at seq {seq}: {prev:?} then {digest:?}"),
                        );
                    }
                }
                let content = match log.execs.remove(seq) {
                    Some((d, c)) if d == *digest => Some(c),
                    Some((d, _)) => {
                        sink.report(
                            NAME,
                            now,
                            format!("r{inst} executed {d:?} at seq {seq} but committed {digest:?} (no rollback between)"),
                        );
                        None
                    }
                    None => None,
                };
                self.learn(sink, now, inst, *seq, *digest, content)
            }
            _ => None,
        }
    }

    fn learn(
        &mut self,
        sink: &mut Sink,
        now: Time,
        inst: usize,
        seq: Seq,
        digest: Digest,
        content: Option<Content>,
    ) -> Option<Seq> {
        match self.history.entries.entry(seq) {
            MapEntry::Vacant(v) => {
                let known = content.is_some();
                v.insert(Entry {
                    digest,
                    content,
                    first: inst,
                    at: now,
                });
                known.then_some(seq)
            }
            MapEntry::Occupied(mut o) => {
                let e = o.get_mut();
                if e.digest != digest {
                    sink.report(
                        NAME,
                        now,
                        format!(
                            "seq {seq}: r{inst} committed {digest:?} but r{} committed {:?} (at t={} µs)",
                            e.first,
                            e.digest,
                            e.at.as_micros()
                        ),
                    );
                    return None;
                }
                match (&e.content, content) {
                    (None, Some(c)) => {
                        e.content = Some(c);
                        Some(seq)
                    }
                    (Some(prev), Some(c)) if *prev != c => {
                        sink.report(
                            NAME,
                            now,
                            format!(
                                "seq {seq} digest {digest:?}: r{inst} executed requests {:?} nondet {:02x?} but \
                                 the agreed content is requests {:?} nondet {:02x?}",
                                c.requests, c.nondet, prev.requests, prev.nondet
                            ),
                        );
                        None
                    }
                    _ => None,
                }
            }
        }
    }

    /// `inst` restarted: its volatile executions are gone.
    pub fn on_restart(&mut self, inst: usize) {
        if let Some(l) = self.logs.get_mut(&inst) {
            l.execs.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(b: u8) -> Digest {
        Digest([b; 32])
    }
    fn exec(seq: Seq, digest: Digest, reqs: &[(u64, u64)]) -> Event {
        Event::Executed {
            seq,
            digest,
            nondet: vec![1],
            requests: reqs.to_vec(),
            request_digests: reqs.iter().map(|_| Digest([0; 32])).collect(),
            tentative: false,
        }
    }
    fn sink() -> Sink {
        Sink::new(1, "test")
    }

    #[test]
    fn same_digests_agree_and_fill_history() {
        let mut a = Agreement::default();
        let mut s = sink();
        for r in 0..3 {
            a.on_event(&mut s, Time(1), r, &exec(1, d(1), &[(7, 1)]));
            a.on_event(
                &mut s,
                Time(1),
                r,
                &Event::Committed {
                    seq: 1,
                    digest: d(1),
                },
            );
        }
        assert!(!s.any(), "{:?}", s.violations());
        assert_eq!(
            a.history.content(1).map(|c| c.requests.clone()),
            Some(vec![(7, 1)])
        );
    }

    #[test]
    fn different_digests_at_one_seq_is_a_violation() {
        let mut a = Agreement::default();
        let mut s = sink();
        a.on_event(
            &mut s,
            Time(1),
            0,
            &Event::Committed {
                seq: 3,
                digest: d(1),
            },
        );
        a.on_event(
            &mut s,
            Time(2),
            1,
            &Event::Committed {
                seq: 3,
                digest: d(2),
            },
        );
        assert_eq!(s.violations().len(), 1);
        assert_eq!(s.violations()[0].checker, NAME);
    }

    #[test]
    fn same_digest_different_content_is_a_violation() {
        let mut a = Agreement::default();
        let mut s = sink();
        a.on_event(&mut s, Time(1), 0, &exec(1, d(1), &[(7, 1)]));
        a.on_event(
            &mut s,
            Time(1),
            0,
            &Event::Committed {
                seq: 1,
                digest: d(1),
            },
        );
        a.on_event(&mut s, Time(1), 1, &exec(1, d(1), &[(7, 2)]));
        a.on_event(
            &mut s,
            Time(1),
            1,
            &Event::Committed {
                seq: 1,
                digest: d(1),
            },
        );
        assert_eq!(s.violations().len(), 1);
    }

    #[test]
    fn rolled_back_tentative_execution_does_not_count() {
        let mut a = Agreement::default();
        let mut s = sink();
        // Tentatively executed d(9) at 5, rolled back to 4, then executed and committed d(1).
        a.on_event(&mut s, Time(1), 0, &exec(5, d(9), &[(7, 3)]));
        a.on_event(&mut s, Time(1), 0, &Event::RolledBack { to: 4 });
        a.on_event(
            &mut s,
            Time(1),
            0,
            &Event::Committed {
                seq: 5,
                digest: d(1),
            },
        );
        assert!(!s.any());
        // Without the rollback the mismatch is caught.
        a.on_event(&mut s, Time(1), 1, &exec(6, d(9), &[]));
        a.on_event(
            &mut s,
            Time(1),
            1,
            &Event::Committed {
                seq: 6,
                digest: d(1),
            },
        );
        assert_eq!(s.violations().len(), 1);
    }

    #[test]
    fn double_commit_by_one_replica_is_a_violation() {
        let mut a = Agreement::default();
        let mut s = sink();
        a.on_event(
            &mut s,
            Time(1),
            2,
            &Event::Committed {
                seq: 1,
                digest: d(1),
            },
        );
        a.on_event(
            &mut s,
            Time(1),
            2,
            &Event::Committed {
                seq: 1,
                digest: d(1),
            },
        );
        assert!(!s.any(), "re-committing the same digest is fine");
        a.on_event(
            &mut s,
            Time(1),
            2,
            &Event::Committed {
                seq: 1,
                digest: d(2),
            },
        );
        assert!(s.any());
    }
}
