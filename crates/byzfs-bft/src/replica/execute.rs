//! Execution: tentative and committed (docs/PROTOCOL.md §1.6, §1.7), read-only (§1.8), replies
//! with a designated replier (§1.12), rollback of tentative execution.

use super::{reply_cache, Replica, StoredRequest, M, RO_QUEUE_MAX};
use crate::action::{Action, DropReason, Event};
use crate::crypto::Digest;
use crate::ids::{ClientId, Principal, RequestId, Seq};
use crate::message::{Message, Reply, RequestView};
use crate::service::Service;
use crate::wire::{Auth, Envelope, Frame, REPLIER_ALL};
use std::sync::Arc;

impl<S: Service> Replica<S> {
    pub(super) fn cached_rid(&self, c: ClientId) -> Option<(RequestId, Seq)> {
        reply_cache::last(&self.lib, c)
    }

    /// Tentative execution (§1.7): batch `n` once prepared, if every earlier batch has
    /// committed and executed and no other tentative execution is outstanding.
    pub(super) fn try_execute_tentative(&mut self) {
        if !self.config.tentative_execution
            || self.fetch.is_some()
            || !self.view.has_new_view
            || self.awaits_transfer_record()
        {
            return;
        }
        loop {
            let ok_order = self.log.last_tentative == self.log.last_executed
                || self.mutated(M::TentativeBeforeCommitted);
            let n = self.log.last_tentative + 1;
            if !ok_order || !self.is_prepared(n) {
                return;
            }
            let Some(d) = self
                .log
                .slots
                .get(&n)
                .and_then(|s| s.pre_prepare.as_ref())
                .map(|a| a.digest)
            else {
                return;
            };
            self.execute_batch(n, d, true, false);
            self.log.last_tentative = n;
        }
    }

    /// `execute_committed` (§1.15): run every committed batch in order, take checkpoints,
    /// then let tentative execution, read-only requests and the primary continue.
    pub(super) fn execute_committed(&mut self) {
        let mut progressed = false;
        self.foreign.forget_through(self.log.last_executed);
        while self.fetch.is_none() && !self.awaits_transfer_record() {
            let n = self.log.last_executed + 1;
            let ours = self
                .log
                .slots
                .get(&n)
                .and_then(|s| s.pre_prepare.as_ref())
                .map(|a| a.digest)
                .filter(|_| self.is_committed(n));
            // Else `2f+1` COMMITs of a view we left may certify it (`catch_up.rs`).
            let Some(d) = ours.or_else(|| self.foreign_committed(n)) else {
                break;
            };
            if self.storage.store_state {
                // Before the replies: a restart re-executes it from the stored checkpoint.
                self.store_batch(n, d);
                self.persist(crate::action::PersistRecord::Executed { seq: n, digest: d });
            }
            if self.log.last_tentative < n {
                self.execute_batch(n, d, false, false);
                self.log.last_tentative = n;
            } else if let Some(b) = self.log.batches.get(&d).cloned() {
                // Executed tentatively earlier: its requests are done only now.
                for (c, rid) in self.batch_requests(&b) {
                    self.request_done(c, rid);
                }
            }
            self.log.last_executed = n;
            self.log.executed.insert(n, d);
            self.stats.batches_committed += 1;
            self.event(Event::Committed { seq: n, digest: d });
            if let Some(b) = self.log.batches.get(&d).cloned() {
                self.unpropose(&b);
            }
            if n.is_multiple_of(self.config.checkpoint_interval) {
                self.make_checkpoint(n);
            }
            progressed = true;
        }
        if progressed {
            self.foreign.forget_through(self.log.last_executed);
            self.try_execute_tentative();
            self.drain_read_only();
            self.try_send_pre_prepare();
        }
    }

    fn unpropose(&mut self, b: &crate::message::BatchBody) {
        for r in &b.requests {
            if let Some(d) = super::normal::request_digest(r) {
                self.requests.proposed.remove(&d);
            }
        }
        for d in &b.big {
            self.requests.proposed.remove(d);
        }
        for id in self.batch_requests(b) {
            self.requests.proposed_ids.remove(&id);
        }
    }

    /// Executes batch `n` (digest `d`): each request not already in the reply cache runs once.
    /// `replay` re-executes a committed batch after a rollback: no replies are sent.
    pub(super) fn execute_batch(&mut self, n: Seq, d: Digest, tentative: bool, replay: bool) {
        let Some(batch) = self.log.batches.get(&d).cloned() else {
            // `is_prepared` requires the batch body, so it is present; if not, executing
            // nothing would diverge, so this is a broken invariant.
            panic!("replica {}: executing batch {n} without its body", self.me);
        };
        if !replay {
            self.store_batch(n, d);
        }
        // Counted for the throughput watch already if it committed ahead of a gap.
        let credited = !replay && self.monitor_take_credit(n);
        let mut ran: Vec<(ClientId, RequestId)> = Vec::new();
        let mut ran_digests: Vec<Digest> = Vec::new();
        let big_frames: Vec<Arc<[u8]>> = batch
            .big
            .iter()
            .filter_map(|bd| self.requests.store.get(bd).map(|r| r.frame.clone()))
            .collect();
        let frames = batch
            .requests
            .iter()
            .map(|v| v.as_slice())
            .chain(big_frames.iter().map(|a| &a[..]));
        let mut progress_clients = Vec::new();
        self.service.begin_batch(n, self.log.last_executed);
        for bytes in frames {
            // Batches were validated when accepted; a frame that still fails to parse is
            // skipped identically at every correct replica (parsing is deterministic).
            let Ok(f) = Frame::parse(bytes, usize::MAX) else {
                continue;
            };
            let Some(req) = RequestView::decode(f.body) else {
                continue;
            };
            let c = req.client;
            let cached = reply_cache::entry(&self.lib, c);
            if req.rid <= cached.last {
                if !replay {
                    self.resend_cached_reply(c, req.rid, f.header.replier);
                }
                continue;
            }
            if !self.request_in_window(req.rid, req.acked, req.after) {
                continue;
            }
            if req.after > cached.last && !self.mutated(M::ExecuteGaps) {
                // Its predecessor has not run (lost or reordered on the way to the primary):
                // skipped here, identically everywhere; the client retransmits it (§1.6).
                if !replay {
                    self.stats.requests_out_of_order += 1;
                }
                continue;
            }
            if !replay && !credited {
                self.monitor_executed(1 + (req.op.len() / super::monitor::UNIT_BYTES) as u64);
            }
            let result = self.service.execute(c, req.op, &batch.nondet);
            if !replay {
                self.send_reply(c, req.rid, &result, tentative, f.header.replier);
                // A tentative execution is not progress yet: the batch may never commit under
                // a faulty primary, and the view-change timer must keep running until it does
                // (simulator: equivocate-slow 8 and 14).
                if !tentative {
                    progress_clients.push((c, req.rid));
                }
            }
            reply_cache::store(&mut self.lib, c, req.rid, req.acked, n, result);
            ran.push((c, req.rid));
            ran_digests.push(f.header.body_digest);
        }
        if !replay {
            self.stats.requests_executed += ran.len() as u64;
        }
        self.event(Event::Executed {
            seq: n,
            digest: d,
            nondet: batch.nondet.clone(),
            requests: ran,
            request_digests: ran_digests,
            tentative,
        });
        for (c, rid) in progress_clients {
            self.request_done(c, rid);
        }
    }

    /// The `(client, rid)` of every request in a batch (inlined and big ones we hold).
    fn batch_requests(&self, b: &crate::message::BatchBody) -> Vec<(ClientId, RequestId)> {
        let big = b
            .big
            .iter()
            .filter_map(|d| self.requests.store.get(d).map(|r| (r.client, r.rid)));
        b.requests
            .iter()
            .filter_map(|bytes| {
                let f = Frame::parse(bytes, usize::MAX).ok()?;
                RequestView::decode(f.body).map(|r| (r.client, r.rid))
            })
            .chain(big)
            .collect()
    }

    /// A client's request executed: forget it as pending and restart the view-change timer
    /// if others still wait (§3.1).
    fn request_done(&mut self, c: ClientId, rid: RequestId) {
        match self.requests.pending.get(&c).copied() {
            Some((prid, pd)) if prid <= rid => {
                self.requests.pending.remove(&c);
                self.monitor_served(c);
                if let Some(r) = self.requests.store.get(&pd) {
                    if !r.big {
                        self.requests.store.remove(&pd);
                    }
                }
                self.time_next_ready(c);
                self.vc.progress();
                self.restart_vtimer();
            }
            Some(_) => {
                // An earlier request of a client with several in flight ran: progress too,
                // or a steady window would look like a stalled primary (§1.6).
                self.monitor_served(c);
                self.vc.progress();
                self.restart_vtimer();
            }
            // Its requests stored here may have waited for this one.
            None => self.time_next_ready(c),
        }
    }

    /// Undoes tentative execution (§1.7): restore the latest checkpoint, then re-execute the
    /// committed batches after it, so only the tentative suffix is lost.
    pub(super) fn rollback_tentative(&mut self) {
        if self.log.last_tentative <= self.log.last_executed {
            return;
        }
        let to = self.service.rollback().unwrap_or(0);
        let lib_to = self.lib.rollback().unwrap_or(0);
        debug_assert_eq!(to, lib_to, "service and library checkpoints move together");
        self.stats.rollbacks += 1;
        self.event(Event::RolledBack { to });
        // Guarded: `range` panics on an inclusive range whose start exceeds its end.
        let redo: Vec<(Seq, Digest)> = if to < self.log.last_executed {
            self.log
                .executed
                .range(to + 1..=self.log.last_executed)
                .map(|(s, d)| (*s, *d))
                .collect()
        } else {
            Vec::new()
        };
        for (n, d) in redo {
            self.execute_batch(n, d, false, true);
            self.event(Event::Committed { seq: n, digest: d });
        }
        self.log.last_tentative = self.log.last_executed;
    }

    /// Read-only optimisation (§1.8): run now if the replica is not fetching, holds the new
    /// view, has executed everything up to the `read_only.floor`, and the result equals the
    /// result on the committed state (see [`Self::try_read_only`]); otherwise queue it with
    /// the floor as it is now (a later rise does not concern it, so reads are not starved by a
    /// busy pipeline).
    pub(super) fn on_read_only(&mut self, r: StoredRequest) {
        let floor = self.read_only.floor;
        if self.try_read_only(floor, &r) {
            return;
        }
        if self.read_only.queue.len() < RO_QUEUE_MAX {
            self.stats.read_only_queued += 1;
            self.read_only.queue.push_back((floor, r));
        } else {
            self.drop_input(DropReason::QueueFull);
        }
    }

    /// Answers read-only request `r` (queued with `floor`) if it may run now; returns whether
    /// it did (a malformed request counts as done: it is dropped).
    ///
    /// With no tentative execution outstanding, the live state is the committed state. With
    /// one (`last_tentative = last_executed + 1`, §1.7 allows no more), the service runs the
    /// read and keeps the result only if the read touched nothing the uncommitted batch
    /// wrote (the *per-object floor*): then it is the committed state's result, and equally
    /// the result after `last_tentative`, which the floor may require. Answering from the
    /// tentative state as such is unsafe (ARCHITECTURE.md Deviations 6a has the counterexample).
    fn try_read_only(&mut self, floor: Seq, r: &StoredRequest) -> bool {
        let floor = if self.mutated(M::IgnoreReadOnlyFloor) {
            0
        } else {
            floor
        };
        if self.fetch.is_some() || !self.view.has_new_view || self.log.last_tentative < floor {
            return false;
        }
        let Ok(f) = Frame::parse(&r.frame, usize::MAX) else {
            return true;
        };
        let Some(req) = RequestView::decode(f.body) else {
            return true;
        };
        let on_tentative = self.log.last_tentative > self.log.last_executed;
        let result = if !on_tentative || self.mutated(M::ReadOnlyOnTentative) {
            self.service.execute_read_only(req.client, req.op)
        } else {
            match self.service.execute_read_only_committed(
                req.client,
                req.op,
                self.log.last_executed,
            ) {
                Some(result) => result,
                None => return false,
            }
        };
        self.stats.read_only_executed += 1;
        if on_tentative {
            self.stats.read_only_on_tentative += 1;
        }
        // The event follows the reply (a checker reads it, nothing waits on it) and reuses
        // its digest: hashing a large result twice would cost a read as much again.
        if let Some(result_digest) =
            self.send_reply(req.client, req.rid, &result, true, f.header.replier)
        {
            self.event(Event::ReadOnlyExecuted {
                client: req.client,
                rid: req.rid,
                committed: self.log.last_executed,
                on_tentative,
                result_digest,
            });
        }
        true
    }

    /// Answers the queued reads that may run now, in order; stops at the first that may not
    /// (one client's reads stay in order, and the queue is short).
    pub(super) fn drain_read_only(&mut self) {
        while let Some((floor, r)) = self.read_only.queue.pop_front() {
            if !self.try_read_only(floor, &r) {
                self.read_only.queue.push_front((floor, r));
                break;
            }
        }
    }

    /// Sends a REPLY: the full result from the designated replier (or everyone, or when it
    /// is small), the digest only from the others (§1.12).
    pub(super) fn send_reply(
        &mut self,
        c: ClientId,
        rid: RequestId,
        result: &[u8],
        tentative: bool,
        replier: u8,
    ) -> Option<Digest> {
        let (to_client, _) = self.keys.clients.get(&c)?;
        let full = replier == REPLIER_ALL
            || replier as u32 == self.me
            || result.len() <= self.config.full_reply_threshold;
        let reply = Reply {
            view: self.view.current,
            rid,
            client: c,
            replica: self.me,
            tentative,
            result_digest: Digest::of(result),
            result: full.then(|| result.to_vec()),
        };
        let digest = reply.result_digest;
        let env = Envelope::new(Principal::Replica(self.me), self.config.epoch);
        let bytes: Arc<[u8]> =
            crate::wire::encode(env, &Message::Reply(reply), Auth::Mac(to_client)).into();
        self.out.push_back(Action::SendClient { client: c, bytes });
        Some(digest)
    }

    /// Answers a retransmitted request from the reply cache, if its result is still kept;
    /// committed iff its batch is.
    pub(super) fn resend_cached_reply(&mut self, c: ClientId, rid: RequestId, replier: u8) -> bool {
        let Some((seq, result)) =
            reply_cache::result(&self.lib, c, rid).map(|(s, r)| (s, r.to_vec()))
        else {
            return false;
        };
        let tentative = seq > self.log.last_executed;
        self.send_reply(c, rid, &result, tentative, replier);
        true
    }

    /// Whether a request's ids are well formed and within the client's window: `acked` and
    /// `after` below `rid`, and `rid - acked <= client_window`, which bounds the reply cache
    /// (`reply_cache`). Checked on receipt and again at execution (a faulty primary may
    /// propose anything).
    pub(super) fn request_in_window(
        &self,
        rid: RequestId,
        acked: RequestId,
        after: RequestId,
    ) -> bool {
        acked < rid
            && after < rid
            && (rid - acked <= self.config.client_window || self.mutated(M::IgnoreAckedBound))
    }

    /// Whether a request of client `c` that must follow `after` can run here now: `after` ran
    /// (ids run in the client's order, so the reply cache's last id tells).
    pub(super) fn request_ready(&self, c: ClientId, after: RequestId) -> bool {
        after <= reply_cache::last(&self.lib, c).map_or(0, |(rid, _)| rid)
    }

    /// Times the requests of `batch`, carried into this view (a NEW-VIEW's pick) at a slot
    /// not yet executed here, that can run here (§3.1). Their clients may have been
    /// answered by replicas that ran them before a crash and so retransmit nothing: no
    /// client's copy would start the timer, and a view whose replicas cannot commit them
    /// (one abstains after a power cut) would never be left (simulator `total-crash` seed
    /// 17684). Agreed batches only: a faulty client cannot make them.
    pub(super) fn time_carried(&mut self, batch: &crate::message::BatchBody) {
        let inline = batch.requests.iter().filter_map(|bytes| {
            let d = super::normal::request_digest(bytes)?;
            let f = Frame::parse(bytes, usize::MAX).ok()?;
            let r = RequestView::decode(f.body)?;
            Some((r.client, r.rid, r.after, d))
        });
        let big = batch.big.iter().filter_map(|d| {
            self.requests
                .store
                .get(d)
                .map(|r| (r.client, r.rid, r.after, *d))
        });
        let ids: Vec<(ClientId, RequestId, RequestId, Digest)> = inline.chain(big).collect();
        for (c, rid, after, d) in ids {
            let last = self.cached_rid(c).map_or(0, |(r, _)| r);
            if rid > last && after <= last {
                self.add_pending(c, rid, d);
            }
        }
    }

    /// Times the newest stored request of client `c` that became ready (see `on_request`).
    fn time_next_ready(&mut self, c: ClientId) {
        let last = reply_cache::last(&self.lib, c).map_or(0, |(rid, _)| rid);
        let next = self
            .requests
            .store
            .after(c, last)
            .filter(|r| r.after <= last && !r.relayed)
            .map(|r| (r.rid, r.digest))
            .max();
        if let Some((rid, d)) = next {
            self.add_pending(c, rid, d);
        }
    }

    /// How many results the reply cache keeps for client `c` (the simulator checks that it
    /// never exceeds `Config::client_window`).
    pub fn cached_results(&self, c: ClientId) -> usize {
        reply_cache::cached(&self.lib, c)
    }
}
