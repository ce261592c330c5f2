//! The sans-IO client (PROTOCOL.md §1.6, §1.8, §1.10, §1.12).
//!
//! A [`Client`] has at most one outstanding request. The driver:
//!
//! 1. calls [`Client::invoke`] to start a request, [`Client::handle_message`] for every frame
//!    received from a replica and [`Client::handle_timeout`] when the deadline returned by
//!    [`Client::poll_timeout`] has passed;
//! 2. after each of those calls, drains [`Client::poll_action`] until it returns `None`,
//!    performing the sends in order, then re-arms its timer from [`Client::poll_timeout`].
//!
//! The client never reads a clock (`now` is passed in) and draws randomness (the designated
//! replier, the retransmission jitter) only from its own `ChaCha8Rng` seeded at construction,
//! so the same inputs always produce byte-identical frames.
//!
//! **What the client expects of a replica's REPLY** (the contract with the replica):
//! a frame tagged [`Tag::Reply`], sender `Principal::Replica(j)`, the configuration epoch,
//! authenticated with one MAC ([`AuthKind::Mac`]) under the key replica `j` uses towards this
//! client; the body's `client` and `rid` are those of the request, `replica == j`,
//! `result_digest == Digest::of(result)`, `result` is `Some` for a full reply, `tentative` is
//! set for tentative and read-only executions, and `view` is the replica's current view.

use crate::config::Config;
use crate::crypto::{ClientKeys, Digest};
use crate::ids::{Principal, ReplicaId, RequestId, View};
use crate::message::{Message, Reply, Request, Tag};
use crate::time::Time;
use crate::wire::{self, Auth, AuthKind, Envelope, Frame, REPLIER_ALL};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Request header flag: the operation is read-only (PROTOCOL.md §1.8).
pub const FLAG_READ_ONLY: u8 = 0x01;

/// Output of the client state machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientAction {
    /// Send a frame to one replica.
    Send {
        /// Destination.
        to: ReplicaId,
        /// The frame.
        bytes: Arc<[u8]>,
    },
    /// Send a frame to every replica.
    Broadcast {
        /// The frame.
        bytes: Arc<[u8]>,
    },
    /// The outstanding request completed with this result.
    Completed {
        /// The request.
        rid: RequestId,
        /// The accepted result.
        result: Vec<u8>,
    },
}

/// Why an invocation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// A request is already outstanding (one at a time per client).
    #[error("a request is already outstanding")]
    Busy,
    /// The operation exceeds the configured maximum size.
    #[error("operation too large")]
    TooLarge,
}

/// Counters of the client's activity; bad input is dropped and counted here, never panics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Authentic, well-formed replies for the outstanding request that were recorded.
    pub replies_accepted: u64,
    /// Frames whose MAC is missing, of the wrong kind, or does not verify.
    pub dropped_bad_auth: u64,
    /// Frames that do not parse, are not replies, come from no replica of the configuration,
    /// name another client or another sender, or carry a full result that does not match its
    /// digest.
    pub dropped_malformed: u64,
    /// Replies for a request that is not outstanding (an earlier one, or after completion), or
    /// from another configuration epoch.
    pub dropped_stale: u64,
    /// Retransmissions of the outstanding request.
    pub retransmissions: u64,
    /// Read-only requests resent as ordinary read-write requests (PROTOCOL.md §1.8).
    pub read_only_fallbacks: u64,
}

/// The latest reply of one replica for the outstanding request.
#[derive(Clone, Debug)]
struct ReplySlot {
    view: View,
    tentative: bool,
    digest: Digest,
    /// The full result, checked against `digest` on receipt.
    full: Option<Vec<u8>>,
}

/// The outstanding request.
#[derive(Debug)]
struct Outstanding {
    rid: RequestId,
    /// The serialised [`Request`] body, encoded once; its digest is `digest`.
    body: Vec<u8>,
    digest: Digest,
    /// Sent to every replica from the first transmission on (read-only or big).
    read_only: bool,
    replier: u8,
    /// The current frame; rebuilt (MACs only) when `read_only` or `replier` change.
    frame: Arc<[u8]>,
    retransmissions: u32,
    /// Current retransmission timeout, in microseconds (at least 1).
    rtimeout_us: u64,
    deadline: Time,
    /// Latest reply per replica.
    replies: BTreeMap<ReplicaId, ReplySlot>,
}

/// Why a frame was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DropReason {
    BadAuth,
    Malformed,
    Stale,
}

/// A BFT client (PROTOCOL.md §1.6).
pub struct Client {
    config: Config,
    keys: ClientKeys,
    rng: ChaCha8Rng,
    view: View,
    next_rid: RequestId,
    out: Option<Outstanding>,
    actions: VecDeque<ClientAction>,
    stats: ClientStats,
}

fn micros(d: core::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Client {
    /// Creates a client. `keys` must hold one key per replica of `config` in each direction;
    /// `rng_seed` seeds every random choice the client makes.
    pub fn new(config: Config, keys: ClientKeys, rng_seed: u64) -> Client {
        debug_assert_eq!(
            keys.to_replica.len(),
            config.n(),
            "one outgoing key per replica"
        );
        debug_assert_eq!(
            keys.from_replica.len(),
            config.n(),
            "one incoming key per replica"
        );
        Client {
            config,
            keys,
            rng: ChaCha8Rng::seed_from_u64(rng_seed),
            view: 0,
            next_rid: 1,
            out: None,
            actions: VecDeque::new(),
            stats: ClientStats::default(),
        }
    }

    /// The view the client believes current; its primary receives first transmissions.
    pub fn view(&self) -> View {
        self.view
    }

    /// The outstanding request, if any.
    pub fn outstanding(&self) -> Option<RequestId> {
        self.out.as_ref().map(|o| o.rid)
    }

    /// The id the next successful [`Client::invoke`] will return.
    pub fn next_rid(&self) -> RequestId {
        self.next_rid
    }

    /// Activity counters.
    pub fn stats(&self) -> &ClientStats {
        &self.stats
    }

    /// Invokes an operation and returns its request id (ids start at 1 and strictly
    /// increase; a refused invocation consumes none).
    ///
    /// The request body is serialised and hashed once. First transmission (PROTOCOL.md §1.6,
    /// §1.10): a small read-write request goes to the primary of the client's view only; a
    /// read-only or big request goes to every replica.
    pub fn invoke(
        &mut self,
        now: Time,
        op: Vec<u8>,
        read_only: bool,
    ) -> Result<RequestId, ClientError> {
        if self.out.is_some() {
            return Err(ClientError::Busy);
        }
        if op.len() > self.config.op_bytes_max {
            return Err(ClientError::TooLarge);
        }
        let rid = self.next_rid;
        // 2^64 requests never happen; saturating keeps the code panic-free regardless.
        self.next_rid = rid.saturating_add(1);
        let big = op.len() > self.config.big_request_threshold;
        let body = wire::encode_body(&Message::Request(Request {
            client: self.keys.me,
            rid,
            op,
        }));
        let digest = Digest::of(&body);
        let replier = self.random_replier(None);
        let max_us = micros(self.config.client_retransmit_max).max(1);
        let rtimeout_us = micros(self.config.client_retransmit).clamp(1, max_us);
        let mut o = Outstanding {
            rid,
            body,
            digest,
            read_only,
            replier,
            frame: Arc::from(Vec::new()),
            retransmissions: 0,
            rtimeout_us,
            deadline: Time::from_micros(now.as_micros().saturating_add(rtimeout_us)),
            replies: BTreeMap::new(),
        };
        o.frame = build_frame(&self.config, &self.keys, &o);
        let bytes = o.frame.clone();
        self.actions.push_back(if read_only || big {
            ClientAction::Broadcast { bytes }
        } else {
            ClientAction::Send {
                to: self.config.primary(self.view),
                bytes,
            }
        });
        tracing::debug!(client = self.keys.me, rid, read_only, big, "request sent");
        self.out = Some(o);
        Ok(rid)
    }

    /// Handles a frame from a replica: a REPLY for the outstanding request is recorded and may
    /// complete it (PROTOCOL.md §1.6); anything else is dropped and counted.
    pub fn handle_message(&mut self, now: Time, bytes: &[u8]) {
        let _ = now;
        match self.check_reply(bytes) {
            Ok((j, reply)) => {
                self.stats.replies_accepted += 1;
                self.record(j, reply);
                self.try_complete();
            }
            Err(reason) => {
                tracing::debug!(client = self.keys.me, ?reason, "reply dropped");
                match reason {
                    DropReason::BadAuth => self.stats.dropped_bad_auth += 1,
                    DropReason::Malformed => self.stats.dropped_malformed += 1,
                    DropReason::Stale => self.stats.dropped_stale += 1,
                }
            }
        }
    }

    /// Handles timer expiry: if the outstanding request's deadline has passed, retransmit it
    /// to every replica with exponential back-off (PROTOCOL.md §1.6). After more than one
    /// retransmission a read-only request falls back to an ordered one with a new designated
    /// replier (§1.8); if a certificate is complete except for its full result, every replica
    /// is asked for the full result (§1.12).
    pub fn handle_timeout(&mut self, now: Time) {
        let f = self.config.f as usize;
        let max_us = micros(self.config.client_retransmit_max).max(1);
        let Some(o) = self.out.as_mut() else {
            return;
        };
        if now < o.deadline {
            return;
        }
        o.retransmissions = o.retransmissions.saturating_add(1);
        self.stats.retransmissions += 1;
        let mut changed = false;
        if o.read_only && o.retransmissions > 1 {
            o.read_only = false;
            self.stats.read_only_fallbacks += 1;
            // Read-only replies cannot certify the ordered request (library `t_reps.clear()`).
            o.replies.retain(|_, s| !s.tentative);
            let n = self.config.n();
            o.replier = random_replier(&mut self.rng, n, Some(o.replier));
            changed = true;
        }
        if o.replier != REPLIER_ALL && certified(o, f, false).is_some() {
            o.replier = REPLIER_ALL;
            changed = true;
        }
        let t = o.rtimeout_us.max(1);
        let jitter = self.rng.gen_range(0..t);
        o.rtimeout_us = t.saturating_add(jitter).clamp(1, max_us);
        o.deadline = Time::from_micros(now.as_micros().saturating_add(o.rtimeout_us));
        if changed {
            // Re-authenticate only: the body and its digest are reused as they are.
            let frame = build_frame(&self.config, &self.keys, o);
            o.frame = frame;
        }
        self.actions.push_back(ClientAction::Broadcast {
            bytes: o.frame.clone(),
        });
        tracing::debug!(
            client = self.keys.me,
            rid = o.rid,
            n_retrans = o.retransmissions,
            "request retransmitted"
        );
    }

    /// The next deadline: when the outstanding request is retransmitted.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.out.as_ref().map(|o| o.deadline)
    }

    /// The next output, in order.
    pub fn poll_action(&mut self) -> Option<ClientAction> {
        self.actions.pop_front()
    }

    fn random_replier(&mut self, avoid: Option<u8>) -> u8 {
        random_replier(&mut self.rng, self.config.n(), avoid)
    }

    /// Checks a frame as a REPLY to the outstanding request; returns its sender and body.
    fn check_reply(&self, bytes: &[u8]) -> Result<(ReplicaId, Reply), DropReason> {
        let frame = Frame::parse(bytes, self.config.message_bytes_max)
            .map_err(|_| DropReason::Malformed)?;
        let h = frame.header;
        if h.tag != Tag::Reply {
            return Err(DropReason::Malformed);
        }
        let j = match h.sender {
            Principal::Replica(j) if (j as usize) < self.config.n() => j,
            _ => return Err(DropReason::Malformed),
        };
        if h.epoch != self.config.epoch {
            return Err(DropReason::Stale);
        }
        if h.auth != AuthKind::Mac {
            return Err(DropReason::BadAuth);
        }
        let key = self
            .keys
            .from_replica
            .get(j as usize)
            .ok_or(DropReason::BadAuth)?;
        if !frame.verify_mac(key, 0) {
            return Err(DropReason::BadAuth);
        }
        let reply = match frame.decode() {
            Ok(Message::Reply(r)) => r,
            _ => return Err(DropReason::Malformed),
        };
        if reply.client != self.keys.me || reply.replica != j {
            return Err(DropReason::Malformed);
        }
        match &self.out {
            Some(o) if o.rid == reply.rid => {}
            _ => return Err(DropReason::Stale),
        }
        if let Some(result) = &reply.result {
            if Digest::of(result) != reply.result_digest {
                return Err(DropReason::Malformed);
            }
        }
        Ok((j, reply))
    }

    /// Records `reply` as replica `j`'s latest. A later reply replaces an earlier one, except
    /// that a committed reply is final and is not replaced by a tentative one (a reordered
    /// earlier reply). A digest-only reply keeps the full result already received for the same
    /// digest.
    fn record(&mut self, j: ReplicaId, reply: Reply) {
        let Some(o) = self.out.as_mut() else {
            return;
        };
        let mut new = ReplySlot {
            view: reply.view,
            tentative: reply.tentative,
            digest: reply.result_digest,
            full: reply.result,
        };
        match o.replies.get_mut(&j) {
            Some(old) if !old.tentative && new.tentative => {
                if old.digest == new.digest && old.full.is_none() {
                    old.full = new.full;
                }
            }
            Some(old) => {
                if old.digest == new.digest && new.full.is_none() {
                    new.full = old.full.take();
                }
                *old = new;
            }
            None => {
                o.replies.insert(j, new);
            }
        }
    }

    /// Completes the outstanding request if a certificate with a full result is complete,
    /// and adopts the view of its replies.
    fn try_complete(&mut self) {
        let f = self.config.f as usize;
        let Some(d) = self.out.as_ref().and_then(|o| certified(o, f, true)) else {
            return;
        };
        let Some(o) = self.out.take() else {
            return;
        };
        let mut views = Vec::new();
        let mut result = None;
        for s in o.replies.into_values().filter(|s| s.digest == d) {
            views.push(s.view);
            if result.is_none() {
                result = s.full;
            }
        }
        // The f+1-th highest view: at least f+1 matching replies report a view at least this
        // high, so at least one correct replica has reached it.
        views.sort_unstable_by(|a, b| b.cmp(a));
        if let Some(&v) = views.get(f) {
            self.view = self.view.max(v);
        }
        // `certified(.., true)` only returns a digest some matching reply holds in full.
        let result = result.unwrap_or_default();
        tracing::debug!(
            client = self.keys.me,
            rid = o.rid,
            view = self.view,
            "request completed"
        );
        self.actions
            .push_back(ClientAction::Completed { rid: o.rid, result });
    }
}

/// Builds the request frame: header, the stored body, an authenticator with one MAC per
/// replica `0..n` in order.
fn build_frame(config: &Config, keys: &ClientKeys, o: &Outstanding) -> Arc<[u8]> {
    let n = config.n();
    let macs = keys.to_replica.get(..n).unwrap_or(&keys.to_replica);
    let env = Envelope {
        sender: Principal::Client(keys.me),
        epoch: config.epoch,
        flags: if o.read_only { FLAG_READ_ONLY } else { 0 },
        replier: o.replier,
    };
    Arc::from(wire::encode_with_body(
        env,
        Tag::Request,
        &o.body,
        o.digest,
        Auth::Authenticator(macs),
    ))
}

/// A designated replier drawn uniformly from `0..n`, different from `avoid` when possible.
fn random_replier(rng: &mut ChaCha8Rng, n: usize, avoid: Option<u8>) -> u8 {
    let pick = match avoid {
        Some(a) if (a as usize) < n && n > 1 => {
            let r = rng.gen_range(0..n - 1);
            if r >= a as usize {
                r + 1
            } else {
                r
            }
        }
        _ => rng.gen_range(0..n.max(1)),
    };
    u8::try_from(pick).unwrap_or(REPLIER_ALL)
}

/// The result digest of a complete reply certificate (PROTOCOL.md §1.6): `f+1` matching
/// committed replies, or `2f+1` matching replies tentative and committed together. With
/// `need_full`, only a digest for which some matching reply carried the full result counts.
fn certified(o: &Outstanding, f: usize, need_full: bool) -> Option<Digest> {
    // digest → (committed, total, has full result)
    let mut tally: BTreeMap<Digest, (usize, usize, bool)> = BTreeMap::new();
    for s in o.replies.values() {
        let e = tally.entry(s.digest).or_default();
        if !s.tentative {
            e.0 += 1;
        }
        e.1 += 1;
        e.2 |= s.full.is_some();
    }
    tally
        .into_iter()
        .find(|(_, (c, t, full))| (*c > f || *t > 2 * f) && (*full || !need_full))
        .map(|(d, _)| d)
}
