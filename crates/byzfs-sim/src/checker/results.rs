//! INV-REPLY (docs/PROTOCOL.md §6.6): every result a correct client accepted equals the reference
//! model's result for that operation at its position in the agreed history. Reads answered by
//! the read-only path (§1.8) are not in the history; they must be *linearizable* (§6.7): the
//! value returned equals the key's value after some prefix of the agreed history that contains
//! every operation on the key acknowledged before the read was invoked and no operation on the
//! key first invoked after the read completed.
//!
//! The model advances incrementally along the contiguous agreed prefix; an accepted result is
//! checked as soon as its operation is placed. Reads not placed (or, with the read-only
//! optimisation on, whose ordered result differs because the client accepted the read-only
//! answer) are checked for linearizability at the end of the run.

use super::history::{AgreedHistory, Pos};
use super::{describe_op, show, Sink};
use crate::kv::{op_key, KvModel, KvOp, KvResult};
use byzfs_bft::{ClientId, RequestId, Seq, Time};
use std::collections::BTreeMap;

/// Checker name for ordered results.
pub const NAME: &str = "results";
/// Checker name for read-only results.
pub const LINEARIZABILITY: &str = "linearizability";

/// `(client, rid)`.
type RequestKey = (ClientId, RequestId);
/// A key's value after the write at a position.
type Version = (Pos, Option<Vec<u8>>);

/// A request some client sent.
#[derive(Clone, Debug)]
pub struct Issued {
    /// The operation bytes.
    pub op: Vec<u8>,
    /// The decoded operation.
    pub decoded: Option<KvOp>,
    /// When it was first sent.
    pub first_invoke: Time,
    /// Sent by a correct client.
    pub correct: bool,
    /// A faulty client sent different operations under this id: its effect is unknown.
    pub ambiguous: bool,
}

/// A result a correct client accepted.
#[derive(Clone, Debug)]
pub struct Acked {
    /// Client.
    pub client: ClientId,
    /// Request id.
    pub rid: RequestId,
    /// Accepted result bytes.
    pub result: Vec<u8>,
    /// Invocation time.
    pub invoke: Time,
    /// Completion time.
    pub complete: Time,
    /// The operation is a `Get`.
    pub is_get: bool,
}

/// The results checker.
#[derive(Clone, Debug)]
pub struct Results {
    read_only_opt: bool,
    issued: BTreeMap<(ClientId, RequestId), Issued>,
    model: KvModel,
    next_seq: Seq,
    placed: BTreeMap<(ClientId, RequestId), (Pos, KvResult)>,
    /// Per key: the value after each write, by position.
    versions: BTreeMap<Vec<u8>, Vec<Version>>,
    /// Per key: every placed operation of a correct client.
    key_ops: BTreeMap<Vec<u8>, Vec<(Pos, RequestKey)>>,
    acked: Vec<Acked>,
    acked_index: BTreeMap<RequestKey, usize>,
    /// Accepted writes not yet in the agreed history.
    unplaced_writes: usize,
    /// Highest sequence number holding an accepted write.
    acked_write_max_seq: Seq,
    pending: Vec<usize>,
    /// Results checked against the model (ordered) or for linearizability.
    pub checked: u64,
}

fn is_write(op: &KvOp) -> bool {
    !matches!(op, KvOp::Get { .. } | KvOp::Time)
}

fn show_result(r: &[u8]) -> String {
    match KvResult::decode(r) {
        Some(KvResult::Value(Some(v))) => format!("Value({})", show(&v)),
        Some(KvResult::CasFailed(Some(v))) => format!("CasFailed({})", show(&v)),
        Some(x) => format!("{x:?}"),
        None => format!("<undecodable {}B>", r.len()),
    }
}

impl Results {
    /// A checker; `read_only_opt` says whether replicas may answer reads without ordering.
    pub fn new(read_only_opt: bool) -> Results {
        Results {
            read_only_opt,
            issued: BTreeMap::new(),
            model: KvModel::new(),
            next_seq: 1,
            placed: BTreeMap::new(),
            versions: BTreeMap::new(),
            key_ops: BTreeMap::new(),
            acked: Vec::new(),
            acked_index: BTreeMap::new(),
            unplaced_writes: 0,
            acked_write_max_seq: 0,
            pending: Vec::new(),
            checked: 0,
        }
    }

    /// A client sent `(client, rid)` with `op`.
    pub fn issue(&mut self, now: Time, client: ClientId, rid: RequestId, op: &[u8], correct: bool) {
        match self.issued.get_mut(&(client, rid)) {
            Some(i) => {
                if i.op != op {
                    i.ambiguous = true;
                }
            }
            None => {
                self.issued.insert(
                    (client, rid),
                    Issued {
                        op: op.to_vec(),
                        decoded: KvOp::decode(op),
                        first_invoke: now,
                        correct,
                        ambiguous: false,
                    },
                );
            }
        }
    }

    /// Every accepted result.
    pub fn acked(&self) -> &[Acked] {
        &self.acked
    }

    /// Accepted writes not yet in the agreed history.
    pub fn unplaced_writes(&self) -> usize {
        self.unplaced_writes
    }

    /// The highest sequence number holding an accepted write (0 if none).
    pub fn acked_write_max_seq(&self) -> Seq {
        self.acked_write_max_seq
    }

    /// Where `(client, rid)` sits in the agreed history, if placed.
    pub fn position(&self, client: ClientId, rid: RequestId) -> Option<Pos> {
        self.placed.get(&(client, rid)).map(|(p, _)| *p)
    }

    /// The key of `Get` `(client, rid)` if a correct client issued it unambiguously.
    pub fn correct_get_key(&self, client: ClientId, rid: RequestId) -> Option<&[u8]> {
        let i = self.issued.get(&(client, rid))?;
        match &i.decoded {
            Some(KvOp::Get { key }) if i.correct && !i.ambiguous => Some(key),
            _ => None,
        }
    }

    /// The value of `key` after the agreed history's batches `1..=seq`, or `None` while the
    /// model has not applied them all. Correct clients' keys only: a faulty client's writes
    /// are not modelled (they touch its own keys).
    pub fn value_after(&self, key: &[u8], seq: Seq) -> Option<Option<Vec<u8>>> {
        if seq >= self.next_seq {
            return None;
        }
        let versions = self.versions.get(key).map(Vec::as_slice).unwrap_or(&[]);
        let value = versions
            .iter()
            .rev()
            .find(|(p, _)| p.seq <= seq)
            .and_then(|(_, v)| v.clone());
        Some(value)
    }

    /// The first sequence number the model has not applied (the agreed prefix is contiguous
    /// below it).
    pub fn next_seq(&self) -> Seq {
        self.next_seq
    }

    /// A correct client accepted `result` for `(client, rid)`.
    pub fn accept(
        &mut self,
        sink: &mut Sink,
        now: Time,
        client: ClientId,
        rid: RequestId,
        result: &[u8],
    ) {
        let Some(issued) = self.issued.get(&(client, rid)) else {
            sink.report(
                NAME,
                now,
                format!("c{client} completed rid {rid}, which it never issued"),
            );
            return;
        };
        if self.acked_index.contains_key(&(client, rid)) {
            sink.report(NAME, now, format!("c{client} completed rid {rid} twice"));
            return;
        }
        let is_get = matches!(issued.decoded, Some(KvOp::Get { .. }));
        if !is_get {
            match self.placed.get(&(client, rid)) {
                Some((pos, _)) => self.acked_write_max_seq = self.acked_write_max_seq.max(pos.seq),
                None => self.unplaced_writes += 1,
            }
        }
        self.acked_index.insert((client, rid), self.acked.len());
        self.acked.push(Acked {
            client,
            rid,
            result: result.to_vec(),
            invoke: issued.first_invoke,
            complete: now,
            is_get,
        });
        let idx = self.acked.len() - 1;
        if !self.resolve(sink, now, idx) {
            self.pending.push(idx);
        }
    }

    /// Checks accepted result `idx` if its position is known; returns whether it is settled.
    fn resolve(&mut self, sink: &mut Sink, now: Time, idx: usize) -> bool {
        let a = &self.acked[idx];
        let Some((pos, expect)) = self.placed.get(&(a.client, a.rid)) else {
            return false;
        };
        let expect = expect.encode();
        if expect == a.result {
            self.checked += 1;
            return true;
        }
        if a.is_get && self.read_only_opt {
            // Possibly accepted from the read-only path before the fallback was ordered:
            // judged by linearizability at the end.
            return false;
        }
        let op = self
            .issued
            .get(&(a.client, a.rid))
            .map(|i| describe_op(&i.op))
            .unwrap_or_default();
        sink.report(
            NAME,
            now,
            format!(
                "c{} rid {} {op}: accepted {} but the agreed history at {pos} gives {}",
                a.client,
                a.rid,
                show_result(&a.result),
                show_result(&expect)
            ),
        );
        true
    }

    /// Applies every newly contiguous agreed batch to the model and checks what it can.
    pub fn advance(&mut self, sink: &mut Sink, now: Time, history: &AgreedHistory) {
        let start = self.next_seq;
        while let Some(content) = history.content(self.next_seq) {
            let seq = self.next_seq;
            for (idx, &(c, rid)) in content.requests.iter().enumerate() {
                let pos = Pos {
                    seq,
                    idx: idx as u32,
                };
                let issued = self.issued.get(&(c, rid)).filter(|i| !i.ambiguous);
                let Some(Issued {
                    decoded: Some(op),
                    correct,
                    ..
                }) = issued
                else {
                    // Unknown or ambiguous (faulty client, own keys only): only the clock moves.
                    self.model.tick(&content.nondet);
                    continue;
                };
                let res = self.model.execute(op, &content.nondet);
                if *correct && self.placed.insert((c, rid), (pos, res)).is_none() {
                    if let Some(&i) = self.acked_index.get(&(c, rid)) {
                        if !self.acked[i].is_get {
                            self.unplaced_writes -= 1;
                            self.acked_write_max_seq = self.acked_write_max_seq.max(seq);
                        }
                    }
                }
                if let Some(k) = op_key(op) {
                    if *correct {
                        self.key_ops
                            .entry(k.to_vec())
                            .or_default()
                            .push((pos, (c, rid)));
                    }
                    if is_write(op) {
                        let v = self.model.get(k).cloned();
                        self.versions.entry(k.to_vec()).or_default().push((pos, v));
                    }
                }
            }
            self.next_seq += 1;
        }
        if self.next_seq != start {
            let pending = std::mem::take(&mut self.pending);
            for idx in pending {
                if !self.resolve(sink, now, idx) {
                    self.pending.push(idx);
                }
            }
        }
    }

    /// End of run: reads still unsettled are checked for linearizability. Unplaced writes are
    /// left to the durability checker.
    pub fn finish(&mut self, sink: &mut Sink, now: Time) {
        let pending = std::mem::take(&mut self.pending);
        for idx in pending {
            if !self.acked[idx].is_get {
                self.pending.push(idx);
                continue;
            }
            self.check_linearizable(sink, now, idx);
        }
    }

    /// The window of prefixes `[lo, hi)` a read of `key` over `[invoke, complete]` may observe.
    ///
    /// `lo` is the latest point an operation on `key` acknowledged before `invoke` is known to
    /// be linearized at. A write's is its place in the agreed history. A `Get`'s place in the
    /// history is its point only if its result came from that ordered execution; with the
    /// read-only optimisation on, the client may have accepted read-only (or earlier tentative)
    /// replies long before the fallback request was ordered, so the checker only assumes that
    /// such a read saw the earliest version it could have observed (seed 2144 of `partition`
    /// was a false report when the fallback's place was used).
    pub fn window(&self, key: &[u8], invoke: Time, complete: Time) -> (Pos, Pos) {
        let mut lo = self.writes_before(key, invoke);
        if self.read_only_opt {
            for a in self
                .acked
                .iter()
                .filter(|a| a.is_get && a.complete < invoke)
            {
                if self.op_key_of(a.client, a.rid) == Some(key) {
                    if let Some(p) = self.earliest_point(key, a) {
                        lo = lo.max(p);
                    }
                }
            }
        } else {
            for a in self
                .acked
                .iter()
                .filter(|a| a.is_get && a.complete < invoke)
            {
                if self.op_key_of(a.client, a.rid) == Some(key) {
                    if let Some((p, _)) = self.placed.get(&(a.client, a.rid)) {
                        lo = lo.max(*p);
                    }
                }
            }
        }
        let mut hi = Pos::MAX;
        for (p, id) in self.key_ops.get(key).map(Vec::as_slice).unwrap_or(&[]) {
            if self
                .issued
                .get(id)
                .is_some_and(|i| i.first_invoke > complete)
            {
                hi = hi.min(*p);
            }
        }
        (lo, hi)
    }

    /// The key an issued operation touches.
    fn op_key_of(&self, client: ClientId, rid: RequestId) -> Option<&[u8]> {
        self.issued
            .get(&(client, rid))
            .and_then(|i| i.decoded.as_ref())
            .and_then(op_key)
    }

    /// The latest place of a write on `key` acknowledged before `before`.
    fn writes_before(&self, key: &[u8], before: Time) -> Pos {
        let mut lo = Pos::ZERO;
        for a in self
            .acked
            .iter()
            .filter(|a| !a.is_get && a.complete < before)
        {
            if self.op_key_of(a.client, a.rid) == Some(key) {
                if let Some((p, _)) = self.placed.get(&(a.client, a.rid)) {
                    lo = lo.max(*p);
                }
            }
        }
        lo
    }

    /// The earliest point at which the read `a` of `key` could have been linearized: the
    /// start of the first version, at or after the writes acknowledged before it was invoked,
    /// that holds the value it returned. `None` if none does (that read is reported itself).
    fn earliest_point(&self, key: &[u8], a: &Acked) -> Option<Pos> {
        let Some(KvResult::Value(value)) = KvResult::decode(&a.result) else {
            return None;
        };
        let lo = self.writes_before(key, a.invoke);
        let mut start = Pos::ZERO;
        let mut current: Option<&Vec<u8>> = None;
        let versions = self.versions.get(key).map(Vec::as_slice).unwrap_or(&[]);
        for (p, v) in versions {
            if *p > lo && current == value.as_ref() {
                return Some(start.max(lo));
            }
            start = *p;
            current = v.as_ref();
        }
        (current == value.as_ref()).then_some(start.max(lo))
    }

    fn check_linearizable(&mut self, sink: &mut Sink, now: Time, idx: usize) {
        let a = &self.acked[idx];
        let Some(KvOp::Get { key }) = self
            .issued
            .get(&(a.client, a.rid))
            .and_then(|i| i.decoded.clone())
        else {
            return;
        };
        let value = match KvResult::decode(&a.result) {
            Some(KvResult::Value(v)) => v,
            _ => {
                sink.report(
                    LINEARIZABILITY,
                    now,
                    format!(
                        "c{} rid {} Get({}) returned {}",
                        a.client,
                        a.rid,
                        show(&key),
                        show_result(&a.result)
                    ),
                );
                return;
            }
        };
        let (lo, hi) = self.window(&key, a.invoke, a.complete);
        let mut admissible = Vec::new();
        let mut ok = false;
        let mut consider = |from: Pos, to: Pos, v: Option<&Vec<u8>>| {
            if from.max(lo) < to.min(hi) {
                ok |= v == value.as_ref();
                admissible.push(v.map(|v| show(v)).unwrap_or_else(|| "∅".into()));
            }
        };
        let mut prev: (Pos, Option<&Vec<u8>>) = (Pos::ZERO, None);
        for (p, v) in self.versions.get(&key).map(Vec::as_slice).unwrap_or(&[]) {
            consider(prev.0, *p, prev.1);
            prev = (*p, v.as_ref());
        }
        consider(prev.0, Pos::MAX, prev.1);
        self.checked += 1;
        if !ok {
            sink.report(
                LINEARIZABILITY,
                now,
                format!(
                    "c{} rid {} Get({}) over [{}, {}] µs returned {}; the agreed history allows only {:?} \
                     (prefixes {lo}..{hi})",
                    a.client,
                    a.rid,
                    show(&key),
                    a.invoke.as_micros(),
                    a.complete.as_micros(),
                    value.as_deref().map(show).unwrap_or_else(|| "∅".into()),
                    admissible
                ),
            );
        }
    }
}

/// What the durability checker and the liveness phase read of a results checker: the
/// accepted results and where they sit in the agreed history (the key-value [`Results`] and
/// the file service's [`super::fs_results::FsResults`]).
pub trait Outcomes {
    /// Every accepted result.
    fn acked(&self) -> &[Acked];
    /// Where `(client, rid)` sits in the agreed history, if placed.
    fn position(&self, client: ClientId, rid: RequestId) -> Option<Pos>;
    /// The first sequence number the model has not applied.
    fn next_seq(&self) -> Seq;
    /// Accepted writes not yet in the agreed history.
    fn unplaced_writes(&self) -> usize;
    /// The highest sequence number holding an accepted write (0 if none).
    fn acked_write_max_seq(&self) -> Seq;
    /// Results checked.
    fn checked(&self) -> u64;
}

impl Outcomes for Results {
    fn acked(&self) -> &[Acked] {
        Results::acked(self)
    }
    fn position(&self, client: ClientId, rid: RequestId) -> Option<Pos> {
        Results::position(self, client, rid)
    }
    fn next_seq(&self) -> Seq {
        Results::next_seq(self)
    }
    fn unplaced_writes(&self) -> usize {
        Results::unplaced_writes(self)
    }
    fn acked_write_max_seq(&self) -> Seq {
        Results::acked_write_max_seq(self)
    }
    fn checked(&self) -> u64 {
        self.checked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::history::{Content, Entry};
    use byzfs_bft::Digest;

    fn k() -> Vec<u8> {
        b"k".to_vec()
    }
    fn append(v: &str) -> Vec<u8> {
        KvOp::Append {
            key: k(),
            value: v.as_bytes().to_vec(),
        }
        .encode()
    }
    fn get() -> Vec<u8> {
        KvOp::Get { key: k() }.encode()
    }
    fn value(v: Option<&str>) -> Vec<u8> {
        KvResult::Value(v.map(|s| s.as_bytes().to_vec())).encode()
    }
    fn commit(h: &mut AgreedHistory, seq: Seq, reqs: &[(u64, u64)]) {
        h.entries.insert(
            seq,
            Entry {
                digest: Digest::ZERO,
                content: Some(Content {
                    nondet: 0u64.to_le_bytes().to_vec(),
                    requests: reqs.to_vec(),
                    digests: Vec::new(),
                }),
                first: 0,
                at: Time(0),
            },
        );
    }

    #[test]
    fn ordered_results_must_match_the_model() {
        let mut r = Results::new(true);
        let mut s = Sink::new(1, "t");
        let mut h = AgreedHistory::default();
        r.issue(Time(1), 1, 1, &append("a"), true);
        r.issue(Time(2), 2, 1, &append("b"), true);
        commit(&mut h, 1, &[(1, 1), (2, 1)]);
        r.advance(&mut s, Time(3), &h);
        r.accept(&mut s, Time(4), 1, 1, &value(Some("a")));
        assert!(!s.any());
        // Client 2 accepted a result the history does not produce.
        r.accept(&mut s, Time(4), 2, 1, &value(Some("b")));
        assert_eq!(s.violations().len(), 1);
        assert_eq!(s.violations()[0].checker, NAME);
    }

    #[test]
    fn result_accepted_before_placement_is_checked_on_placement() {
        let mut r = Results::new(false);
        let mut s = Sink::new(1, "t");
        let mut h = AgreedHistory::default();
        r.issue(Time(1), 1, 1, &append("a"), true);
        r.accept(&mut s, Time(2), 1, 1, &value(Some("WRONG")));
        assert!(!s.any());
        commit(&mut h, 1, &[(1, 1)]);
        r.advance(&mut s, Time(3), &h);
        assert_eq!(s.violations().len(), 1);
    }

    #[test]
    fn read_only_get_of_a_value_never_written_is_not_linearizable() {
        let mut r = Results::new(true);
        let mut s = Sink::new(1, "t");
        let mut h = AgreedHistory::default();
        r.issue(Time(1), 1, 1, &append("a"), true);
        commit(&mut h, 1, &[(1, 1)]);
        r.advance(&mut s, Time(2), &h);
        r.accept(&mut s, Time(3), 1, 1, &value(Some("a")));
        r.issue(Time(10), 2, 1, &get(), true);
        r.accept(&mut s, Time(11), 2, 1, &value(Some("zzz")));
        r.finish(&mut s, Time(20));
        assert_eq!(s.violations().len(), 1);
        assert_eq!(s.violations()[0].checker, LINEARIZABILITY);
    }

    #[test]
    fn read_only_get_must_see_writes_acknowledged_before_it() {
        let mut r = Results::new(true);
        let mut s = Sink::new(1, "t");
        let mut h = AgreedHistory::default();
        r.issue(Time(1), 1, 1, &append("a"), true);
        r.issue(Time(2), 1, 2, &append("b"), true);
        commit(&mut h, 1, &[(1, 1)]);
        commit(&mut h, 2, &[(1, 2)]);
        r.advance(&mut s, Time(3), &h);
        r.accept(&mut s, Time(4), 1, 1, &value(Some("a")));
        r.accept(&mut s, Time(5), 1, 2, &value(Some("ab")));
        // Stale read after "ab" was acknowledged: violation.
        r.issue(Time(6), 2, 1, &get(), true);
        r.accept(&mut s, Time(7), 2, 1, &value(Some("a")));
        // A read concurrent with the second append may see either.
        r.issue(Time(3), 3, 1, &get(), true);
        r.accept(&mut s, Time(4), 3, 1, &value(Some("a")));
        r.issue(Time(3), 4, 1, &get(), true);
        r.accept(&mut s, Time(4), 4, 1, &value(Some("ab")));
        r.finish(&mut s, Time(20));
        assert_eq!(s.violations().len(), 1, "{:?}", s.violations());
        assert!(s.violations()[0].message.contains("c2 rid 1"));
    }

    #[test]
    fn read_only_get_must_not_see_writes_invoked_after_it_completed() {
        let mut r = Results::new(true);
        let mut s = Sink::new(1, "t");
        let mut h = AgreedHistory::default();
        r.issue(Time(1), 2, 1, &get(), true);
        r.accept(&mut s, Time(2), 2, 1, &value(Some("a")));
        r.issue(Time(5), 1, 1, &append("a"), true);
        commit(&mut h, 1, &[(1, 1)]);
        r.advance(&mut s, Time(6), &h);
        r.accept(&mut s, Time(7), 1, 1, &value(Some("a")));
        r.finish(&mut s, Time(20));
        assert_eq!(s.violations().len(), 1, "read from the future");
        // The initial (absent) value would have been fine.
        let mut r2 = Results::new(true);
        let mut s2 = Sink::new(1, "t");
        r2.issue(Time(1), 2, 1, &get(), true);
        r2.accept(&mut s2, Time(2), 2, 1, &value(None));
        r2.finish(&mut s2, Time(20));
        assert!(!s2.any());
    }

    #[test]
    fn an_earlier_read_only_get_bounds_a_later_read_by_what_it_saw_not_by_its_fallback() {
        // Seed 2144 of `partition`: c2's Get was answered read-only ("a") and its ordered
        // fallback landed after a later append; c3's read after it may still return "a".
        let mut r = Results::new(true);
        let mut s = Sink::new(1, "t");
        let mut h = AgreedHistory::default();
        r.issue(Time(1), 1, 1, &append("a"), true);
        commit(&mut h, 1, &[(1, 1)]);
        r.advance(&mut s, Time(2), &h);
        r.accept(&mut s, Time(2), 1, 1, &value(Some("a")));
        r.issue(Time(3), 2, 1, &get(), true);
        r.accept(&mut s, Time(4), 2, 1, &value(Some("a")));
        r.issue(Time(5), 3, 1, &get(), true);
        r.accept(&mut s, Time(6), 3, 1, &value(Some("a")));
        r.issue(Time(7), 1, 2, &append("b"), true);
        commit(&mut h, 2, &[(1, 2)]);
        commit(&mut h, 3, &[(2, 1)]);
        r.advance(&mut s, Time(8), &h);
        r.accept(&mut s, Time(8), 1, 2, &value(Some("ab")));
        r.finish(&mut s, Time(20));
        assert!(!s.any(), "{:?}", s.violations());
        // …but a read after a read that saw "ab" must not go back to "a".
        r.issue(Time(21), 4, 1, &get(), true);
        r.accept(&mut s, Time(22), 4, 1, &value(Some("ab")));
        r.issue(Time(23), 5, 1, &get(), true);
        r.accept(&mut s, Time(24), 5, 1, &value(Some("a")));
        r.finish(&mut s, Time(30));
        assert_eq!(s.violations().len(), 1, "{:?}", s.violations());
        assert!(s.violations()[0].message.contains("c5 rid 1"));
    }

    #[test]
    fn faulty_client_ops_only_move_the_clock() {
        let mut r = Results::new(false);
        let mut s = Sink::new(1, "t");
        let mut h = AgreedHistory::default();
        r.issue(Time(1), 9, 1, &append("x"), false);
        r.issue(Time(1), 9, 1, &append("y"), false); // ambiguous
        r.issue(Time(1), 1, 1, &KvOp::Time.encode(), true);
        commit(&mut h, 1, &[(9, 1), (1, 1)]);
        r.advance(&mut s, Time(2), &h);
        // The batch's timestamp (0: not above the initial clock) leaves the clock at 0.
        r.accept(&mut s, Time(3), 1, 1, &KvResult::Time(0).encode());
        assert!(!s.any(), "{:?}", s.violations());
    }
}
