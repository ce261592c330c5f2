//! Restarting a replica from what it promised ([`super::durable`]; docs/PROTOCOL.md §3.6 #11).
//!
//! Two restarts exist:
//! * [`Replica::restart_from_durable`] models a crash on a live value (the simulator): the
//!   state of the latest checkpoint survives, with the promises.
//! * [`Replica::restore`] rebuilds a replica from what a disk driver stored ([`DurableState`]):
//!   the last stable checkpoint image, the bodies of batches voted for or executed above it,
//!   the promises, and the `Executed` records, which it re-executes in order
//!   (deterministically, without replies). Anything else is learned again from the other
//!   replicas (normal protocol, view change, state transfer).
//!
//! Both then follow the same rules: never reuse a sequence number voted on; a restarted
//! primary gives up its view, unless it is view 0 and its proposals are vouched for
//! ([`DurableState::proposals_durable`]), in which case it sends its PRE-PREPAREs again; a
//! replica whose unsynced votes are not vouched for sends no new PREPARE in the view it
//! restarts in; the votes it still holds for that view are rebuilt and resent on STATUS;
//! no read-only answers until the highest vote is executed again.

use super::durable::{record_seq, DurableState, RestoreError, StoredBatch, StoredCheckpoint};
use super::slot::Accepted;
use super::timers::TimerKind;
use super::{AuthChoice, Replica, StoredRequest, LIB_PARTITIONS};
use crate::action::{Event, PersistRecord};
use crate::config::Config;
use crate::crypto::{Digest, ReplicaKeys};
use crate::ids::Seq;
use crate::message::{Commit, Message, PrePrepare, Prepare, RequestView};
use crate::service::{root_digest, DiskWork, Service};
use crate::state::PartitionedState;
use crate::time::Time;
use crate::wire::Frame;
use rand::RngCore;
use std::collections::BTreeMap;
use std::sync::Arc;

impl<S: Service> Replica<S> {
    /// Models a crash and restart that keeps only what was durable: the promises and the
    /// state of the latest checkpoint (everything executed after it is lost and re-learned).
    pub fn restart_from_durable(mut self, now: Time) -> Self {
        let seed = self.rng.next_u64();
        let ckpt = self.service.rollback();
        let lib_ckpt = self.lib.rollback();
        debug_assert_eq!(ckpt, lib_ckpt);
        let latest = ckpt.unwrap_or(0);
        let mut r = Self::blank(self.config, self.keys, self.service, self.lib, seed, now);
        debug_assert_eq!(LIB_PARTITIONS, r.lib.partition_count());
        r.storage.store_state = self.storage.store_state;
        r.storage.parts = self.storage.parts;
        r.log.last_executed = latest;
        r.log.last_tentative = latest;
        r.log.last_stable = self.log.last_stable.min(latest);
        // What it restarts from is what a driver had recorded (§2.7).
        r.storage.recorded = r.log.last_stable;
        r.log.seqno = latest;
        r.checkpoints.own = self
            .checkpoints
            .own
            .range(..=latest)
            .map(|(s, d)| (*s, *d))
            .collect();
        r.storage.durable = self.storage.durable;
        // A crash: whatever the driver had not synced is gone.
        r.resume_from_durable(now, false);
        if r.log.last_stable == self.log.last_stable {
            r.claim_stable_checkpoint_again();
        }
        r
    }

    /// Rebuilds a replica from what its driver stored ([`DurableState`]): `service` must be
    /// in its initial state (as for [`Replica::new`]); the stored checkpoint is imported into
    /// it, the `Executed` batches above it are re-executed in order, and the promises are
    /// restored as by [`Replica::restart_from_durable`]. The result stores its state
    /// ([`Replica::set_store_state`] is on).
    pub fn restore(
        config: Config,
        keys: ReplicaKeys,
        service: S,
        durable: DurableState,
        rng_seed: u64,
        now: Time,
    ) -> Result<Self, RestoreError> {
        let mut r = Self::blank(
            config,
            keys,
            service,
            PartitionedState::new(LIB_PARTITIONS),
            rng_seed,
            now,
        );
        r.storage.store_state = true;
        match durable.checkpoint {
            None => {
                let digest = r.take_checkpoint(0);
                r.checkpoints.set_own(0, digest);
            }
            Some(c) => {
                r.import_checkpoint(c)?;
                r.claim_stable_checkpoint_again();
            }
        }
        for b in durable.batches {
            r.restore_batch(b);
        }
        let mut executed: BTreeMap<Seq, Digest> = BTreeMap::new();
        for rec in durable.records {
            match rec {
                PersistRecord::Executed { seq, digest } => {
                    executed.insert(seq, digest);
                }
                PersistRecord::View(_)
                | PersistRecord::Abstain(_)
                | PersistRecord::AbstainUpTo { .. }
                | PersistRecord::VoteHorizon(_)
                | PersistRecord::Prepared { .. }
                | PersistRecord::Proposed { .. }
                | PersistRecord::Voted { .. }
                | PersistRecord::Committed { .. }
                | PersistRecord::Certified { .. } => {
                    if record_seq(rec).is_none_or(|s| s > r.log.last_stable) {
                        r.storage.durable.record(rec);
                    }
                }
            }
        }
        // Re-execute the committed suffix, in order, while its bodies are complete.
        loop {
            let n = r.log.last_executed + 1;
            let Some(&d) = executed.get(&n) else { break };
            if !r.batch_complete(d) {
                break;
            }
            r.execute_batch(n, d, false, true);
            r.log.last_executed = n;
            r.log.last_tentative = n;
            r.log.executed.insert(n, d);
            // An `Executed` record is written only for a committed batch. Observers (the
            // simulator's agreement checker) learn a sequence number's content from a commit
            // paired with its execution; a replica that crashed between the record and its
            // `Committed` event would otherwise never report one for it.
            r.event(Event::Committed { seq: n, digest: d });
            if n.is_multiple_of(r.config.checkpoint_interval) {
                let cd = r.take_checkpoint(n);
                r.checkpoints.set_own(n, cd);
                r.log.executed = r.log.executed.split_off(&(n + 1));
            }
        }
        r.log.seqno = r.log.last_executed;
        r.resume_from_durable(now, durable.proposals_durable);
        r.check_invariants();
        Ok(r)
    }

    /// A primary that keeps its view after a restart (view 0, its proposals vouched for)
    /// rebuilds its PRE-PREPAREs above the stable checkpoint: the same view, sequence number
    /// and batch, from the promises and bodies it restored. It sends those above
    /// `last_executed` at once, so backups that never got one can prepare it instead of
    /// changing view; STATUS resends any of them to a backup that lags, as it resends any.
    fn resend_own_pre_prepares(&mut self) {
        let v = self.view.current;
        let mine: Vec<(Seq, Digest)> = self
            .log
            .slots
            .range(self.log.last_stable + 1..)
            .filter_map(|(&seq, slot)| {
                let d = slot.pp_info.iter().find(|&(_, &pv)| pv == v)?;
                Some((seq, *d.0))
            })
            .collect();
        for (seq, digest) in mine {
            let Some(body) = self.log.batches.get(&digest).cloned() else {
                continue; // Not stored: the backups' view change settles the slot.
            };
            let pp = Message::PrePrepare(PrePrepare {
                view: v,
                seq,
                batch: (*body).clone(),
            });
            let executed = seq <= self.log.last_executed;
            let frame = if executed {
                self.encode(&pp, AuthChoice::Authenticator)
            } else {
                self.broadcast(&pp)
            };
            let slot = self.log.slots.entry(seq).or_default();
            slot.pre_prepare = Some(Accepted {
                digest,
                frame: Some(frame),
            });
            if !executed {
                self.check_prepared(seq);
            }
        }
    }

    /// Rebuilds, from its durable promises of the view it restarts in, the PREPAREs and
    /// COMMITs this replica sent in it, as frames STATUS resends to a peer that lags
    /// (`resend_slots`). Without them a whole cluster restarted in its view could not help a
    /// replica that missed a batch the others executed: every vote was volatile, so it
    /// waited for the next checkpoint or a view change. Each is a message the replica
    /// already sent (its record was durable before the send), so resending it promises
    /// nothing new. They count as its own votes, but not as sent: a slot that prepares again
    /// still runs `check_prepared` (record, tentative execution, COMMIT) as before.
    fn rebuild_own_votes(&mut self) {
        let v = self.view.current;
        let me = self.me;
        let backup = !self.is_primary();
        // From the records themselves, not the log's Q- and P-information, which also holds
        // what other records imply: only a record stands for a message this replica sent.
        let votes: Vec<(Seq, Digest, bool)> = self
            .storage
            .durable
            .votes
            .range(self.log.last_stable + 1..)
            .flat_map(|(_, recs)| recs.iter())
            .filter_map(|rec| match *rec {
                PersistRecord::Prepared { view, seq, digest } if view == v && backup => {
                    Some((seq, digest, false))
                }
                PersistRecord::Committed { view, seq, digest } if view == v => {
                    Some((seq, digest, true))
                }
                _ => None,
            })
            .collect();
        for (seq, digest, commit) in votes {
            let msg = if commit {
                Message::Commit(Commit {
                    view: v,
                    seq,
                    digest,
                    replica: me,
                })
            } else {
                Message::Prepare(Prepare {
                    view: v,
                    seq,
                    digest,
                    replica: me,
                })
            };
            let frame = self.encode(&msg, AuthChoice::Authenticator);
            let slot = self.log.slots.entry(seq).or_default();
            if commit {
                slot.own_commit = Some(frame);
                slot.commits.insert(me, digest);
            } else {
                slot.own_prepare = Some(frame);
                slot.prepares.insert(me, digest);
            }
        }
    }

    /// For the driver, when a drain stores stable checkpoint `stored`
    /// ([`crate::action::StoreRecord::Checkpoint`]): makes a service that persists its own
    /// state durable, or begins to ([`Service::persist`]): the driver commits the record only
    /// after the returned work has run (`None`: at once). An error means the replica cannot
    /// go on.
    #[must_use = "the work must run, and be reported, before the record it guards"]
    pub fn persist_service(&mut self, stored: Seq) -> Result<Option<DiskWork>, String> {
        if self.service.persists_state() {
            self.service.persist(stored)
        } else {
            Ok(None)
        }
    }

    /// For the driver, after the oldest work the service handed out ran
    /// ([`Service::work_done`]); may hand out another. An error means the replica cannot go
    /// on.
    #[must_use = "the work must run, and be reported, before the record it guards"]
    pub fn service_work_done(&mut self) -> Result<Option<DiskWork>, String> {
        self.service.work_done()
    }

    /// For the driver, just after its commit that recorded stable checkpoint `stored`:
    /// tells a service that persists its own state ([`Service::recorded`]), which may hand
    /// out work. An error means the replica cannot go on.
    #[must_use = "the work must run, and be reported, before the record it guards"]
    pub fn service_recorded(&mut self, stored: Seq) -> Result<Option<DiskWork>, String> {
        if self.service.persists_state() {
            self.service.recorded(stored)
        } else {
            Ok(None)
        }
    }

    /// Turns on (or off) the emission of [`crate::action::StoreRecord`]s and `Executed`
    /// records, for a driver that keeps the state on disk so that [`Replica::restore`] can
    /// rebuild the replica. Off by default: memory drivers and the simulator do not pay for it.
    pub fn set_store_state(&mut self, on: bool) {
        self.storage.store_state = on;
    }

    /// Installs a stored stable checkpoint as the live state.
    fn import_checkpoint(&mut self, c: StoredCheckpoint) -> Result<(), RestoreError> {
        let svc = self.service.partition_count();
        let expected = svc + LIB_PARTITIONS;
        let found = u32::try_from(c.parts.len()).unwrap_or(u32::MAX);
        if found != expected {
            return Err(RestoreError::PartitionCount { expected, found });
        }
        let digests: Vec<Digest> = c.parts.iter().map(|(d, _)| *d).collect();
        if root_digest(&digests) != c.digest {
            return Err(RestoreError::BadCheckpoint(c.seq));
        }
        // A service that persists its state reopens at the checkpoint itself; an image
        // stored before it did (every service partition's content present) still imports.
        let reopen = self.service.persists_state()
            && c.parts[..svc as usize]
                .iter()
                .any(|(_, data)| data.is_empty());
        let mut parts = Vec::with_capacity(c.parts.len());
        if reopen {
            parts = self
                .service
                .reopen(c.seq)
                .map_err(|why| RestoreError::ServiceState { seq: c.seq, why })?;
        }
        for (i, (d, data)) in (0u32..).zip(c.parts) {
            let ok = if i < svc {
                reopen || self.service.import_partition(i, &data, d)
            } else {
                self.lib.import_partition(i - svc, &data, d)
            };
            if !ok {
                return Err(RestoreError::BadPartition(i));
            }
        }
        if !reopen {
            parts = self.service.finish_import(c.seq);
        }
        parts.extend(self.lib.finish_import(c.seq));
        if parts != digests {
            return Err(RestoreError::BadCheckpoint(c.seq));
        }
        self.checkpoints.set_own(c.seq, c.digest);
        // The driver's record names it: the window this replica votes in starts here.
        self.storage.recorded = c.seq;
        self.log.last_stable = c.seq;
        self.log.last_executed = c.seq;
        self.log.last_tentative = c.seq;
        self.storage.parts = digests;
        Ok(())
    }

    /// Puts a stored batch body (and its big requests) back where execution and relaying
    /// find them. Bodies whose digest does not match are ignored (they were never stored so).
    fn restore_batch(&mut self, b: StoredBatch) {
        if b.seq <= self.log.last_stable
            || crate::batch::batch_digest(&b.body).is_none_or(|d| d != b.digest)
        {
            return;
        }
        for frame in b.big {
            let Ok(f) = Frame::parse(&frame, usize::MAX) else {
                continue;
            };
            let Some(req) = RequestView::decode(f.body) else {
                continue;
            };
            let stored = StoredRequest {
                client: req.client,
                rid: req.rid,
                after: req.after,
                digest: f.header.body_digest,
                big: true,
                frame: Arc::from(frame.as_slice()),
                // Checked again before this replica, as primary, would propose it.
                sig_checked: false,
                relayed: false,
            };
            self.requests.store.insert(stored.digest, stored);
        }
        self.storage.batches.insert(b.digest, b.seq);
        self.log.batches.insert(b.digest, Arc::new(b.body));
    }

    /// The rules shared by both restarts, once state, checkpoints and `durable` are set:
    /// rebuild the log from the promises, then resume in the durable view.
    /// `proposals_durable`: see [`DurableState::proposals_durable`].
    fn resume_from_durable(&mut self, now: Time, proposals_durable: bool) {
        self.view.current = self.storage.durable.view;
        self.view.has_new_view = self.view.current == 0;
        let records: Vec<PersistRecord> = self
            .storage
            .durable
            .votes
            .values()
            .flatten()
            .copied()
            .collect();
        for rec in records {
            match rec {
                PersistRecord::Prepared { view, seq, digest } => {
                    self.log
                        .slots
                        .entry(seq)
                        .or_default()
                        .note_pre_prepared(digest, view);
                }
                PersistRecord::Committed { view, seq, digest } => {
                    let slot = self.log.slots.entry(seq).or_default();
                    slot.note_pre_prepared(digest, view);
                    // A COMMIT is sent only with a prepared certificate: restore P-info.
                    if slot.prepared_info.is_none_or(|(pv, _)| pv < view) {
                        slot.prepared_info = Some((view, digest));
                    }
                }
                // `DurableLog::record` keeps these as `Prepared`.
                PersistRecord::Proposed { .. }
                | PersistRecord::Voted { .. }
                | PersistRecord::Abstain(_)
                | PersistRecord::AbstainUpTo { .. }
                | PersistRecord::VoteHorizon(_)
                | PersistRecord::View(_)
                | PersistRecord::Executed { .. }
                | PersistRecord::Certified { .. } => {}
            }
        }
        let stable = self.log.last_stable;
        self.log.slots.retain(|&s, _| s > stable);
        // It may have replied to writes up to its highest vote, then lost them with the
        // volatile state: no read-only answers until it has executed that far again.
        let highest_vote = self
            .storage
            .durable
            .votes
            .keys()
            .next_back()
            .copied()
            .unwrap_or(0);
        self.read_only.floor = highest_vote;
        // Never assign a sequence number it may already have proposed (that would be an
        // honest replica equivocating).
        self.log.seqno = self.log.seqno.max(highest_vote);
        self.timers
            .set(TimerKind::Status, now + self.config.status_interval);
        self.monitor_view_start();
        if !proposals_durable {
            // Some unsynced `Voted` records may be lost, all at or below the durable horizon
            // (or the stable checkpoint, if higher, as before any horizon was written): no
            // new PREPARE there in this view, now or after a later restart (`abstains_at`).
            // Never below an earlier abstention in this view (drivers keep the last written).
            let view = self.view.current;
            let earlier = self
                .storage
                .durable
                .abstain
                .filter(|a| a.0 == view)
                .map_or(0, |a| a.1);
            let seq = self
                .storage
                .durable
                .horizon
                .max(self.log.last_stable)
                .max(earlier);
            // Nothing to abstain from below sequence number 1 (a replica that never voted
            // nor took a checkpoint): no record.
            if seq > 0 {
                self.persist(PersistRecord::AbstainUpTo { view, seq });
            }
        }
        if self.view.has_new_view {
            self.rebuild_own_votes();
        }
        if self.is_primary() && (self.view.current > 0 || !proposals_durable) {
            // It may have sent a NEW-VIEW for this view that it cannot rebuild identically
            // (its VIEW-CHANGE set is gone), or PRE-PREPAREs whose unsynced `Proposed`
            // records are lost (so `seqno` may be below what it assigned): give the view up
            // rather than risk proposing twice. Its VIEW-CHANGE tells its backups to follow
            // at once (`after_view_change_input`).
            self.start_view_change(self.view.current + 1);
        } else if self.is_primary() {
            self.resend_own_pre_prepares();
        } else if self.view.current > 0 {
            // Votes cast in this view mean it had installed the view's NEW-VIEW, which is
            // volatile. A VIEW-CHANGE for this view cannot carry them (its entries must be
            // from earlier views), so it waits for a peer to send the NEW-VIEW again. If no
            // peer has it (every replica restarted), their STATUS messages say so and start
            // its view-change timer (`on_status`), which moves it to the next view, whose
            // VIEW-CHANGE may carry them.
            let v = self.view.current;
            let voted_here = self.log.slots.values().any(|slot| {
                slot.pp_info.values().any(|&pv| pv >= v)
                    || slot.prepared_info.is_some_and(|(pv, _)| pv >= v)
            });
            if !voted_here {
                // The VIEW-CHANGE we sent may never have arrived; say it again from what is
                // durable (P-info restored from COMMIT records, Q-info from PREPARE records).
                self.resend_view_change();
            }
        }
    }
}
