//! State transfer (docs/PROTOCOL.md §2.4), over a two-level partition tree: the checkpoint digest
//! is [`root_digest`] over per-partition digests, each an incremental (AdHASH-style) sum kept
//! by the state. The fetcher knows the target `(seq, digest)` from `f+1` matching stable
//! claims or from the NEW-VIEW decision, so at least one correct replica vouches for it; it
//! then takes partition digests from one replier (checked against the root), fetches only
//! the partitions that differ from its own, and checks each against its digest. A replier
//! that sends anything that does not check is replaced.
//!
//! **Chunks.** A partition's encoding can outgrow one message (a directory of many thousand
//! entries is one partition of the file service), so it travels in chunks of
//! `Config::state_chunk_bytes` (the last one shorter), from one replier: once the first chunk
//! tells the partition's length, the fetcher keeps [`CHUNKS_AHEAD`] more asked ahead of the
//! ones it joined, and checks the whole against the digest, as for a one-chunk partition. A
//! replier encodes a partition once for all its chunks ([`Serving`]). Asked one after the
//! other, a 26 KB partition in 1 KiB chunks took 26 round trips, longer than a cluster at
//! 1,400 batches a second lends a checkpoint for, and each fetch was cut off (simulator:
//! fs-partition 0, docs/PROTOCOL.md §2.4).
//! A faulty replier can claim a huge `total`: the fetcher refuses more than
//! [`PARTITION_BYTES_MAX`], chunks of any other length than the agreed one (a drip of tiny
//! chunks would stall it without ever reaching the digest check), and chunks from anyone but
//! its current replier, so a lie costs at most that much memory and one replier change.
//!
//! **Lent checkpoints.** A replier discards a checkpoint as soon as a newer one is stable,
//! and a cluster that runs ahead of a lagging replica makes checkpoints stable faster than a
//! fetch of many chunks can finish: each FETCH then found its checkpoint gone and the
//! lagging replica never caught up (simulator: bad-clients 0, transfer-power-cuts 949 with
//! clients that no longer wait for a silent replica, docs/PROTOCOL.md §2.4). So the
//! checkpoint a replier claims to a lagging peer (its stable CHECKPOINT in answer to a
//! STATUS) and the one a peer fetches from are *lent* to that peer ([`Lender`]): kept while
//! the peer keeps asking for it, within [`LEND_WINDOWS`] log windows of the stable
//! checkpoint, so what it costs is bounded whatever a faulty peer asks.

use super::timers::TimerKind;
use super::{Replica, LIB_PARTITIONS, M};
use crate::action::{DropReason, Event, StableVia};
use crate::crypto::Digest;
use crate::ids::{ReplicaId, Seq};
use crate::message::{BatchData, Fetch, FetchWhat, Message, StateMeta, StatePart};
use crate::service::{root_digest, Service};
use crate::time::Time;
use std::collections::{BTreeMap, BTreeSet};

/// Partition requests in flight at once.
const PARTS_IN_FLIGHT: usize = 32;

/// Chunks of one partition asked ahead of the one being joined (module docs, "Chunks").
const CHUNKS_AHEAD: usize = 4;

/// The fetch's retry gap doubles at most this often (`2^3 × 4` STATUS intervals: 4.8 s).
const FETCH_DOUBLINGS_MAX: u32 = 3;

/// Largest partition encoding a fetcher accepts (a claim beyond it is a replier's lie).
pub(crate) const PARTITION_BYTES_MAX: u64 = 1 << 30;

/// A checkpoint lent to a fetcher stays held while it is at most this many log windows
/// below the stable checkpoint (the undo records a store keeps for it grow with the
/// sequence numbers executed since, like the log itself).
pub(crate) const LEND_WINDOWS: u64 = 4;

/// A loan lapses this many STATUS intervals after the fetcher last asked for it: twice the
/// fetcher's longest retry gap (`FETCH_DOUBLINGS_MAX`), so a fetch that retries is not cut off.
const LEND_STATUS_INTERVALS: u32 = 4 << (FETCH_DOUBLINGS_MAX + 1);

/// A partition being served in chunks: checkpoint, partition and its encoding.
#[derive(Clone, Debug)]
pub(crate) struct Serving {
    seq: Seq,
    part: u32,
    data: Vec<u8>,
}

/// The serving side of state transfer: the partition being sent in chunks, and the
/// checkpoints lent to fetchers (module docs, "Lent checkpoints").
#[derive(Clone, Debug, Default)]
pub(crate) struct Lender {
    /// The partition being served in chunks, encoded once for all of its chunks.
    serving: Option<Serving>,
    /// Per fetcher: the checkpoint lent to it, and when the loan lapses.
    lent: BTreeMap<ReplicaId, (Seq, Time)>,
}

impl Lender {
    /// Lends checkpoint `seq` to `peer` until `until` (one loan per peer: the newest ask).
    pub fn lend(&mut self, peer: ReplicaId, seq: Seq, until: Time) {
        self.lent.insert(peer, (seq, until));
    }

    /// The oldest checkpoint to keep once `stable` is stable at time `now`: the oldest loan
    /// still running and within `span` of `stable`, or `stable`. Lapsed loans are dropped.
    pub fn keep_from(&mut self, stable: Seq, span: u64, now: Time) -> Seq {
        self.lent
            .retain(|_, &mut (seq, until)| until > now && seq.saturating_add(span) >= stable);
        self.lent
            .values()
            .map(|&(seq, _)| seq)
            .filter(|&seq| seq < stable)
            .min()
            .unwrap_or(stable)
    }
}

/// A partition received in part: its announced length, the bytes joined so far, the chunks
/// asked beyond them, and those of them that came early.
#[derive(Clone, Debug)]
pub(crate) struct Partial {
    total: u64,
    data: Vec<u8>,
    asked: BTreeSet<u64>,
    early: BTreeMap<u64, Vec<u8>>,
}

/// An ongoing fetch.
#[derive(Clone, Debug)]
pub(crate) struct FetchState {
    pub seq: Seq,
    pub digest: Digest,
    pub replier: ReplicaId,
    pub parts: Option<Vec<Digest>>,
    pub needed: BTreeSet<u32>,
    pub asked: BTreeSet<u32>,
    /// Partitions of which some chunks arrived (from the current replier).
    pub partial: BTreeMap<u32, Partial>,
    /// Retry timeouts since the last answer that checked (the retry gap doubles with them).
    pub timeouts: u32,
}

impl<S: Service> Replica<S> {
    fn svc_parts(&self) -> u32 {
        self.service.partition_count()
    }

    /// Starts (or retargets) a fetch of checkpoint `(seq, digest)`.
    pub(super) fn start_fetch(&mut self, seq: Seq, digest: Digest) {
        if self.fetch.as_ref().is_some_and(|f| f.seq >= seq) {
            return;
        }
        // Tentative results are about to be overwritten; undo them so the counters agree.
        self.rollback_tentative();
        let replier = self.pick_replier(None);
        self.fetch = Some(FetchState {
            seq,
            digest,
            replier,
            parts: None,
            needed: BTreeSet::new(),
            asked: BTreeSet::new(),
            partial: BTreeMap::new(),
            timeouts: 0,
        });
        self.timers.stop(TimerKind::ViewChange);
        tracing::debug!(replica = self.me, seq, "state transfer started");
        self.request_fetch();
    }

    fn pick_replier(&mut self, avoid: Option<ReplicaId>) -> ReplicaId {
        use rand::Rng;
        let n = self.n() as u32;
        loop {
            let r = self.rng.gen_range(0..n);
            if r != self.me && Some(r) != avoid {
                return r;
            }
        }
    }

    /// Sends the next requests of the current fetch and arms the retry timer.
    fn request_fetch(&mut self) {
        let Some(f) = self.fetch.as_mut() else { return };
        let (seq, replier) = (f.seq, f.replier);
        let mut asks = Vec::new();
        if f.parts.is_none() {
            asks.push(FetchWhat::StateMeta { seq });
        } else {
            let todo: Vec<u32> = f
                .needed
                .difference(&f.asked)
                .copied()
                .take(PARTS_IN_FLIGHT.saturating_sub(f.asked.len()))
                .collect();
            for part in todo {
                f.asked.insert(part);
                asks.push(FetchWhat::StatePart {
                    seq,
                    part,
                    offset: 0,
                });
            }
        }
        for what in asks {
            self.send_to(
                replier,
                &Message::Fetch(Fetch {
                    replica: self.me,
                    what,
                }),
            );
        }
        self.arm_fetch_timer();
    }

    /// The fetch's retry timer: a replier that leaves a request unanswered this long is
    /// replaced. Four STATUS intervals, doubled by each timeout since the last answer that
    /// checked, up to [`FETCH_DOUBLINGS_MAX`] times: at 1 Mb/s a 131 KB STATE-META takes
    /// more than a second, and a fixed 600 ms asked one replier after another for it and
    /// for 32 partitions each time, none of which could arrive in time (`slow-1`,
    /// BENCHMARKS.md).
    fn arm_fetch_timer(&mut self) {
        let timeouts = self.fetch.as_ref().map_or(0, |f| f.timeouts);
        let gap = self.config.status_interval * 4 * (1u32 << timeouts.min(FETCH_DOUBLINGS_MAX));
        let at = self.now + gap;
        self.timers.set(TimerKind::Fetch, at);
    }

    /// An answer of the current fetch checked: the next retry waits the shortest gap.
    fn fetch_progressed(&mut self) {
        if let Some(f) = self.fetch.as_mut() {
            f.timeouts = 0;
        }
    }

    /// The retry timer fired: nothing that checked came in time. The next wait is longer.
    pub(super) fn on_fetch_timer(&mut self) {
        if let Some(f) = self.fetch.as_mut() {
            f.timeouts = f.timeouts.saturating_add(1);
        }
        self.on_fetch_timeout();
    }

    /// No answer in time, or one that did not check: rotate the replier and ask again.
    pub(super) fn on_fetch_timeout(&mut self) {
        let Some(old) = self.fetch.as_ref().map(|f| f.replier) else {
            return;
        };
        let r = self.pick_replier(Some(old));
        if let Some(f) = self.fetch.as_mut() {
            f.replier = r;
            f.asked.clear();
            // The new replier starts each partition afresh: the old one may have lied.
            f.partial.clear();
        }
        self.request_fetch();
    }

    /// Lends checkpoint `seq` to `peer` (module docs, "Lent checkpoints").
    pub(super) fn lend_checkpoint(&mut self, peer: ReplicaId, seq: Seq) {
        let until = self.now + self.config.status_interval * LEND_STATUS_INTERVALS;
        self.lender.lend(peer, seq, until);
    }

    /// The oldest checkpoint to keep once `stable` is stable (loans to fetchers included).
    pub(super) fn keep_checkpoints_from(&mut self, stable: Seq) -> Seq {
        if self.mutated(M::NoCheckpointLoans) {
            return stable;
        }
        let span = self.config.log_window.saturating_mul(LEND_WINDOWS);
        self.lender.keep_from(stable, span, self.now)
    }

    /// Serves FETCH from a checkpoint we hold, and keeps it lent to the fetcher.
    pub(super) fn on_fetch(&mut self, m: Fetch) {
        let seq = match m.what {
            FetchWhat::StateMeta { seq } | FetchWhat::StatePart { seq, .. } => seq,
        };
        // Only a checkpoint still held below the stable one needs a loan.
        if seq <= self.log.last_stable && self.lib.checkpoint_digests(seq).is_some() {
            self.lend_checkpoint(m.replica, seq);
        }
        match m.what {
            FetchWhat::StateMeta { seq } => {
                let (Some(mut parts), Some(lib)) = (
                    self.service.checkpoint_partition_digests(seq),
                    self.lib.checkpoint_digests(seq),
                ) else {
                    return self.drop_input(DropReason::Stale);
                };
                parts.extend(lib);
                self.send_to(
                    m.replica,
                    &Message::StateMeta(StateMeta {
                        replica: self.me,
                        seq,
                        parts,
                    }),
                );
            }
            FetchWhat::StatePart { seq, part, offset } => {
                let cached = self
                    .lender
                    .serving
                    .as_ref()
                    .is_some_and(|s| s.seq == seq && s.part == part);
                if !cached {
                    let svc = self.svc_parts();
                    let data = if part < svc {
                        self.service.export_partition(seq, part)
                    } else {
                        self.lib.export_partition(seq, part - svc)
                    };
                    let Some(data) = data else {
                        return self.drop_input(DropReason::Stale);
                    };
                    self.lender.serving = Some(Serving { seq, part, data });
                }
                // `validate` keeps it within half a message (room for header and MAC).
                let chunk = self.config.state_chunk_bytes.max(1);
                let Some(s) = self.lender.serving.as_ref() else {
                    return;
                };
                let total = s.data.len();
                let Some(start) = usize::try_from(offset).ok().filter(|&o| o <= total) else {
                    return self.drop_input(DropReason::Invalid);
                };
                let end = start.saturating_add(chunk).min(total);
                let data = s.data[start..end].to_vec();
                if end == total {
                    // The last chunk (or the only one): the encoding is not needed again.
                    self.lender.serving = None;
                }
                self.send_to(
                    m.replica,
                    &Message::StatePart(StatePart {
                        replica: self.me,
                        seq,
                        part,
                        offset,
                        total: total as u64,
                        data,
                    }),
                );
            }
        }
    }

    /// Partition digests from the replier: accepted only if they hash to the agreed root.
    pub(super) fn on_state_meta(&mut self, m: StateMeta) {
        let total = self.svc_parts() + LIB_PARTITIONS;
        let Some(f) = self.fetch.as_ref() else {
            return self.drop_input(DropReason::Stale);
        };
        if m.seq != f.seq || f.parts.is_some() {
            return self.drop_input(DropReason::Stale);
        }
        let root_ok = root_digest(&m.parts) == f.digest || self.mutated(M::SkipStateMetaCheck);
        if m.parts.len() != total as usize || !root_ok {
            // A lying or stale replier: try another.
            self.drop_input(DropReason::Invalid);
            return self.on_fetch_timeout();
        }
        let mut mine = self.service.current_partition_digests();
        mine.extend(self.lib.current_digests());
        let needed: BTreeSet<u32> = (0..total)
            .filter(|&i| mine.get(i as usize) != Some(&m.parts[i as usize]))
            .collect();
        if let Some(f) = self.fetch.as_mut() {
            f.parts = Some(m.parts);
            f.needed = needed;
        }
        self.fetch_progressed();
        self.continue_fetch();
    }

    /// One chunk of a partition: joined to the earlier ones; the whole is imported only if
    /// it matches its authenticated digest.
    pub(super) fn on_state_part(&mut self, m: StatePart) {
        let Some(f) = self.fetch.as_mut() else {
            return self.drop_input(DropReason::Stale);
        };
        let Some(parts) = &f.parts else {
            return self.drop_input(DropReason::Stale);
        };
        // Chunks of a partition come from one replier, at the offsets asked: anything else
        // is late (an earlier replier, a repeated request).
        let partial = f.partial.get(&m.part);
        let have = partial.map_or(0, |p| p.data.len() as u64);
        let asked = m.offset == have || partial.is_some_and(|p| p.asked.contains(&m.offset));
        if m.seq != f.seq || !f.needed.contains(&m.part) || m.replica != f.replier || !asked {
            return self.drop_input(DropReason::Stale);
        }
        let expected = parts[m.part as usize];
        let end = m.offset.saturating_add(m.data.len() as u64);
        let known_total = partial.map(|p| p.total);
        // Every chunk but the last has the agreed length (the config is the cluster's).
        let chunk = self.config.state_chunk_bytes.max(1) as u64;
        let want = chunk.min(m.total.saturating_sub(m.offset));
        let bad = m.total > PARTITION_BYTES_MAX
            || m.data.len() as u64 != want
            || known_total.is_some_and(|t| t != m.total);
        if bad {
            self.drop_input(DropReason::Invalid);
            return self.on_fetch_timeout();
        }
        self.stats.state_chunks_fetched += 1;
        // The chunk is the replier's agreed length; whether the whole checks is known at
        // the end, but a replier sending well-formed chunks is answering.
        f.timeouts = 0;
        let whole = if m.offset == 0 && end == m.total {
            m.data
        } else {
            let p = f.partial.entry(m.part).or_insert_with(|| Partial {
                total: m.total,
                data: Vec::new(),
                asked: BTreeSet::new(),
                early: BTreeMap::new(),
            });
            p.asked.remove(&m.offset);
            p.early.insert(m.offset, m.data);
            // Join what is contiguous with the bytes so far.
            while let Some(next) = p.early.remove(&(p.data.len() as u64)) {
                p.data.extend_from_slice(&next);
            }
            if (p.data.len() as u64) < p.total {
                // Keep `CHUNKS_AHEAD` asked beyond what arrived.
                let mut at = p
                    .asked
                    .iter()
                    .chain(p.early.keys())
                    .max()
                    .map_or(p.data.len() as u64, |&o| o + chunk);
                let mut asks = Vec::new();
                while p.asked.len() < CHUNKS_AHEAD && at < p.total {
                    p.asked.insert(at);
                    asks.push(at);
                    at += chunk;
                }
                let (seq, part, replier) = (f.seq, m.part, f.replier);
                for offset in asks {
                    self.send_to(
                        replier,
                        &Message::Fetch(Fetch {
                            replica: self.me,
                            what: FetchWhat::StatePart { seq, part, offset },
                        }),
                    );
                }
                self.arm_fetch_timer();
                return;
            }
            f.partial
                .remove(&m.part)
                .map(|p| p.data)
                .unwrap_or_default()
        };
        let svc = self.svc_parts();
        let ok = if m.part < svc {
            self.service.import_partition(m.part, &whole, expected)
        } else {
            self.lib.import_partition(m.part - svc, &whole, expected)
        };
        if !ok {
            self.drop_input(DropReason::Invalid);
            return self.on_fetch_timeout();
        }
        self.stats.state_parts_fetched += 1;
        if let Some(f) = self.fetch.as_mut() {
            f.needed.remove(&m.part);
            f.asked.remove(&m.part);
        }
        self.continue_fetch();
    }

    fn continue_fetch(&mut self) {
        if self.fetch.as_ref().is_some_and(|f| f.needed.is_empty()) {
            self.finish_fetch();
        } else {
            self.request_fetch();
        }
    }

    /// The state now equals checkpoint `seq`: install it as stable and resume.
    fn finish_fetch(&mut self) {
        let Some(f) = self.fetch.take() else { return };
        self.timers.stop(TimerKind::Fetch);
        let mut parts = self.service.finish_import(f.seq);
        parts.extend(self.lib.finish_import(f.seq));
        let digest = root_digest(&parts);
        debug_assert!(
            digest == f.digest || self.mutated(M::SkipStateMetaCheck),
            "imported state must match the agreed checkpoint"
        );
        self.log.last_executed = f.seq;
        self.log.last_tentative = f.seq;
        self.log.seqno = self.log.seqno.max(f.seq);
        self.log.executed.clear();
        self.checkpoints.own.clear();
        self.checkpoints.set_own(f.seq, digest);
        if f.seq > self.log.last_stable {
            // Stores the checkpoint (`store_checkpoint`); with a service that keeps its own
            // state, execution waits for its record (`awaits_transfer_record`, §2.7).
            self.mark_stable(f.seq, StableVia::Transfer);
            if self.storage.store_state && self.service.persists_state() {
                self.storage.transferred = f.seq;
            }
        }
        // Forget requests the transferred reply cache shows as executed.
        let lib = &self.lib;
        self.requests
            .pending
            .retain(|c, (rid, _)| super::reply_cache::last(lib, *c).is_none_or(|(r, _)| r < *rid));
        self.stats.state_transfers += 1;
        tracing::debug!(replica = self.me, seq = f.seq, "state transfer done");
        self.event(Event::StateTransferred { seq: f.seq, digest });
        self.execute_committed();
        self.try_execute_tentative();
        self.drain_read_only();
        self.restart_vtimer();
        self.try_send_pre_prepare();
    }

    /// A batch body asked for in STATUS: stored if it matches a digest we are missing.
    pub(super) fn on_batch_data(&mut self, m: BatchData) {
        let Some(d) = crate::batch::batch_digest(&m.batch) else {
            return self.drop_input(DropReason::Invalid);
        };
        if !self.log.missing_batches.contains(&d) {
            return self.drop_input(DropReason::Stale);
        }
        // Form only: the digest was agreed (picked in a NEW-VIEW), so nondet is not re-checked.
        if self.validate_batch(&m.batch, 0, false) != Some(d) {
            return self.drop_input(DropReason::Invalid);
        }
        let carried = m.batch.clone();
        self.note_batch(d, m.batch);
        let seqs: Vec<Seq> = self
            .log
            .slots
            .iter()
            .filter(|(_, s)| s.pre_prepare.as_ref().is_some_and(|a| a.digest == d))
            .map(|(k, _)| *k)
            .collect();
        if self.view.has_new_view && seqs.iter().any(|&s| s > self.log.last_executed) {
            self.time_carried(&carried);
        }
        for seq in seqs {
            self.maybe_send_prepare(seq);
            self.check_prepared(seq);
        }
        self.execute_committed();
    }
}
