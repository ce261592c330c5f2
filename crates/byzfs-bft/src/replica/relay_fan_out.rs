//! The relay's fan-out (docs/PROTOCOL.md §1.10, "The relay's fan-out"): where a big body the
//! client sent to the primary alone goes next, and how long a replica that holds it leaves a
//! peer's ask for it unanswered while it is on its way to that peer.
//!
//! The backups of a view are in order `p+1, p+2, …` (mod `n`); with fan-out `k`
//! ([`crate::Config::relay_fan_out`]) the primary sends the body to places `0..k` and the
//! backup at place `i` passes it on to place `i+k`. The primary's link carries each body `k`
//! times instead of `3f`, a backup's at most once: across sites the primary's link was the
//! floor of a tree copy (BENCHMARKS.md "The relay's fan-out").
//!
//! A backup further down gets the PRE-PREPARE straight from the primary, before the body,
//! and asks for the body in its next STATUS; every holder answering that ask at once sent a
//! second copy of each body over the links the fan-out was to spare. A holder therefore
//! leaves the ask of a backup after it unanswered for as long as the body may take to reach
//! it ([`pass_on_wait`]); after that (a faulty backup withheld it) the ask is answered as
//! any other, with doubling gaps (`answer_gap.rs`).

use super::answer_gap::{Ask, GAP_DOUBLINGS_MAX};
use super::Replica;
use crate::action::DropReason;
use crate::crypto::Digest;
use crate::ids::ReplicaId;
use crate::service::Service;
use core::time::Duration;
use std::sync::Arc;

/// How long a holder leaves an ask for a body of `len` bytes unanswered when the body is
/// `hops` hops from the asker and nothing is queued ahead of it: one STATUS interval, plus
/// one per hop per interval's worth of bytes at `bytes_per_s` ([`crate::Config::link_rate_kbps`];
/// at least one), at most `2^GAP_DOUBLINGS_MAX` intervals (the longest gap between two
/// answers) and at most half of `view_change_timeout`: a backup that lacks the body cannot
/// execute what follows it, and the client's retransmission starts its view-change timer
/// (a backup busy executing passed a body on 233 ms late and the one after it, refused an
/// answer for 303 ms, left a view whose timer was 100 ms: simulator, slow-execution 1213).
/// What is queued ahead of the copy on the holder's link comes on top (`uplink.rs`).
pub(crate) fn pass_on_wait(
    interval: Duration,
    view_change_timeout: Duration,
    bytes_per_s: u64,
    len: usize,
    hops: usize,
) -> Duration {
    let per_interval = (bytes_per_s as u128 * interval.as_micros() / 1_000_000).max(1);
    let per_hop = usize::try_from((len as u128).div_ceil(per_interval))
        .unwrap_or(usize::MAX)
        .max(1);
    let intervals = 1 + per_hop.saturating_mul(hops);
    let longest = 1usize << GAP_DOUBLINGS_MAX;
    let wait = interval * u32::try_from(intervals.min(longest)).unwrap_or(1 << GAP_DOUBLINGS_MAX);
    wait.min(view_change_timeout / 2)
}

impl<S: Service> Replica<S> {
    /// `r`'s place among the backups of our view (0 right after the primary); `None` for the
    /// primary.
    fn relay_place(&self, r: ReplicaId) -> Option<usize> {
        let n = self.n();
        let p = self.primary() as usize;
        ((r as usize + n - p) % n).checked_sub(1)
    }

    /// The backup at `place` in our view.
    fn backup_at(&self, place: usize) -> ReplicaId {
        ((self.primary() as usize + 1 + place) % self.n()) as ReplicaId
    }

    /// Whom we send a relayed body to: the first `k` backups as primary, the backup `k`
    /// places after us as a backup (none past the last).
    pub(super) fn relay_next(&self) -> Vec<ReplicaId> {
        let k = self.config.relay_fan_out();
        let backups = self.n() - 1;
        match self.relay_place(self.me) {
            None => (0..k.min(backups)).map(|i| self.backup_at(i)).collect(),
            Some(i) if i + k < backups => vec![self.backup_at(i + k)],
            Some(_) => Vec::new(),
        }
    }

    /// Sends the relayed body `d` on to [`Self::relay_next`], and leaves the asks for it of
    /// every backup after us unanswered while it may still be on its way to them: behind
    /// what our link still carries, then hop by hop.
    pub(super) fn relay_onward(&mut self, d: Digest, frame: Arc<[u8]>) {
        let next = self.relay_next();
        let (k, backups) = (self.config.relay_fan_out().max(1), self.n() - 1);
        let from = self.relay_place(self.me).map_or(0, |i| i + 1);
        let (now, len) = (self.now, frame.len());
        let (rate, cap) = (
            self.config.link_bytes_per_s(),
            self.config.view_change_timeout_max,
        );
        // Our copies go out one after another: the last one's wait covers those ahead of it.
        let mut ahead = Duration::ZERO;
        for _ in &next {
            ahead = self.peers.uplink.send(now, len, rate, cap);
        }
        self.peers.uplink.note_crossing(d, now);
        for place in from..backups {
            // Hops from the primary: an upper bound on what is left from us.
            let peer = self.backup_at(place);
            self.defer_body_ask(peer, d, len, place / k + 1, ahead);
        }
        for j in next {
            self.send_frame(j, frame.clone());
        }
    }

    /// We answered `j`'s ask for body `d` with a copy of `len` bytes: `j`'s next asks wait
    /// while that copy may be crossing, behind what our link still carries.
    pub(super) fn body_sent_again(&mut self, j: ReplicaId, d: Digest, len: usize) {
        let (rate, cap) = (
            self.config.link_bytes_per_s(),
            self.config.view_change_timeout_max,
        );
        let ahead = self.peers.uplink.send(self.now, len, rate, cap);
        self.defer_body_ask(j, d, len, 1, ahead);
    }

    /// Leaves `peer`'s asks for body `d` (`len` bytes, `hops` hops away, behind `ahead` of
    /// our link's backlog) unanswered while it may be on its way.
    fn defer_body_ask(
        &mut self,
        peer: ReplicaId,
        d: Digest,
        len: usize,
        hops: usize,
        ahead: Duration,
    ) {
        let c = &self.config;
        let wait = pass_on_wait(
            c.status_interval,
            c.view_change_timeout,
            c.link_bytes_per_s(),
            len,
            hops,
        );
        let until = self.now + (wait + ahead).min(c.view_change_timeout_max);
        self.peers.answer_gaps.defer(peer, Ask::Body(d), until);
    }

    /// A backup that got a relayed body (`FLAG_RELAY`) for the first time passes it on down
    /// the fan-out, once, after checking the client's signature as a forwarded request's
    /// is (`on_request`): a faulty client's badly signed bodies go no further than the
    /// replica it sent them to. In view-change limbo it passes on nothing (the view's order
    /// is not known).
    pub(super) fn pass_on_relayed(&mut self, d: Digest) {
        if self.is_primary() || !self.view.has_new_view || self.relay_next().is_empty() {
            return;
        }
        if !self.signature_checked(d) {
            return self.drop_input(DropReason::BadAuth);
        }
        let Some(frame) = self.requests.store.get(&d).map(|r| r.frame.clone()) else {
            return;
        };
        self.stats.bodies_passed_on += 1;
        self.relay_onward(d, frame);
    }
}

impl<S: Service> Replica<S> {
    /// Whether a slot not yet executed has an accepted PRE-PREPARE naming a big body we lack
    /// and `2f` matching PREPAREs from others: a correct backup prepares only holding every
    /// body, so at least `f+1` correct replicas hold it and our STATUS will fetch it. The
    /// view-change timer then waits (`on_view_change_timeout`): the body may be on its way
    /// down the relay's fan-out, behind a backup busy executing.
    pub(super) fn awaits_a_prepared_body(&self) -> bool {
        self.log
            .slots
            .range(self.log.last_executed.saturating_add(1)..)
            .any(|(_, slot)| {
                slot.pre_prepare.as_ref().is_some_and(|a| {
                    !self.batch_complete(a.digest)
                        && slot.prepare_count(a.digest, false) >= 2 * self.f()
                })
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_grows_with_the_bytes_and_the_hops_up_to_a_bound() {
        let i = Duration::from_millis(150);
        let t = Duration::from_secs(20);
        // 3,500 kbit/s: 65,625 bytes per 150 ms interval.
        let rate = 3_500_000 / 8;
        let waits: Vec<u128> = [
            (100, 1),
            (65_625, 1),
            (65_626, 1),
            (256 * 1024, 2),
            (1 << 20, 2),
        ]
        .into_iter()
        .map(|(len, hops)| pass_on_wait(i, t, rate, len, hops).as_millis())
        .collect();
        assert_eq!(waits, vec![300, 300, 450, 1_350, 4_800]);
        // Never above half the view-change timeout (5 s by default).
        let short = Duration::from_secs(5);
        assert_eq!(pass_on_wait(i, short, rate, 1 << 20, 2).as_millis(), 2_500);
        assert_eq!(pass_on_wait(i, short, rate, 100, 1).as_millis(), 300);
        // At 1 Mb/s (18,750 bytes an interval) a 64 KiB body takes four intervals a hop.
        assert_eq!(
            pass_on_wait(i, t, 125_000, 64 * 1024, 1).as_millis(),
            5 * 150
        );
    }
}
