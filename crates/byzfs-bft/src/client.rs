//! The sans-IO client (docs/PROTOCOL.md §1.6, §1.8, §1.10, §1.12).
//!
//! A [`Client`] has up to `Config::client_window` requests outstanding (docs/PROTOCOL.md §1.6,
//! "several requests in flight"); they run at the replicas in the order they were invoked
//! (each names the earlier one it must follow, [`Request::after`]), each at most once. A
//! read invoked while a read-write request is outstanding is ordered too (a read-only
//! execution could run before that write), unless the caller reads it apart from them
//! ([`Access::ReadApart`]). The driver:
//!
//! 1. calls [`Client::invoke`] to start a request, [`Client::handle_message`] for every frame
//!    received from a replica and [`Client::handle_timeout`] when the deadline returned by
//!    [`Client::poll_timeout`] has passed;
//! 2. after each of those calls, drains [`Client::poll_action`] until it returns `None`,
//!    performing the sends in order, then re-arms its timer from [`Client::poll_timeout`].
//!
//! The client never reads a clock (`now` is passed in) and draws randomness (the designated
//! replier, the retransmission jitter) only from its own `ChaCha8Rng` seeded at construction,
//! so the same inputs always produce byte-identical frames. When replies certify a result is
//! `certificate.rs`; how a request is framed and authenticated, `frame.rs`.
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
use crate::responsive::Responsiveness;
use crate::retransmit_timeout::{RequestKind, RetransmitTimeout};
use crate::time::Time;
use crate::wire::{self, AuthKind, Frame, REPLIER_ALL};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

mod access;
mod certificate;
mod frame;
#[cfg(test)]
mod tests;

pub use access::Access;
use certificate::{certified, read_may_certify};
use frame::build_frame;

/// Request header flag: the operation is read-only (docs/PROTOCOL.md §1.8).
pub const FLAG_READ_ONLY: u8 = 0x01;
/// Request header flag: a big request's body sent to the primary only, which relays it to
/// every backup (docs/PROTOCOL.md §1.10, "each body once"). Retransmissions, which go to every
/// replica, do not carry it.
pub const FLAG_RELAY: u8 = 0x02;

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
    /// A read-only request that got no certificate is sent again, ordered, under the new id
    /// `rid` (docs/PROTOCOL.md §1.8); it still completes under `issued`. For drivers that track
    /// ids on the wire (the simulator's checkers); others ignore it.
    Reissued {
        /// The id [`Client::invoke`] returned.
        issued: RequestId,
        /// The id it is ordered under from now on.
        rid: RequestId,
    },
    /// An outstanding request completed with this result.
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
    /// As many requests as the window allows are outstanding (`Config::client_window`).
    #[error("the client's window of outstanding requests is full")]
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
    /// Read-only requests resent as ordinary read-write requests (docs/PROTOCOL.md §1.8).
    pub read_only_fallbacks: u64,
    /// Read-only requests sent first to `2f+1` replicas (`Config::read_only_to_quorum`).
    pub read_only_to_quorum: u64,
    /// Of those, the ones also sent to the other `f` replicas because replies were late.
    pub read_only_hedged: u64,
    /// Requests whose result the replies certified by digest while the designated replier
    /// sent it in no time: asked again of every replica at once rather than at the
    /// retransmission timeout ([`crate::responsive`]).
    pub full_result_reasks: u64,
    /// Sends to a replica that was silent, to see whether it answers again
    /// ([`crate::responsive::Responsiveness::probes`]).
    pub silent_probes: u64,
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

/// An outstanding request.
#[derive(Debug)]
struct Outstanding {
    rid: RequestId,
    /// The id [`Client::invoke`] returned: `rid` unless a read-only request fell back to an
    /// ordered one, which goes under a new id (its first id was never ordered, and later
    /// requests may already have counted it as done, [`Request::acked`]).
    issued: RequestId,
    /// The serialised [`Request`] body, encoded once; its digest is `digest`.
    body: Vec<u8>,
    digest: Digest,
    /// Sent to every replica from the first transmission on (read-only; big ones too unless
    /// `relay`).
    read_only: bool,
    /// A big request's first transmission, to the primary only, for it to relay
    /// ([`FLAG_RELAY`]); cleared (and the frame rebuilt) at the first retransmission.
    relay: bool,
    /// What it is, for its first retransmission timeout ([`RetransmitTimeout`]).
    kind: RequestKind,
    replier: u8,
    /// The current frame; rebuilt (MACs only) when `read_only` or `replier` change.
    frame: Arc<[u8]>,
    retransmissions: u32,
    /// Current retransmission timeout, in microseconds (at least 1).
    rtimeout_us: u64,
    deadline: Time,
    /// When it was first sent.
    sent_at: Time,
    /// A read-only request sent to `2f+1` replicas only: when to send it to these others too.
    hedge: Option<(Time, Vec<ReplicaId>)>,
    /// The replies certify a result by digest but none carried it in full: when every
    /// replica is asked for it ([`crate::responsive`]).
    full_by: Option<Time>,
    /// Latest reply per replica.
    replies: BTreeMap<ReplicaId, ReplySlot>,
    /// A read-only request whose replies cannot, or are not about to, make a certificate
    /// (they disagree, or an ordered request sent after it completed): it falls back to an
    /// ordered request at its next timeout, not after two retransmissions (`try_complete`).
    disagreed: bool,
}

/// Why a frame was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DropReason {
    BadAuth,
    Malformed,
    Stale,
}

/// A BFT client (docs/PROTOCOL.md §1.6).
pub struct Client {
    config: Config,
    keys: ClientKeys,
    rng: ChaCha8Rng,
    view: View,
    /// Whether `view` was learned from a completed request. Until then the client does not
    /// know which replica is primary, so it sends even a small read-write request to every
    /// replica: a fresh client of a cluster whose view-0 primary is down would otherwise
    /// wait a whole retransmission timeout before each of its first requests reached
    /// anyone who orders it.
    view_known: bool,
    next_rid: RequestId,
    /// The id of the newest request sent ordered (0: none yet). A read-only request with a
    /// lower id is dropped as stale by every replica that has executed it (the reply cache
    /// answers ids up to the client's last executed one), so its retransmission could
    /// reach no one who answers: it goes ordered instead (`timeout_one`).
    last_ordered: RequestId,
    /// Outstanding requests by current id.
    out: BTreeMap<RequestId, Outstanding>,
    actions: VecDeque<ClientAction>,
    stats: ClientStats,
    /// Moving average of read-only completion times, in microseconds (sets the hedge).
    read_us: u64,
    /// What sets each request's first retransmission timeout.
    patience: RetransmitTimeout,
    /// Which replicas answer and agree, for whom to ask first and to designate.
    responsive: Responsiveness,
}

/// Initial estimate of a read-only request's completion time, in microseconds.
const READ_US_INITIAL: u64 = 2_000;
/// Shortest hedge delay, in microseconds.
const HEDGE_MIN_US: u64 = 300;

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
        let config_n = config.n();
        Client {
            config,
            keys,
            rng: ChaCha8Rng::seed_from_u64(rng_seed),
            view: 0,
            view_known: false,
            next_rid: 1,
            last_ordered: 0,
            out: BTreeMap::new(),
            actions: VecDeque::new(),
            stats: ClientStats::default(),
            read_us: READ_US_INITIAL,
            patience: RetransmitTimeout::default(),
            responsive: Responsiveness::new(config_n),
        }
    }

    /// The view the client believes current; its primary receives first transmissions.
    pub fn view(&self) -> View {
        self.view
    }

    /// How many requests are outstanding.
    pub fn outstanding(&self) -> usize {
        self.out.len()
    }

    /// Whether [`Client::invoke`] would accept a request now (the window has room).
    pub fn can_invoke(&self, access: impl Into<Access>) -> bool {
        let rid = self.next_rid;
        let ordered = !self.sent_read_only(access.into());
        (self.out.len() as u64) < self.config.client_window.max(1)
            && (!ordered || rid.saturating_sub(self.acked()) <= self.config.client_window)
    }

    /// Whether a read invoked now goes as read-only: the optimisation is on and, unless it
    /// is read apart ([`Access::ReadApart`]), no ordered request is outstanding (a
    /// read-only execution could run before it).
    fn sent_read_only(&self, access: Access) -> bool {
        let after_mine = match access {
            Access::Ordered => return false,
            Access::Read => true,
            Access::ReadApart => false,
        };
        self.config.read_only_optimisation
            && (!after_mine || self.out.values().all(|o| o.read_only))
    }

    /// [`Request::acked`] for a request sent now: every id below the lowest outstanding
    /// ordered request has completed or was read-only.
    fn acked(&self) -> RequestId {
        self.out
            .values()
            .filter(|o| !o.read_only)
            .map(|o| o.rid.saturating_sub(1))
            .min()
            .unwrap_or(self.next_rid.saturating_sub(1))
    }

    /// [`Request::after`] for a request sent now: the newest outstanding ordered request.
    fn after(&self) -> RequestId {
        self.out
            .values()
            .filter(|o| !o.read_only)
            .map(|o| o.rid)
            .max()
            .unwrap_or(0)
    }

    /// The id the next successful [`Client::invoke`] will return.
    pub fn next_rid(&self) -> RequestId {
        self.next_rid
    }

    /// Moves the request-id counter forward (never back), e.g. to the client's clock at start,
    /// so a restarted client does not reuse ids the replicas' reply cache already answered.
    pub fn advance_next_rid(&mut self, rid: RequestId) {
        self.next_rid = self.next_rid.max(rid);
    }

    /// Activity counters.
    pub fn stats(&self) -> &ClientStats {
        &self.stats
    }

    /// Invokes an operation and returns its request id (ids start at 1 and strictly
    /// increase; a refused invocation consumes none).
    ///
    /// The request body is serialised and hashed once. First transmission (docs/PROTOCOL.md §1.6,
    /// §1.10): a small read-write request goes to the primary of the client's view only; a
    /// read-only or big request, or any request before the client has learned the view from
    /// a completed one, goes to every replica.
    pub fn invoke(
        &mut self,
        now: Time,
        op: Vec<u8>,
        access: impl Into<Access>,
    ) -> Result<RequestId, ClientError> {
        let access = access.into();
        if op.len() > self.config.op_bytes_max {
            return Err(ClientError::TooLarge);
        }
        if !self.can_invoke(access) {
            return Err(ClientError::Busy);
        }
        let read_only = self.sent_read_only(access);
        let (acked, after) = (self.acked(), self.after());
        let rid = self.next_rid;
        // 2^64 requests never happen; saturating keeps the code panic-free regardless.
        self.next_rid = rid.saturating_add(1);
        let big = op.len() > self.config.big_request_threshold;
        let body = wire::encode_body(&Message::Request(Request {
            client: self.keys.me,
            rid,
            acked,
            after,
            op,
        }));
        let digest = Digest::of(&body);
        let grace = self.grace_us();
        let replier = self.responsive.replier(&mut self.rng, now, grace, None);
        let kind = if read_only {
            RequestKind::ReadOnly
        } else if big {
            RequestKind::Big(body.len())
        } else {
            RequestKind::Small
        };
        let rtimeout_us = self.patience.sent(&self.config, kind, now);
        if !read_only {
            self.last_ordered = rid;
        }
        let mut o = Outstanding {
            rid,
            issued: rid,
            body,
            digest,
            read_only,
            relay: big && !read_only && self.view_known && self.config.relay_big_requests,
            kind,
            replier,
            frame: Arc::from(Vec::new()),
            retransmissions: 0,
            rtimeout_us,
            deadline: Time::from_micros(now.as_micros().saturating_add(rtimeout_us)),
            sent_at: now,
            hedge: None,
            full_by: None,
            replies: BTreeMap::new(),
            disagreed: false,
        };
        o.frame = build_frame(&self.config, &self.keys, &o);
        let bytes = o.frame.clone();
        if read_only && !big && self.config.read_only_to_quorum {
            // All but f replicas, the designated replier among them: the ones not counted
            // on, then the primary (the busiest) and the next ones, are left out, and asked
            // only if replies are late — or, a silent one, when its turn to be asked again
            // has come.
            let mut others = self.left_out(now, replier);
            let probes = self.responsive.probes(&others, now, grace);
            others.retain(|r| !probes.contains(r));
            self.stats.silent_probes += probes.len() as u64;
            for to in (0..self.config.n() as ReplicaId).filter(|r| !others.contains(r)) {
                self.responsive.expect(to, now);
                self.actions.push_back(ClientAction::Send {
                    to,
                    bytes: bytes.clone(),
                });
            }
            let delay = self
                .read_us
                .saturating_mul(2)
                .clamp(HEDGE_MIN_US, rtimeout_us);
            let at = Time::from_micros(now.as_micros().saturating_add(delay));
            o.hedge = Some((at, others));
            self.stats.read_only_to_quorum += 1;
        } else {
            // Every replica executes an ordered request and answers, whoever it is sent to;
            // one sent to the primary alone reaches the others only through it, so only the
            // primary is expected to answer until it is sent to all.
            let to_all = read_only || (big && !o.relay) || !self.view_known;
            if to_all {
                for r in 0..self.config.n() as ReplicaId {
                    self.responsive.expect(r, now);
                }
                self.actions.push_back(ClientAction::Broadcast { bytes });
            } else {
                let to = self.config.primary(self.view);
                self.responsive.expect(to, now);
                self.actions.push_back(ClientAction::Send { to, bytes });
            }
        }
        tracing::debug!(client = self.keys.me, rid, read_only, big, "request sent");
        self.out.insert(rid, o);
        Ok(rid)
    }

    /// Handles a frame from a replica: a REPLY for the outstanding request is recorded and may
    /// complete it (docs/PROTOCOL.md §1.6); anything else is dropped and counted.
    pub fn handle_message(&mut self, now: Time, bytes: &[u8]) {
        match self.check_reply(bytes) {
            Ok((j, reply)) => {
                // Authenticated: the replica answers, for a request still outstanding or not.
                self.responsive.answered(j);
                if !self.out.contains_key(&reply.rid) {
                    self.stats.dropped_stale += 1;
                    return;
                }
                self.stats.replies_accepted += 1;
                let rid = reply.rid;
                self.record(j, reply);
                self.try_complete(now, rid);
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

    /// Handles timer expiry: every outstanding request whose deadline has passed is
    /// retransmitted to every replica with exponential back-off (docs/PROTOCOL.md §1.6). After
    /// more than one retransmission a read-only request falls back to an ordered one with a
    /// new designated replier (§1.8), under a new request id (see `Outstanding::issued`); if
    /// a certificate is complete except for its full result, every replica is asked for the
    /// full result (§1.12).
    pub fn handle_timeout(&mut self, now: Time) {
        let due: Vec<RequestId> = self
            .out
            .iter()
            .filter(|(_, o)| {
                o.deadline <= now
                    || o.hedge.as_ref().is_some_and(|(at, _)| *at <= now)
                    || o.full_by.is_some_and(|at| at <= now)
            })
            .map(|(rid, _)| *rid)
            .collect();
        for rid in due {
            self.timeout_one(now, rid);
        }
    }

    fn timeout_one(&mut self, now: Time, rid: RequestId) {
        let f = self.config.f as usize;
        let max_us = micros(self.config.client_retransmit_max).max(1);
        let last_ordered = self.last_ordered;
        let Some(o) = self.out.get_mut(&rid) else {
            return;
        };
        if o.full_by.is_some_and(|at| now >= at) && now < o.deadline {
            // The digests certify a result the designated replier has not sent: every
            // replica is asked for it in full now, not at the retransmission timeout.
            o.full_by = None;
            if o.replier != REPLIER_ALL {
                o.replier = REPLIER_ALL;
                o.frame = build_frame(&self.config, &self.keys, o);
                self.stats.full_result_reasks += 1;
                for r in 0..self.config.n() as ReplicaId {
                    self.responsive.expect(r, now);
                }
                self.actions.push_back(ClientAction::Broadcast {
                    bytes: o.frame.clone(),
                });
            }
            return;
        }
        if o.hedge.as_ref().is_some_and(|(at, _)| now >= *at) && now < o.deadline {
            // Replies are late: the replicas left out are asked too (the same frame).
            if let Some((_, others)) = o.hedge.take() {
                self.stats.read_only_hedged += 1;
                for to in others {
                    self.responsive.expect(to, now);
                    self.actions.push_back(ClientAction::Send {
                        to,
                        bytes: o.frame.clone(),
                    });
                }
            }
            return;
        }
        if now < o.deadline {
            return;
        }
        // A retransmission goes to every replica: no hedge is left to send.
        o.hedge = None;
        o.full_by = None;
        o.retransmissions = o.retransmissions.saturating_add(1);
        self.stats.retransmissions += 1;
        let mut changed = false;
        // A read that got no certificate goes ordered after a second retransmission (§1.8);
        // at once if its replies disagree (`try_complete`), or if an ordered request of ours
        // was sent after it: replicas that executed that one drop this id as stale, so a
        // retransmission reaches no one who answers (Andrew-Tcl at `wan` waited minutes for
        // a `lookup` sent just before a `reclaim`, while a backup down the relay's fan-out
        // lagged and the other three answered from different states).
        let fall_back =
            o.read_only && (o.retransmissions > 1 || o.disagreed || last_ordered > o.rid);
        if o.replier != REPLIER_ALL && certified(o, f, false).is_some() {
            o.replier = REPLIER_ALL;
            changed = true;
        }
        let t = o.rtimeout_us.max(1);
        let jitter = self.rng.gen_range(0..t);
        // A first timeout above the cap (a big request on a slow link) is kept, not raised.
        o.rtimeout_us = t.saturating_add(jitter).clamp(1, max_us.max(t));
        o.deadline = Time::from_micros(now.as_micros().saturating_add(o.rtimeout_us));
        if fall_back && self.can_invoke(false) {
            self.fall_back(now, rid);
            return;
        }
        let Some(o) = self.out.get_mut(&rid) else {
            return;
        };
        if o.relay {
            // The fallback for a first receiver that kept the body: everyone gets it now.
            o.relay = false;
            changed = true;
        }
        if changed {
            // Re-authenticate only: the body and its digest are reused as they are.
            let frame = build_frame(&self.config, &self.keys, o);
            o.frame = frame;
        }
        for r in 0..self.config.n() as ReplicaId {
            self.responsive.expect(r, now);
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

    /// A read-only request that got no certificate goes again as an ordered request (§1.8)
    /// under a new id: its first id was never ordered, and requests sent since may have
    /// counted it as done ([`Request::acked`]), so the replicas could have dropped a result
    /// under it. (If the window is full it stays read-only until the next timeout.)
    fn fall_back(&mut self, now: Time, old: RequestId) {
        let (acked, after) = (self.acked(), self.after());
        let Some(mut o) = self.out.remove(&old) else {
            return;
        };
        let Some(op) = crate::message::RequestView::decode(&o.body).map(|r| r.op.to_vec()) else {
            return;
        };
        let rid = self.next_rid;
        self.next_rid = rid.saturating_add(1);
        self.last_ordered = rid;
        let big = op.len() > self.config.big_request_threshold;
        o.body = wire::encode_body(&Message::Request(Request {
            client: self.keys.me,
            rid,
            acked,
            after,
            op,
        }));
        o.digest = Digest::of(&o.body);
        o.rid = rid;
        o.read_only = false;
        o.kind = if big {
            RequestKind::Big(o.body.len())
        } else {
            RequestKind::Small
        };
        // Read-only replies cannot certify the ordered request (library `t_reps.clear()`).
        o.replies.clear();
        let grace = self.grace_us();
        o.replier = self
            .responsive
            .replier(&mut self.rng, now, grace, Some(o.replier));
        o.full_by = None;
        o.frame = build_frame(&self.config, &self.keys, &o);
        self.stats.read_only_fallbacks += 1;
        for r in 0..self.config.n() as ReplicaId {
            self.responsive.expect(r, now);
        }
        self.actions.push_back(ClientAction::Reissued {
            issued: o.issued,
            rid,
        });
        self.actions.push_back(ClientAction::Broadcast {
            bytes: o.frame.clone(),
        });
        tracing::debug!(client = self.keys.me, old, rid, "read-only request ordered");
        self.out.insert(rid, o);
    }

    /// The next deadline: when an outstanding request is retransmitted (or, for a read
    /// sent to `2f+1` replicas, sent to the others).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Time> {
        self.out
            .values()
            .map(|o| {
                let hedge = o.hedge.as_ref().map(|(at, _)| *at);
                [hedge, o.full_by]
                    .into_iter()
                    .flatten()
                    .fold(o.deadline, Time::min)
            })
            .min()
    }

    /// The `f` replicas a read-only request skips at first: those the client does not count
    /// on ([`crate::responsive`]), then the primary of the client's view and the replicas
    /// after it; never the designated `replier`.
    fn left_out(&self, now: Time, replier: u8) -> Vec<ReplicaId> {
        let n = self.config.n() as ReplicaId;
        let first = self.config.primary(self.view);
        self.responsive.left_out(
            (0..n).map(|i| (first + i) % n),
            self.config.f as usize,
            ReplicaId::from(replier),
            now,
            self.grace_us(),
        )
    }

    /// How long an expected reply may be late before its replica is counted as silent.
    fn grace_us(&self) -> u64 {
        Responsiveness::grace_us(self.read_us)
    }

    /// The next output, in order.
    #[must_use]
    pub fn poll_action(&mut self) -> Option<ClientAction> {
        self.actions.pop_front()
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
        let Some(o) = self.out.get_mut(&reply.rid) else {
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

    /// Completes request `rid` if a certificate with a full result is complete, and adopts
    /// the view of its replies.
    fn try_complete(&mut self, now: Time, rid: RequestId) {
        let f = self.config.f as usize;
        let grace = self.grace_us();
        let Some(o) = self.out.get_mut(&rid) else {
            return;
        };
        let Some(d) = certified(o, f, true) else {
            if o.full_by.is_none() && o.replier != REPLIER_ALL && certified(o, f, false).is_some() {
                // Certified by digest only: the designated replier has a moment to send
                // the result, then every replica is asked (`timeout_one`).
                o.full_by = Some(Time::from_micros(now.as_micros().saturating_add(grace)));
            }
            if o.read_only && !o.disagreed && certified(o, f, false).is_none() {
                // Replicas answer a read from the state they reached, which differs while
                // writes run: once no result can reach `2f+1` matching replies, or `2f+1`
                // replies disagree, the read goes ordered at once or after the grace the
                // others have to answer (`timeout_one`), not two retransmission timeouts
                // later — each of which may be seconds (twice the slowest recent read).
                let n = self.config.n();
                let wait = if !read_may_certify(o, f, n) {
                    Some(0)
                } else if o.replies.len() > 2 * f {
                    Some(grace)
                } else {
                    None
                };
                if let Some(wait) = wait {
                    o.disagreed = true;
                    let at = Time::from_micros(now.as_micros().saturating_add(wait));
                    o.deadline = o.deadline.min(at);
                }
            }
            return;
        };
        let Some(o) = self.out.remove(&rid) else {
            return;
        };
        for (&j, s) in &o.replies {
            if s.digest != d {
                self.responsive.contradicted(j, now);
            }
        }
        let took = now.as_micros().saturating_sub(o.sent_at.as_micros());
        self.patience.completed(o.kind, took, o.retransmissions > 0);
        if !o.read_only {
            // Replicas that executed this request drop a read of ours with a lower id as
            // stale (their reply cache answers ids up to our last executed one): a read sent
            // before it that a replica had not yet answered — it may have crossed a slower
            // connection — will get no answer there. It goes ordered once the others have
            // had the grace to answer, not at its retransmission timeout (twice the
            // slowest recent read: tens of seconds once one read waited long).
            let at = Time::from_micros(now.as_micros().saturating_add(grace));
            for r in self
                .out
                .values_mut()
                .filter(|r| r.read_only && r.rid < o.rid)
            {
                r.disagreed = true;
                r.deadline = r.deadline.min(at);
            }
        }
        if o.read_only && o.retransmissions == 0 && o.replier != REPLIER_ALL {
            // Moving average (weight 1/8) of completion times of reads that needed no
            // retransmission, and no second ask for the full result (a read that waited
            // the grace would lengthen the grace: `a_dead_designated_replier_is_not_chosen_again`):
            // the hedge waits about twice as long.
            self.read_us = (self.read_us.saturating_mul(7).saturating_add(took) / 8).max(1);
        }
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
            self.view_known = true;
        }
        // `certified(.., true)` only returns a digest some matching reply holds in full.
        let result = result.unwrap_or_default();
        tracing::debug!(
            client = self.keys.me,
            rid = o.rid,
            view = self.view,
            "request completed"
        );
        self.actions.push_back(ClientAction::Completed {
            rid: o.issued,
            result,
        });
    }
}
