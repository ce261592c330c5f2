//! Normal case: REQUEST, PRE-PREPARE, PREPARE, COMMIT (docs/PROTOCOL.md §1.5, §1.9, §1.10, §1.14).

use super::slot::{Accepted, Unverified};
use super::{Replica, StoredRequest, LOOSE_REQUESTS_MAX, M};
use crate::action::{DropReason, Event, PersistRecord};
use crate::batch::{batch_digest, null_digest};
use crate::client::FLAG_RELAY;
use crate::crypto::Digest;
use crate::ids::{ClientId, Principal, RequestId, Seq};
use crate::message::{BatchBody, Commit, Message, PrePrepare, Prepare, Request, RequestView};
use crate::service::Service;
use crate::wire::{AuthKind, Frame, HEADER_LEN};
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

/// Most big-request digests in one batch.
const BIG_PER_BATCH_MAX: usize = 1024;

impl<S: Service> Replica<S> {
    /// §1.5 "on REQUEST": reply-cache check, read-only path, queue (primary) or forward and
    /// start the view-change timer (backup).
    ///
    /// Authentication follows Aardvark's pipeline (docs/PROTOCOL.md §5.3), cheapest check first:
    /// the MAC, then the reply cache, then — for a signing client — the signature, before the
    /// request may enter the ordering path. Everything a correct replica queues, inlines,
    /// forwards or starts its view-change timer for is thus verifiable by every correct
    /// replica: a faulty client can neither make backups wait for a request the primary drops
    /// (framing the primary) nor make the primary propose a request backups cannot
    /// authenticate (stalling the batch, §1.14). A request with a bad MAC but a good signature
    /// is accepted (forwarded copies and fetched bodies arrive with other replicas' MACs).
    ///
    /// Where our MAC already vouches for the request (its client not blacklisted) and we do not
    /// yet vouch for it to anyone, the signature check is deferred: at a backup, a read-write
    /// request is only stored, forwarded (the primary checks the signature itself) and timed,
    /// and before the view-change timer may move us on, or before we propose it as a new
    /// primary, its signature is checked (`signature_checked`). A correct client's request is
    /// thus verified once, by the primary, instead of at every replica. A read-only request on
    /// our MAC, and a frame identical to one already verified, skip it too.
    pub(super) fn on_request(&mut self, frame: &Frame<'_>, req: Request, bytes: &[u8]) {
        if req.op.len() > self.config.op_bytes_max {
            return self.drop_input(DropReason::Invalid);
        }
        let c = req.client;
        let signs = self.client_signs(c);
        let mac_ok = self.client_mac_ok(frame);
        if !mac_ok && !signs {
            return self.drop_input(DropReason::BadAuth);
        }
        let big = req.op.len() > self.config.big_request_threshold;
        // A big request the reply cache shows as superseded will not run, but a batch in our
        // log may still name its body, which we need to prepare and execute that batch (it
        // was ordered before the newer request executed): found by the simulator with a
        // faulty client sending stale request ids, where the body was refused forever.
        if !self.request_in_window(req.rid, req.acked, req.after) {
            return self.drop_input(DropReason::Invalid);
        }
        let mut needed_body = false;
        if req.rid <= super::reply_cache::entry(&self.lib, c).last {
            needed_body = big && self.body_needed(&frame.header.body_digest);
            if !needed_body {
                // Answered again if the result is still kept; otherwise the client has moved
                // past it (its `acked`) and this is an old copy.
                if mac_ok && self.resend_cached_reply(c, req.rid, frame.header.replier) {
                    return;
                }
                // Which request, for the operator: the runtime's drop line says only why.
                tracing::debug!(
                    replica = self.me,
                    client = c,
                    rid = req.rid,
                    "old request dropped: its reply is no longer kept"
                );
                return self.drop_input(DropReason::Stale);
            }
        }
        let read_only_flag = frame.header.flags & 1 != 0;
        let read_only = read_only_flag
            && self.config.read_only_optimisation
            && self.service.is_read_only(&req.op);
        let trusted_mac = mac_ok && !self.requests.blacklist.contains(&c);
        let verified_before = self
            .requests
            .store
            .get(&frame.header.body_digest)
            .is_some_and(|r| r.sig_checked && *r.frame == *bytes);
        // The signature is needed unless this exact frame was verified before, or our MAC
        // (from a client not blacklisted) vouches for a request we need not vouch for: a
        // read-only one, or any signed one at a backup (checked later if it must be; see
        // above). An unsigned frame can never be ordered, so a backup refuses it now.
        let signed = frame.header.auth == AuthKind::SignedAuthenticator;
        let vouched = trusted_mac && (read_only || (signed && !self.is_primary()));
        let must_sign = signs && !verified_before && !vouched;
        if must_sign && !self.client_request_signed(frame, mac_ok) {
            return self.drop_input(DropReason::BadAuth);
        }
        let sig_checked = !signs || verified_before || must_sign;
        if !sig_checked && !read_only {
            self.stats.client_signatures_deferred += 1;
        }
        let stored = StoredRequest {
            frame: Arc::from(bytes),
            client: c,
            rid: req.rid,
            after: req.after,
            digest: frame.header.body_digest,
            big,
            sig_checked,
            relayed: frame.header.flags & FLAG_RELAY != 0,
        };
        let first_receipt = !self.requests.store.contains_key(&stored.digest);
        let flagged = stored.relayed;
        if needed_body {
            // Only the body: it is not queued, forwarded or waited for, but passed on down
            // the relay's fan-out (its PRE-PREPARE came straight from the primary, ahead of
            // it: `relay_fan_out.rs`).
            if let Err(why) = self.store_request(stored, false) {
                return self.drop_input(why);
            }
            if first_receipt && flagged {
                self.pass_on_relayed(frame.header.body_digest);
            }
            return self.on_body_arrived(frame.header.body_digest);
        }
        if read_only {
            return self.on_read_only(stored);
        }
        // Only a request that cannot run yet counts against its client's share; a body a
        // logged batch names is stored whatever the share: the batch cannot run without it
        // (a quota on it stalled bad-clients 0 for good).
        let exempt =
            self.request_ready(c, stored.after) || (stored.big && self.body_in_log(&stored.digest));
        let quota = !exempt;
        if let Err(why) = self.store_request(stored.clone(), quota) {
            return self.drop_input(why);
        }
        if stored.big {
            // Its pre-prepare may have arrived first and be waiting for this body.
            self.on_body_arrived(stored.digest);
        }
        // Primary and backups alike run the view-change timer for it (see `restart_vtimer`)
        // once it can run: a request whose predecessor has not run here is timed when that
        // one has (`request_done`), so one that follows a request never sent frames no one.
        // No replica times a relayed body (Deviation 33) until the client's own copy comes
        // by its retransmission: it may cross a slow link ahead of the bodies relayed after
        // it and of the PRE-PREPARE naming them all (backups timing it from its arrival
        // voted out every primary at 5 Mb/s), and the primary waits for it to reach the
        // backups (a 1 MiB body needs 25 s at 1 Mb/s, and the primary's own timer moved the
        // cluster to a new view after 5). A primary that relays but does not order is caught
        // when the client retransmits to everyone, as one that sits on small requests is.
        if self.request_ready(c, stored.after) && !stored.relayed {
            self.add_pending(c, stored.rid, stored.digest);
        }
        // A big body the client sent to the primary alone (`FLAG_RELAY`) goes on once, to
        // the backups of the relay's fan-out, ahead of the PRE-PREPARE naming it on the same
        // links; each backup passes it on once, to the backup the fan-out's places after it
        // (`relay_fan_out.rs`), never back to the primary. A client whose view is behind gets
        // its body to the primary by `forward_late_big_requests` or its retransmission to
        // everyone. A body a logged batch already names is not relayed again by a primary (a
        // new primary fetching one it lacks; the copy keeps the flag).
        let relay = stored.big
            && first_receipt
            && flagged
            && self.view.has_new_view
            && self.is_primary()
            && !self.body_in_log(&stored.digest);
        if stored.big && first_receipt && flagged && !self.is_primary() {
            self.pass_on_relayed(stored.digest);
        }
        if self.is_primary() {
            if relay {
                self.stats.bodies_relayed += 1;
                self.relay_onward(stored.digest, stored.frame.clone());
            }
            if !self.requests.proposed.contains(&stored.digest)
                && !self.requests.queue.contains(&stored.digest)
            {
                self.requests.queue.push_back(stored.digest);
            }
            self.try_send_pre_prepare();
        } else if !stored.big && first_receipt {
            // A backup gets a small request only when its client retransmits it to every
            // replica: its signature is checked before it goes on, so a faulty client's
            // badly signed flood is stopped (and the client blacklisted) at the first frame
            // rather than passed on to the primary at every backup (`bench attack`,
            // bad-signatures).
            if !self.signature_checked(stored.digest) {
                self.restart_vtimer();
                return self.drop_input(DropReason::BadAuth);
            }
            // Forward the client's own frame once: its authenticator covers the primary too.
            // (Forwarding every copy loops between two replicas that disagree on the view,
            // each sending to the other as "primary"; simulator: twins 1746.)
            let primary = self.primary();
            self.send_frame(primary, stored.frame.clone());
        }
    }

    /// A big request's body arrived: slots whose batch names it may now prepare or commit.
    pub(super) fn on_body_arrived(&mut self, d: Digest) {
        let waiting: Vec<Seq> = self
            .log
            .slots
            .iter()
            .filter_map(|(&seq, s)| s.pre_prepare.as_ref().map(|a| (seq, a.digest)))
            .filter(|(_, bd)| self.log.batches.get(bd).is_some_and(|b| b.big.contains(&d)))
            .map(|(seq, _)| seq)
            .collect();
        for seq in waiting {
            self.maybe_send_prepare(seq);
            self.check_prepared(seq);
        }
        self.execute_committed();
    }

    /// Whether a batch in the log names big request `d` whose body we lack.
    fn body_needed(&self, d: &Digest) -> bool {
        !self.requests.store.contains_key(d) && self.body_in_log(d)
    }

    /// Whether a batch in our log names big request body `d`.
    pub(super) fn body_in_log(&self, d: &Digest) -> bool {
        if self.foreign_bodies().contains(d) {
            return true;
        }
        self.log.slots.values().any(|s| {
            [
                s.pre_prepare.as_ref().map(|a| a.digest),
                s.unverified.as_ref().map(|u| u.digest),
            ]
            .into_iter()
            .flatten()
            .any(|bd| self.log.batches.get(&bd).is_some_and(|b| b.big.contains(d)))
        })
    }

    /// Stores a client's request (or a big body a logged batch needs: not `quota`, then).
    /// Refused if the store is full, or with `quota` if the client already has its share
    /// stored (`Replica::client_share`).
    pub(super) fn store_request(
        &mut self,
        r: StoredRequest,
        quota: bool,
    ) -> Result<(), DropReason> {
        if let Some(held) = self.requests.store.get_mut(&r.digest) {
            // The client's own copy after a relayed one: waited on from now.
            let relayed = held.relayed && r.relayed;
            // A verified copy replaces one whose signature was deferred (same body).
            if r.sig_checked && !held.sig_checked {
                *held = r;
            }
            held.relayed = relayed;
            return Ok(());
        }
        if self.requests.store.len() >= LOOSE_REQUESTS_MAX {
            return Err(DropReason::QueueFull);
        }
        if quota
            && self.stored_requests(r.client) >= self.client_share()
            && !self.mutated(M::NoClientQuota)
        {
            return Err(DropReason::ClientQuota);
        }
        self.requests.store.insert(r.digest, r);
        Ok(())
    }

    /// The primary assigns sequence numbers while the window allows (§1.9), never at or
    /// below its stable checkpoint: a new primary whose checkpoint became stable after it
    /// sent its VIEW-CHANGE can install a NEW-VIEW that ends below it (simulator: vote-cuts
    /// 8, a twin), and a slot there is below its low-water mark.
    pub(super) fn try_send_pre_prepare(&mut self) {
        while self.is_primary()
            && self.view.has_new_view
            && self.fetch.is_none()
            && self.log.seqno >= self.log.last_stable
            && (!self.requests.queue.is_empty() || self.log.pad_to > self.log.seqno)
            && self.log.seqno < self.log.last_executed + self.config.batch_window
            && self.log.seqno < self.window_base() + self.config.log_window
        {
            let seq = self.log.seqno + 1;
            let batch = match self.build_batch() {
                Some(mut batch) => {
                    batch.nondet = self.service.propose_nondet(seq, self.now);
                    batch
                }
                // The null batch (§3.5): no requests, no non-deterministic input.
                None if self.log.pad_to >= seq => BatchBody::default(),
                None => break,
            };
            let Some(digest) = batch_digest(&batch) else {
                // Every inlined frame came from our own request store, which holds only
                // parsed frames; a failure here means a bug, but dropping is still safe.
                break;
            };
            self.log.seqno = seq;
            let v = self.view.current;
            let n_reqs = (batch.requests.len() + batch.big.len()) as u64;
            // Not synced before the send: see `PersistRecord::Proposed`.
            self.persist(PersistRecord::Proposed {
                view: v,
                seq,
                digest,
            });
            let pp = Message::PrePrepare(PrePrepare {
                view: v,
                seq,
                batch,
            });
            let frame = self.broadcast(&pp);
            let Message::PrePrepare(pp) = pp else {
                unreachable!("constructed above")
            };
            self.note_batch(digest, pp.batch);
            // The promise was recorded before the body was held: store the body now (a driver
            // commits a drain's records before its sends).
            self.store_batch(seq, digest);
            let slot = self.log.slots.entry(seq).or_default();
            slot.pre_prepare = Some(Accepted {
                digest,
                frame: Some(frame),
            });
            slot.note_pre_prepared(digest, v);
            self.stats.pre_prepares_sent += 1;
            self.log.last_proposed = self.now;
            self.stats.batched_requests += n_reqs;
            self.check_prepared(seq);
        }
        self.arm_idle_timer();
    }

    /// Whether, at the link rate the operator stated, the copies of big body `d` we relayed
    /// will still be crossing our link half a view-change timeout from now: a PRE-PREPARE
    /// naming it would reach the backups well before it and go stale there (`uplink.rs`;
    /// ARCHITECTURE.md Deviation 39).
    fn body_still_crossing(&self, d: &Digest) -> bool {
        self.config.link_rate_stated()
            && self
                .peers
                .uplink
                .crossing_at(d, self.now + self.config.view_change_timeout / 2)
    }

    /// Takes queued requests into a batch: inline up to the byte bound, big ones by digest.
    ///
    /// A request whose predecessor ([`crate::message::Request::after`]) has neither run nor
    /// been proposed (it is still on its way, or lost) is kept back in the queue: proposed
    /// now, it would only be skipped at execution (§1.6), and its client would wait for a
    /// retransmission timeout, which may by then have backed off beyond the view-change
    /// timeout (simulator: slow-execution 103).
    ///
    /// So is a big request whose body is still crossing our link
    /// ([`Self::body_still_crossing`]); the requests queued after it are not held with it,
    /// but those of its client that follow it are, by the rule above.
    fn build_batch(&mut self) -> Option<BatchBody> {
        let mut batch = BatchBody::default();
        let mut bytes = 0usize;
        let mut in_batch: BTreeSet<(ClientId, RequestId, bool)> = BTreeSet::new();
        let mut kept: VecDeque<Digest> = VecDeque::new();
        while let Some(&d) = self.requests.queue.front() {
            let Some(r) = self.requests.store.get(&d) else {
                self.requests.queue.pop_front();
                continue;
            };
            let last = self.cached_rid(r.client).map_or(0, |(rid, _)| rid);
            if last >= r.rid || self.requests.proposed.contains(&d) {
                self.requests.queue.pop_front();
                continue;
            }
            // A batch runs its inlined requests first, then the big ones (`execute_batch`):
            // an inlined request may not follow a big one of the same batch.
            let ready = r.after <= last
                || self.requests.proposed_ids.contains(&(r.client, r.after))
                || in_batch.contains(&(r.client, r.after, false))
                || (r.big && in_batch.contains(&(r.client, r.after, true)));
            if !ready || (r.big && self.body_still_crossing(&d)) {
                kept.push_back(d);
                self.requests.queue.pop_front();
                continue;
            }
            if r.big {
                if batch.big.len() >= BIG_PER_BATCH_MAX {
                    break;
                }
                batch.big.push(d);
            } else {
                let len = r.frame.len();
                if !batch.requests.is_empty() && bytes + len > self.config.batch_bytes_max {
                    break;
                }
                bytes += len;
                batch.requests.push(r.frame.to_vec());
            }
            in_batch.insert((r.client, r.rid, r.big));
            self.requests.queue.pop_front();
        }
        // Kept-back requests stay first, in their order, for the next batch.
        while let Some(d) = kept.pop_back() {
            self.requests.queue.push_front(d);
        }
        (!batch.requests.is_empty() || !batch.big.is_empty()).then_some(batch)
    }

    /// The `(client, rid)` of a request frame in a batch, or of a big request we hold.
    fn request_id(&self, frame: Option<&[u8]>, d: &Digest) -> Option<(ClientId, RequestId)> {
        match frame {
            Some(bytes) => {
                let f = Frame::parse(bytes, usize::MAX).ok()?;
                RequestView::decode(f.body).map(|r| (r.client, r.rid))
            }
            None => self.requests.store.get(d).map(|r| (r.client, r.rid)),
        }
    }

    /// Stores a batch body and marks its requests as proposed.
    pub(super) fn note_batch(&mut self, digest: Digest, batch: BatchBody) {
        self.note_batch_at(None, digest, batch);
    }

    /// [`Self::note_batch`] for a batch at `seq`: one this replica already executed (a
    /// NEW-VIEW re-proposes it) leaves its requests unmarked, since no execution will unmark
    /// them. A request it skipped there (its predecessor had not run, §1.6) must stay free to
    /// be proposed again when the client retransmits it (simulator: partition 44).
    pub(super) fn note_batch_at(&mut self, seq: Option<Seq>, digest: Digest, batch: BatchBody) {
        if seq.is_some_and(|s| s <= self.log.last_executed) {
            self.log.missing_batches.remove(&digest);
            self.log
                .batches
                .entry(digest)
                .or_insert_with(|| Arc::new(batch));
            return;
        }
        for r in &batch.requests {
            if let Some(d) = request_digest(r) {
                self.requests.proposed.insert(d);
                if let Some(id) = self.request_id(Some(r), &d) {
                    self.requests.proposed_ids.insert(id);
                }
            }
        }
        for d in &batch.big {
            self.requests.proposed.insert(*d);
            if let Some(id) = self.request_id(None, d) {
                self.requests.proposed_ids.insert(id);
            }
        }
        self.log.missing_batches.remove(&digest);
        self.log
            .batches
            .entry(digest)
            .or_insert_with(|| Arc::new(batch));
    }

    /// §1.5 "Backup on PRE-PREPARE", conditions (a)–(g).
    pub(super) fn on_pre_prepare(&mut self, frame: &Frame<'_>, pp: PrePrepare, bytes: &[u8]) {
        let Principal::Replica(j) = frame.header.sender else {
            return self.drop_input(DropReason::Invalid);
        };
        if j != self.config.primary(pp.view)
            || frame.header.auth != crate::wire::AuthKind::Authenticator
        {
            return self.drop_input(DropReason::Invalid);
        }
        if pp.view != self.view.current || !self.view.has_new_view {
            return self.drop_input(DropReason::OutOfWindow);
        }
        if !self.in_window(pp.seq) || pp.seq <= self.view.low_bound {
            return self.drop_input(DropReason::OutOfWindow);
        }
        let Some(d) = self.validate_batch(&pp.batch, pp.seq, false) else {
            return self.drop_input(DropReason::Invalid);
        };
        // The primary's non-deterministic choice fails our check (§1.13). A time-based
        // choice also fails once it is older than the tolerance: a PRE-PREPARE retransmitted
        // to a replica catching up (after a restart and a state transfer) would then be
        // refused for ever, and the replica would stay behind (found by the restart tests of
        // `crates/byzfs/tests/restart.rs`); and on a slow link a PRE-PREPARE queued behind
        // the bodies it names arrives past the tolerance (Andrew-Tcl at `slow-1`: 10 s and
        // more at 1 Mb/s, BENCHMARKS.md). Accept it once `f` other backups prepared the
        // same digest: with the primary that is `f+1` replicas. If the primary is correct
        // its choice is honest; if it is faulty, at most `f-1` backups are, so a correct
        // backup prepared it, and the first correct backup to do so checked the choice
        // itself (its own vouchers, all earlier, would be `f` faulty backups beside a
        // faulty primary). Until then it is kept aside as unverified (as one whose
        // requests we cannot authenticate, §1.14): the PREPAREs that vouch for it often
        // arrive after it, and dropping it left the slot to the next resend.
        let nondet_ok = self.validate_batch(&pp.batch, pp.seq, true).is_some();
        let (v, seq) = (pp.view, pp.seq);
        let slot = self.log.slots.entry(seq).or_default();
        if let Some(acc) = &slot.pre_prepare {
            if acc.digest == d {
                return self.drop_input(DropReason::Stale);
            }
            if !self.mutated(M::AcceptSecondPrePrepare) {
                return self.drop_input(DropReason::Invalid);
            }
        }
        let slot = self.log.slots.entry(seq).or_default();
        if slot.conflicts_in_view(d, v) && !self.mutated(M::AcceptSecondPrePrepare) {
            return self.drop_input(DropReason::Invalid);
        }
        let frame_arc: Arc<[u8]> = Arc::from(bytes);
        let f = self.f();
        let vouchers = if self.mutated(M::VouchOnFewer) {
            f.saturating_sub(1)
        } else {
            f
        };
        let vouched = self
            .log
            .slots
            .get(&seq)
            .is_some_and(|s| s.prepare_count(d, false) >= vouchers);
        // Checked whenever it may be accepted (it blacklists a client whose good MAC covers
        // a bad signature); a choice that fails and nobody vouches for is not looked at.
        let authentic = (nondet_ok || vouched) && self.requests_authentic(&pp.batch);
        let acceptable = vouched || (nondet_ok && authentic);
        if !acceptable {
            let slot = self.log.slots.entry(seq).or_default();
            slot.unverified = Some(Unverified {
                digest: d,
                frame: frame_arc,
            });
            if !nondet_ok {
                // Counted apart from `invalid`: late or retransmitted time-based choices
                // are not a primary's fault.
                self.drop_input(DropReason::Nondet);
            }
            return;
        }
        self.accept_pre_prepare(seq, d, pp.batch, Some(frame_arc));
    }

    /// Checks a batch's form: every inlined request parses, decodes and names its sender;
    /// sizes are bounded; the non-deterministic choices pass the service's check (null batches
    /// carry none). Returns the batch digest.
    pub(super) fn validate_batch(
        &self,
        batch: &BatchBody,
        seq: Seq,
        check_nondet: bool,
    ) -> Option<Digest> {
        if batch.big.len() > BIG_PER_BATCH_MAX {
            return None;
        }
        for r in &batch.requests {
            let f = Frame::parse(r, self.config.message_bytes_max).ok()?;
            if f.header.tag != crate::message::Tag::Request || f.header.epoch != self.config.epoch {
                return None;
            }
            let Principal::Client(c) = f.header.sender else {
                return None;
            };
            let v = RequestView::decode(f.body)?;
            if v.client != c || v.op.len() > self.config.op_bytes_max {
                return None;
            }
        }
        let is_null = batch.requests.is_empty() && batch.big.is_empty();
        if is_null {
            if !batch.nondet.is_empty() {
                return None;
            }
        } else if check_nondet && !self.service.check_nondet(seq, &batch.nondet, self.now) {
            return None;
        }
        batch_digest(batch)
    }

    /// Whether every inlined request was received directly, or carries a valid MAC for us
    /// (unless its client is blacklisted), or — for a signing client — a valid signature. A
    /// correct primary inlines only requests whose signature it verified, so with signing
    /// clients this holds at every correct backup; the `f` PREPAREs fallback (§1.14) remains
    /// for MAC-only clients and faulty primaries.
    fn requests_authentic(&mut self, batch: &BatchBody) -> bool {
        for r in &batch.requests {
            let Ok(f) = Frame::parse(r, self.config.message_bytes_max) else {
                return false;
            };
            let Principal::Client(c) = f.header.sender else {
                return false;
            };
            if self.requests.store.contains_key(&f.header.body_digest) {
                continue;
            }
            let mac_ok = self.client_mac_ok(&f);
            if mac_ok && !self.requests.blacklist.contains(&c) {
                continue;
            }
            if !self.client_signs(c) || !self.client_request_signed(&f, mac_ok) {
                return false;
            }
        }
        true
    }

    pub(super) fn accept_pre_prepare(
        &mut self,
        seq: Seq,
        d: Digest,
        batch: BatchBody,
        frame: Option<Arc<[u8]>>,
    ) {
        self.note_batch_at(Some(seq), d, batch);
        let slot = self.log.slots.entry(seq).or_default();
        if slot.pre_prepare.as_ref().is_some_and(|a| a.digest != d) {
            // Only reachable under the AcceptSecondPrePrepare mutation: vote again.
            slot.sent_prepare = false;
            slot.sent_commit = false;
            slot.committed_reported = false;
        }
        slot.unverified = None;
        slot.pre_prepare = Some(Accepted { digest: d, frame });
        self.maybe_send_prepare(seq);
    }

    /// Whether all big-request bodies of batch `d` are present (§1.10 `is_pp_complete`).
    pub(super) fn batch_complete(&self, d: Digest) -> bool {
        match self.log.batches.get(&d) {
            Some(b) => b.big.iter().all(|r| self.requests.store.contains_key(r)),
            None => false,
        }
    }

    /// A backup multicasts PREPARE once the pre-prepare is accepted and complete.
    pub(super) fn maybe_send_prepare(&mut self, seq: Seq) {
        let Some(slot) = self.log.slots.get(&seq) else {
            return;
        };
        let Some(acc) = &slot.pre_prepare else { return };
        let d = acc.digest;
        if slot.sent_prepare || self.is_primary() || !self.batch_complete(d) {
            if !self.log.batches.contains_key(&d) && d != null_digest() {
                self.log.missing_batches.insert(d);
            }
            return;
        }
        if self.abstains_at(seq) {
            // It may have voted for another digest here before a power cut took the record
            // (see `PersistRecord::AbstainUpTo`). The others' PREPAREs may still prepare it.
            if let Some(slot) = self.log.slots.get_mut(&seq) {
                if !slot.withheld_prepare {
                    slot.withheld_prepare = true;
                    self.stats.prepares_withheld += 1;
                }
            }
            self.check_prepared(seq);
            return;
        }
        if seq > self.storage.durable.horizon {
            // Synced, so that every vote a power cut may take is at or below a durable
            // horizon (`PersistRecord::VoteHorizon`); a log window ahead, so rarely.
            let horizon = seq + self.config.log_window;
            self.persist(PersistRecord::VoteHorizon(horizon));
            self.stats.vote_horizons += 1;
        }
        let v = self.view.current;
        // Not synced before the send: see `PersistRecord::Voted`.
        self.persist(PersistRecord::Voted {
            view: v,
            seq,
            digest: d,
        });
        let frame = self.broadcast(&Message::Prepare(Prepare {
            view: v,
            seq,
            digest: d,
            replica: self.me,
        }));
        self.stats.prepares_sent += 1;
        let slot = self.log.slots.entry(seq).or_default();
        slot.sent_prepare = true;
        slot.own_prepare = Some(frame);
        // Our own PREPARE counts toward the 2f of the prepared certificate.
        slot.prepares.insert(self.me, d);
        slot.note_pre_prepared(d, v);
        self.check_prepared(seq);
    }

    /// §1.5 "On PREPARE".
    pub(super) fn on_prepare(&mut self, p: Prepare) {
        if p.view != self.view.current || !self.view.has_new_view {
            return self.drop_input(DropReason::OutOfWindow);
        }
        if !self.in_window(p.seq) || p.seq <= self.view.low_bound {
            return self.drop_input(DropReason::OutOfWindow);
        }
        if p.replica == self.primary() {
            return self.drop_input(DropReason::Invalid);
        }
        let f = self.f();
        let slot = self.log.slots.entry(p.seq).or_default();
        slot.prepares.entry(p.replica).or_insert(p.digest);
        // §1.14: a pre-prepare we could not authenticate is accepted once f others vouch.
        if let Some(u) = slot.unverified.clone() {
            if slot.prepare_count(u.digest, false) >= f {
                if let Ok(fr) = Frame::parse(&u.frame, self.config.message_bytes_max) {
                    if let Ok(Message::PrePrepare(pp)) = fr.decode() {
                        self.accept_pre_prepare(p.seq, u.digest, pp.batch, Some(u.frame.clone()));
                    }
                }
            }
        }
        self.check_prepared(p.seq);
    }

    /// `prepared(m, v, n, i)`: the pre-prepare, its complete batch, and `2f` matching PREPAREs
    /// from backups.
    pub(super) fn is_prepared(&self, seq: Seq) -> bool {
        let Some(slot) = self.log.slots.get(&seq) else {
            return false;
        };
        let Some(acc) = &slot.pre_prepare else {
            return false;
        };
        if !self.batch_complete(acc.digest) {
            return false;
        }
        let ignore = self.mutated(M::PrepareWithoutDigest);
        slot.prepare_count(acc.digest, ignore) >= 2 * self.f()
    }

    /// `committed-local`: prepared, and `2f+1` matching COMMITs (own included).
    pub(super) fn is_committed(&self, seq: Seq) -> bool {
        if !self.is_prepared(seq) {
            return false;
        }
        let Some(slot) = self.log.slots.get(&seq) else {
            return false;
        };
        let Some(acc) = &slot.pre_prepare else {
            return false;
        };
        let need = if self.mutated(M::CommitQuorum2f) {
            2 * self.f()
        } else {
            2 * self.f() + 1
        };
        slot.sent_commit && slot.commit_count(acc.digest) >= need
    }

    /// When `seq` becomes prepared: record P-info, execute tentatively if possible, send
    /// COMMIT (`send_commit`, §1.5).
    pub(super) fn check_prepared(&mut self, seq: Seq) {
        if !self.is_prepared(seq) {
            return;
        }
        let v = self.view.current;
        let me = self.me;
        let Some(slot) = self.log.slots.get_mut(&seq) else {
            return;
        };
        if slot.sent_commit {
            return;
        }
        let Some(acc) = &slot.pre_prepare else { return };
        let d = acc.digest;
        if slot.prepared_info.is_none_or(|(pv, _)| pv <= v) {
            slot.prepared_info = Some((v, d));
        }
        self.event(Event::Prepared {
            view: v,
            seq,
            digest: d,
        });
        // P-info is durable before the tentative reply leaves: 2f+1 tentative replies
        // acknowledge the write, and after a crash of every replica only durable P-info
        // brings it into the next view (under the literal `Persist` contract, a reply
        // queued before this record could leave before its fsync).
        self.persist(PersistRecord::Committed {
            view: v,
            seq,
            digest: d,
        });
        self.try_execute_tentative();
        let frame = self.broadcast(&Message::Commit(Commit {
            view: v,
            seq,
            digest: d,
            replica: me,
        }));
        if let Some(slot) = self.log.slots.get_mut(&seq) {
            slot.sent_commit = true;
            slot.own_commit = Some(frame);
            slot.commits.insert(me, d);
        }
        // A client may accept this batch once f+1 correct replicas sent COMMIT for it: no read
        // is answered here from state without it (see `ReadOnly::floor`).
        self.read_only.raise_floor(seq);
        self.report_committed(seq);
        self.execute_committed();
    }

    /// Reports a completed commit certificate once per view (for the checkers).
    fn report_committed(&mut self, seq: Seq) {
        if !self.is_committed(seq) {
            return;
        }
        let v = self.view.current;
        let Some(slot) = self.log.slots.get_mut(&seq) else {
            return;
        };
        let Some(d) = slot.pre_prepare.as_ref().map(|a| a.digest) else {
            return;
        };
        if slot.committed_reported {
            return;
        }
        slot.committed_reported = true;
        self.event(Event::CommittedLocal {
            view: v,
            seq,
            digest: d,
        });
        self.monitor_committed(seq, d);
    }

    /// §1.5 "On COMMIT".
    pub(super) fn on_commit(&mut self, c: Commit) {
        if c.view != self.view.current || !self.view.has_new_view {
            // It may still certify a batch we can run (`catch_up.rs`).
            return self.on_foreign_commit(c);
        }
        if !self.in_window(c.seq) || c.seq <= self.view.low_bound {
            return self.drop_input(DropReason::OutOfWindow);
        }
        let slot = self.log.slots.entry(c.seq).or_default();
        slot.commits.entry(c.replica).or_insert(c.digest);
        self.report_committed(c.seq);
        self.execute_committed();
    }
}

/// The request digest in an inlined frame's header (its body digest), if it has a header.
pub(super) fn request_digest(frame: &[u8]) -> Option<Digest> {
    let h = frame.get(32..HEADER_LEN)?;
    let mut d = [0u8; 32];
    d.copy_from_slice(h);
    Some(Digest(d))
}
