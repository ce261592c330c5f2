//! INV-REPLY for the file service (docs/PROTOCOL.md §6.6): every result a correct client
//! accepted equals the model file system's ([`crate::fs::FsModel`]) at its operation's
//! position in the agreed history, compared on what the model knows ([`Outcome`]: no times,
//! no directory sizes). Reads answered by the read-only path are not in the history; they
//! must be *linearizable*: equal to the model's answer on the state after some prefix of the
//! agreed history that holds every change acknowledged before the read was invoked and no
//! operation first invoked after it completed.
//!
//! The model advances along the contiguous agreed prefix, keeping a snapshot after every
//! change (files share their data until written), so reads are judged at the end of the run
//! against every state in their window, and the tree checker ([`super::fs_tree`]) gets the
//! model's tree at any checkpoint.

use super::history::{AgreedHistory, Pos};
use super::results::{Acked, Outcomes};
use super::Sink;
use crate::fs::model::project;
use crate::fs::{describe_op, describe_result, FsModel, Outcome};
use byzfs_bft::{ClientId, RequestId, Seq, Time};
use byzfs_fs::{decode_result, Op, Request};
use std::collections::BTreeMap;

/// Checker name for ordered results.
pub const NAME: &str = "fs-results";
/// Checker name for read-only results.
pub const LINEARIZABILITY: &str = "fs-linearizability";

type RequestKey = (ClientId, RequestId);

/// A request some client sent.
#[derive(Clone, Debug)]
struct Issued {
    op: Vec<u8>,
    decoded: Option<Op>,
    first_invoke: Time,
    correct: bool,
    ambiguous: bool,
}

/// The file-service results checker.
#[derive(Clone, Debug)]
pub struct FsResults {
    issued: BTreeMap<RequestKey, Issued>,
    model: FsModel,
    next_seq: Seq,
    placed: BTreeMap<RequestKey, (Pos, Option<Outcome>)>,
    /// The model after every change, by the position of the change (the first: the empty
    /// file system, at [`Pos::ZERO`]).
    snapshots: Vec<(Pos, FsModel)>,
    /// Every placed operation of a correct client, with its first invocation.
    invoked_at: Vec<(Pos, Time)>,
    acked: Vec<Acked>,
    acked_index: BTreeMap<RequestKey, usize>,
    unplaced_writes: usize,
    acked_write_max_seq: Seq,
    pending: Vec<usize>,
    /// Operations in the agreed history the model could not run (unknown, ambiguous, or
    /// not modelled): from then on the model is not the service's, and nothing is judged.
    pub unmodelled: u64,
    /// Results checked against the model (ordered) or for linearizability.
    pub checked: u64,
}

impl FsResults {
    /// A checker over the empty file system whose root has permission bits `root_mode`.
    pub fn new(root_mode: u32) -> FsResults {
        let model = FsModel::new(root_mode);
        FsResults {
            issued: BTreeMap::new(),
            snapshots: vec![(Pos::ZERO, model.clone())],
            model,
            next_seq: 1,
            placed: BTreeMap::new(),
            invoked_at: Vec::new(),
            acked: Vec::new(),
            acked_index: BTreeMap::new(),
            unplaced_writes: 0,
            acked_write_max_seq: 0,
            pending: Vec::new(),
            unmodelled: 0,
            checked: 0,
        }
    }

    /// A client sent `(client, rid)` with `op`.
    pub fn issue(&mut self, now: Time, client: ClientId, rid: RequestId, op: &[u8], correct: bool) {
        match self.issued.get_mut(&(client, rid)) {
            Some(i) => i.ambiguous |= i.op != op,
            None => {
                self.issued.insert(
                    (client, rid),
                    Issued {
                        op: op.to_vec(),
                        decoded: Request::decode(op).map(|r| r.op),
                        first_invoke: now,
                        correct,
                        ambiguous: false,
                    },
                );
            }
        }
    }

    /// The model's tree after batches `1..=seq`, or `None` while the model has not applied
    /// them all (or stopped modelling).
    pub fn tree_after(&self, seq: Seq) -> Option<Vec<String>> {
        if seq >= self.next_seq || self.unmodelled > 0 {
            return None;
        }
        let i = self.snapshots.partition_point(|(p, _)| p.seq <= seq);
        // The first snapshot is at seq 0, so `i >= 1`.
        self.snapshots.get(i.checked_sub(1)?).map(|(_, m)| m.tree())
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
        let is_get = issued.decoded.as_ref().is_some_and(Op::is_read_only);
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
        let Some(expect) = expect else {
            return true;
        };
        let got = decode_result(&a.result).map(|r| project(&r));
        if got.as_ref() == Some(expect) {
            self.checked += 1;
            return true;
        }
        if a.is_get {
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
                "c{} rid {} {op}: accepted {} but the model at {pos} gives {expect:?}",
                a.client,
                a.rid,
                describe_result(&a.result)
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
                let (outcome, first_invoke, correct) = match issued {
                    Some(Issued {
                        decoded: Some(op),
                        first_invoke,
                        correct,
                        ..
                    }) if self.unmodelled == 0 => {
                        let o = self.model.execute(op);
                        if o.is_none() {
                            self.unmodelled += 1;
                        } else if !op.is_read_only() && !matches!(o, Some(Outcome::Err(_))) {
                            self.snapshots.push((pos, self.model.clone()));
                        }
                        (o, *first_invoke, *correct)
                    }
                    Some(i) => {
                        self.unmodelled += 1;
                        (None, i.first_invoke, i.correct)
                    }
                    None => {
                        self.unmodelled += 1;
                        continue;
                    }
                };
                if correct {
                    self.invoked_at.push((pos, first_invoke));
                    if self.placed.insert((c, rid), (pos, outcome)).is_none() {
                        if let Some(&i) = self.acked_index.get(&(c, rid)) {
                            if !self.acked[i].is_get {
                                self.unplaced_writes -= 1;
                                self.acked_write_max_seq = self.acked_write_max_seq.max(seq);
                            }
                        }
                    }
                }
            }
            self.next_seq += 1;
        }
        if self.next_seq != start {
            for idx in std::mem::take(&mut self.pending) {
                if !self.resolve(sink, now, idx) {
                    self.pending.push(idx);
                }
            }
        }
    }

    /// End of run: reads still unsettled are checked for linearizability. Unplaced writes are
    /// left to the durability checker.
    pub fn finish(&mut self, sink: &mut Sink, now: Time) {
        for idx in std::mem::take(&mut self.pending) {
            if self.acked[idx].is_get {
                self.check_linearizable(sink, now, idx);
            } else {
                self.pending.push(idx);
            }
        }
    }

    fn check_linearizable(&mut self, sink: &mut Sink, now: Time, idx: usize) {
        if self.unmodelled > 0 {
            return;
        }
        let a = &self.acked[idx];
        let Some(op) = self
            .issued
            .get(&(a.client, a.rid))
            .and_then(|i| i.decoded.clone())
        else {
            return;
        };
        let got = decode_result(&a.result).map(|r| project(&r));
        // After every change acknowledged before the read was invoked...
        let lo = self
            .acked
            .iter()
            .filter(|b| !b.is_get && b.complete < a.invoke)
            .filter_map(|b| self.placed.get(&(b.client, b.rid)).map(|(p, _)| *p))
            .max()
            .unwrap_or(Pos::ZERO);
        // ...and before every operation first invoked after it completed.
        let hi = self
            .invoked_at
            .iter()
            .filter(|(_, t)| *t > a.complete)
            .map(|(p, _)| *p)
            .min()
            .unwrap_or(Pos::MAX);
        let mut admissible = Vec::new();
        let mut ok = false;
        // The snapshot in force at `lo` and the later ones before `hi`.
        let first = self.snapshots.partition_point(|(p, _)| *p <= lo).max(1) - 1;
        for (i, (from, m)) in self.snapshots.iter().enumerate().skip(first) {
            if *from >= hi {
                break;
            }
            let to = self.snapshots.get(i + 1).map_or(Pos::MAX, |(p, _)| *p);
            if (*from).max(lo) < to.min(hi) {
                let want = m.read_only(&op);
                ok |= want.is_some() && want == got;
                admissible.push(want);
            }
        }
        self.checked += 1;
        if !ok {
            let what = self
                .issued
                .get(&(a.client, a.rid))
                .map(|i| describe_op(&i.op))
                .unwrap_or_default();
            sink.report(
                LINEARIZABILITY,
                now,
                format!(
                    "c{} rid {} {what} over [{}, {}] µs returned {}; the agreed history allows only {admissible:?} (prefixes {lo}..{hi})",
                    a.client,
                    a.rid,
                    a.invoke.as_micros(),
                    a.complete.as_micros(),
                    describe_result(&a.result),
                ),
            );
        }
    }
}

impl Outcomes for FsResults {
    fn acked(&self) -> &[Acked] {
        &self.acked
    }
    fn position(&self, client: ClientId, rid: RequestId) -> Option<Pos> {
        self.placed.get(&(client, rid)).map(|(p, _)| *p)
    }
    fn next_seq(&self) -> Seq {
        self.next_seq
    }
    fn unplaced_writes(&self) -> usize {
        self.unplaced_writes
    }
    fn acked_write_max_seq(&self) -> Seq {
        self.acked_write_max_seq
    }
    fn checked(&self) -> u64 {
        self.checked
    }
}
