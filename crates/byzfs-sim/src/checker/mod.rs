//! The oracle: online checkers of docs/PROTOCOL.md §6.6, one file per invariant. The simulator
//! feeds it every persist record, event and outgoing frame of every replica, every client
//! invocation and completion, and the replica's getters after every step. Only *correct*
//! replicas (honest code, own state) are held to the invariants; Byzantine replicas, twins and
//! replicas restarted without their disk are faulty.

pub mod agreement;
pub mod authentic;
pub mod checkpoints;
pub mod client_order;
pub mod committed_prepared;
pub mod durability;
pub mod exactly_once;
pub mod fs_results;
pub mod fs_tree;
pub mod history;
pub mod liveness;
pub mod persist;
pub mod prefix;
pub mod prepared;
pub mod read_floor;
pub mod read_only;
pub mod reply_cache;
pub mod request_store;
pub mod results;
pub mod slow_view;
pub mod stable_quorum;
pub mod stable_view;
pub mod view;
pub mod view_jump;

use crate::kv::KvOp;
use byzfs_bft::client::FLAG_READ_ONLY;
use byzfs_bft::message::{Message, Tag};
use byzfs_bft::wire::Frame;
use byzfs_bft::{
    ClientId, Digest, Event, PersistRecord, Principal, Replica, ReplicaId, RequestId, Seq, Service,
    Time, View,
};
use std::fmt;

/// One broken invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Which checker.
    pub checker: &'static str,
    /// The run's seed.
    pub seed: u64,
    /// The run's scenario.
    pub scenario: String,
    /// Virtual time, µs.
    pub time: Time,
    /// What went wrong.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} (at t={} µs)",
            self.checker,
            self.message,
            self.time.as_micros()
        )
    }
}

/// Collects violations of one run.
#[derive(Clone, Debug)]
pub struct Sink {
    seed: u64,
    scenario: String,
    violations: Vec<Violation>,
}

/// At most this many violations are kept per run (the first one is what matters).
pub const VIOLATIONS_MAX: usize = 16;

impl Sink {
    /// A sink for one run.
    pub fn new(seed: u64, scenario: &str) -> Sink {
        Sink {
            seed,
            scenario: scenario.to_string(),
            violations: Vec::new(),
        }
    }

    /// Records a violation.
    pub fn report(&mut self, checker: &'static str, time: Time, message: String) {
        if self.violations.len() < VIOLATIONS_MAX {
            self.violations.push(Violation {
                checker,
                seed: self.seed,
                scenario: self.scenario.clone(),
                time,
                message,
            });
        }
    }

    /// Whether anything was reported.
    pub fn any(&self) -> bool {
        !self.violations.is_empty()
    }

    /// The violations so far.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// Takes the violations.
    pub fn into_violations(self) -> Vec<Violation> {
        self.violations
    }
}

/// How a replica instance is judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Honest code with its own durable state: held to every safety invariant.
    Correct,
    /// Runs an adversary strategy.
    Byzantine,
    /// One of two instances sharing an identity (Twins, §5.1).
    Twin,
    /// Restarted (or will be) with an empty disk: counts as one of the `f` faulty.
    Amnesiac,
}

impl Role {
    /// Whether the safety invariants apply.
    pub fn is_correct(self) -> bool {
        self == Role::Correct
    }
}

/// What the checkers read from a replica after each step.
pub trait Observe {
    /// Current view.
    fn view(&self) -> View;
    /// Last committed-and-executed sequence number.
    fn last_executed(&self) -> Seq;
    /// Last tentatively executed sequence number.
    fn last_tentative(&self) -> Seq;
    /// Last stable checkpoint.
    fn last_stable(&self) -> Seq;
    /// Whether state transfer is in progress.
    fn is_fetching(&self) -> bool;
    /// Digest of the live state.
    fn state_digest(&self) -> Digest;
    /// How many results the reply cache keeps for client `c`.
    fn cached_results(&self, c: ClientId) -> usize;
    /// How many requests of client `c` the replica stores.
    fn stored_requests(&self, c: ClientId) -> usize;
}

impl<S: Service> Observe for Replica<S> {
    fn view(&self) -> View {
        Replica::view(self)
    }
    fn last_executed(&self) -> Seq {
        Replica::last_executed(self)
    }
    fn last_tentative(&self) -> Seq {
        Replica::last_tentative(self)
    }
    fn last_stable(&self) -> Seq {
        Replica::last_stable(self)
    }
    fn is_fetching(&self) -> bool {
        Replica::is_fetching(self)
    }
    fn state_digest(&self) -> Digest {
        Replica::state_digest(self)
    }
    fn cached_results(&self, c: ClientId) -> usize {
        Replica::cached_results(self, c)
    }
    fn stored_requests(&self, c: ClientId) -> usize {
        Replica::stored_requests(self, c)
    }
}

/// Every online checker, fed by the simulator. Instances are network node indices of replica
/// instances (a twin pair has two); a correct replica's instance index is its replica id.
pub struct Oracle {
    /// Violations found.
    pub sink: Sink,
    roles: Vec<Role>,
    /// INV-AGREE (and the agreed history).
    pub agreement: agreement::Agreement,
    /// INV-CKPT.
    pub checkpoints: checkpoints::Checkpoints,
    /// INV-PREFIX.
    pub prefix: prefix::Prefix,
    /// INV-VALID (exactly once, issued by a client).
    pub exactly_once: exactly_once::ExactlyOnce,
    /// INV-CLIENT-ORDER (a client's writes run in its order).
    pub client_order: client_order::ClientOrder,
    /// INV-REPLY-CACHE (at most a window of results per client).
    pub reply_cache: reply_cache::ReplyCacheBound,
    /// At most two windows of stored requests per client.
    pub request_store: request_store::RequestStoreBound,
    /// Persist before send (§3.6 #11, docs/STYLE.md §3).
    pub persist: persist::PersistBeforeSend,
    /// INV-REPLY and linearizability of read-only results.
    pub results: results::Results,
    /// INV-RO-COMMITTED: read-only answers come from the committed state.
    pub read_only: read_only::ReadOnlyCommitted,
    /// INV-VIEW.
    pub view: view::ViewMonotonic,
    /// INV-PREPARED (and the record of prepared certificates).
    pub prepared: prepared::Prepared,
    /// committed-local ⇒ `f+1` correct replicas prepared.
    pub committed_prepared: committed_prepared::CommittedPrepared,
    /// No view change in a run that promises none (off unless the plan says so).
    pub stable_view: stable_view::StableView,
    /// Forged frames are dropped.
    pub authentic: authentic::Authentic,
    /// The `f+1` join rule, seen from outside.
    pub view_jump: view_jump::ViewJump,
    /// Stable on `2f+1` CHECKPOINTs really sent.
    pub stable_quorum: stable_quorum::StableQuorum,
    /// Reads see what the replica already sent COMMIT for.
    pub read_floor: read_floor::ReadFloor,
    /// A slow primary's view ends under load (off unless the plan says so).
    pub slow_view: slow_view::SlowView,
    /// The file service's checkers, in the `fs-` families (which replace [`Oracle::results`]
    /// and [`Oracle::read_only`], checkers of the key-value service).
    pub fs: Option<FsOracle>,
    max_frame: usize,
}

/// The checkers of the file service's results and trees.
#[derive(Clone, Debug)]
pub struct FsOracle {
    /// INV-REPLY against the model file system, and linearizability of reads.
    pub results: fs_results::FsResults,
    /// Checkpoints hold the same tree at every correct replica, and the model's.
    pub tree: fs_tree::FsTree,
}

impl FsOracle {
    /// The checkers of a file system whose root has permission bits `root_mode`.
    pub fn new(root_mode: u32) -> FsOracle {
        FsOracle {
            results: fs_results::FsResults::new(root_mode),
            tree: fs_tree::FsTree::default(),
        }
    }
}

impl Oracle {
    /// An oracle for a run. `roles[i]` is replica instance `i`'s role (`n = 3f+1` replicas,
    /// plus one more instance with twins); `max_frame` bounds parsed frames; `read_only_opt`
    /// says whether results may come from the read-only path.
    pub fn new(
        seed: u64,
        scenario: &str,
        roles: Vec<Role>,
        max_frame: usize,
        read_only_opt: bool,
    ) -> Oracle {
        // n = 3f+1, or 3f+2 instances with a twin: either way f = (instances - 1) / 3.
        let f = roles.len().saturating_sub(1) / 3;
        Oracle {
            sink: Sink::new(seed, scenario),
            roles,
            agreement: agreement::Agreement::default(),
            checkpoints: checkpoints::Checkpoints::default(),
            prefix: prefix::Prefix::default(),
            exactly_once: exactly_once::ExactlyOnce::default(),
            client_order: client_order::ClientOrder::default(),
            reply_cache: reply_cache::ReplyCacheBound::default(),
            request_store: request_store::RequestStoreBound::default(),
            persist: persist::PersistBeforeSend::new(max_frame),
            results: results::Results::new(read_only_opt),
            read_only: read_only::ReadOnlyCommitted::default(),
            view: view::ViewMonotonic::default(),
            prepared: prepared::Prepared::default(),
            committed_prepared: committed_prepared::CommittedPrepared::new(f),
            stable_view: stable_view::StableView::default(),
            authentic: authentic::Authentic::default(),
            view_jump: view_jump::ViewJump::default(),
            stable_quorum: stable_quorum::StableQuorum::new(f),
            read_floor: read_floor::ReadFloor::default(),
            slow_view: slow_view::SlowView::default(),
            fs: None,
            max_frame,
        }
    }

    /// The results checker of the service the run replicates.
    pub fn outcomes(&self) -> &dyn results::Outcomes {
        match &self.fs {
            Some(fs) => &fs.results,
            None => &self.results,
        }
    }

    /// Correct instance `inst` holds checkpoint `seq` (`how`: stable, transferred) with this
    /// file tree (file-service runs).
    pub fn fs_checkpoint(
        &mut self,
        now: Time,
        inst: usize,
        seq: Seq,
        tree: Result<Vec<String>, String>,
        how: &str,
    ) {
        if let Some(fs) = &mut self.fs {
            fs.tree
                .on_checkpoint(&mut self.sink, now, inst, seq, tree, how);
            fs.tree.check(&mut self.sink, now, &fs.results);
        }
    }

    /// Whether instance `inst` is held to the safety invariants.
    pub fn is_correct(&self, inst: usize) -> bool {
        self.roles.get(inst).is_some_and(|r| r.is_correct())
    }

    /// The role of `inst`.
    pub fn role(&self, inst: usize) -> Option<Role> {
        self.roles.get(inst).copied()
    }

    /// Changes the role of `inst` (e.g. a restart without state makes it amnesiac).
    pub fn set_role(&mut self, inst: usize, role: Role) {
        if let Some(r) = self.roles.get_mut(inst) {
            *r = role;
        }
    }

    /// `inst` appended `rec`, a `Proposed`, to its log without a sync.
    pub fn proposed(&mut self, inst: usize, rec: PersistRecord) {
        self.persist.proposed(inst, rec);
    }

    /// `inst` made `rec` durable (a `Persist` action, or an unsynced append that a sync or a
    /// torn log tail kept).
    pub fn persist(&mut self, inst: usize, rec: PersistRecord) {
        self.persist.record(inst, rec);
        self.view.on_persist(inst, rec);
        if let PersistRecord::View(v) = rec {
            self.view_jump.on_persist(inst, v);
        }
    }

    /// An `Event` action of `inst`.
    pub fn event(&mut self, now: Time, inst: usize, ev: &Event) {
        if !self.is_correct(inst) {
            return;
        }
        if let Some(seq) = self.agreement.on_event(&mut self.sink, now, inst, ev) {
            if let Some(content) = self.agreement.history.content(seq) {
                self.exactly_once
                    .on_agreed(&mut self.sink, now, seq, content);
                self.client_order
                    .on_agreed(&mut self.sink, now, seq, content);
            }
            match &mut self.fs {
                Some(fs) => {
                    fs.results
                        .advance(&mut self.sink, now, &self.agreement.history);
                    fs.tree.check(&mut self.sink, now, &fs.results);
                }
                None => {
                    self.results
                        .advance(&mut self.sink, now, &self.agreement.history);
                    self.read_only.check(&mut self.sink, &self.results);
                }
            }
        }
        if let Event::ReadOnlyExecuted {
            client,
            rid,
            committed,
            on_tentative,
            result_digest,
        } = *ev
        {
            if self.fs.is_none() {
                self.read_only.on_answer(
                    inst,
                    now,
                    client,
                    rid,
                    committed,
                    on_tentative,
                    result_digest,
                );
                self.read_only.check(&mut self.sink, &self.results);
            }
            self.read_floor.on_answer(
                &mut self.sink,
                now,
                inst,
                (client, rid),
                committed,
                on_tentative,
            );
        }
        self.checkpoints.on_event(&mut self.sink, now, inst, ev);
        self.view.on_event(&mut self.sink, now, inst, ev);
        self.prepared.on_event(&mut self.sink, now, inst, ev);
        self.committed_prepared
            .on_event(&mut self.sink, now, inst, ev, &self.prepared);
        self.stable_view.on_event(&mut self.sink, now, inst, ev);
        self.view_jump.on_event(&mut self.sink, now, inst, ev);
        self.stable_quorum.on_event(&mut self.sink, now, inst, ev);
        if let Event::Dropped(_) = ev {
            self.authentic.on_dropped(inst);
            self.request_store.on_dropped(inst);
        }
    }

    /// An instance (correct or not) of replica `id` put `bytes` on the network.
    pub fn emit(&mut self, id: ReplicaId, bytes: &[u8]) {
        self.authentic.on_emit(id, bytes);
    }

    /// `bytes` reaches instance `inst`, which takes it in its next step.
    pub fn deliver(&mut self, inst: usize, bytes: &[u8]) {
        if !self.is_correct(inst) {
            return;
        }
        if let Some(j) = self.authentic.forged(bytes) {
            let what = match Frame::parse(bytes, self.max_frame).map(|f| (f.header, f.decode())) {
                Ok((h, Ok(m))) => format!("{:?} as r{j} ({:?}) {m:?}", h.tag, h.auth),
                Ok((h, Err(_))) => format!("{:?} as r{j} (undecodable)", h.tag),
                Err(e) => format!("as r{j}, unparsable: {e:?}"),
            };
            self.authentic.expect_drop(inst, what);
            return;
        }
        let tag = bytes.get(3).copied();
        let read_only = bytes.get(5).is_some_and(|f| f & FLAG_READ_ONLY != 0);
        let wanted = tag == Some(Tag::Checkpoint as u8) || tag == Some(Tag::Request as u8);
        if !wanted {
            return;
        }
        let Ok(frame) = Frame::parse(bytes, self.max_frame) else {
            return;
        };
        match (frame.header.sender, frame.decode()) {
            (Principal::Replica(j), Ok(Message::Checkpoint(c))) if c.replica == j => {
                self.stable_quorum.on_vote(inst, j, c.seq, c.digest);
            }
            (Principal::Client(c), Ok(Message::Request(r))) if r.client == c => {
                if read_only {
                    self.read_floor.on_read(inst, c, r.rid);
                } else {
                    self.request_store.on_request(inst, c);
                }
            }
            _ => {}
        }
    }

    /// A frame `inst` sends (replica to replica or client).
    pub fn send(&mut self, now: Time, inst: usize, bytes: &[u8]) {
        if !self.is_correct(inst) {
            return;
        }
        self.persist.check_send(&mut self.sink, now, inst, bytes);
        if bytes.get(3) == Some(&(Tag::Commit as u8)) {
            if let Ok(Message::Commit(c)) =
                Frame::parse(bytes, self.max_frame).and_then(|f| f.decode())
            {
                self.read_floor.on_commit_sent(inst, c.seq);
            }
        }
    }

    /// After every step of `inst` (handler plus drained actions).
    pub fn step_end(&mut self, now: Time, inst: usize, r: &dyn Observe) {
        if !self.is_correct(inst) {
            return;
        }
        self.view.on_step_end(&mut self.sink, now, inst, r.view());
        self.view_jump.on_step_end(inst, r.view());
        self.slow_view
            .on_step_end(&mut self.sink, now, inst, r.view());
        self.authentic.on_step_end(&mut self.sink, now, inst);
        self.checkpoints
            .on_step_end(&mut self.sink, now, inst, r.last_executed());
        self.prefix.on_step_end(&mut self.sink, now, inst, r);
        self.reply_cache.on_step_end(&mut self.sink, now, inst, r);
        self.request_store.on_step_end(&mut self.sink, now, inst, r);
    }

    /// `inst` restarted, keeping its durable state or not.
    pub fn restart(&mut self, inst: usize, with_state: bool) {
        self.persist.on_restart(inst, with_state);
        self.view.on_restart(inst, with_state);
        self.authentic.on_restart(inst);
        self.view_jump.on_restart(inst, with_state);
        self.read_floor.on_restart(inst);
        self.request_store.on_restart(inst);
        self.agreement.on_restart(inst);
        self.checkpoints.on_restart(inst);
        self.prefix.on_restart(inst);
    }

    /// A client (correct or faulty) put frame `bytes` on the network: a request's digest is
    /// what may run in its name (`exactly_once`).
    pub fn client_sent(&mut self, bytes: &[u8]) {
        // The header alone (tag, sender, body digest: `byzfs_bft::wire` layout): read for
        // every copy sent, not hashed again.
        let Some(h) = bytes.get(..byzfs_bft::wire::HEADER_LEN) else {
            return;
        };
        if h[3] != byzfs_bft::message::Tag::Request as u8 || h[4] != 1 {
            return;
        }
        let mut id = [0u8; 8];
        id.copy_from_slice(&h[8..16]);
        let mut d = [0u8; 32];
        d.copy_from_slice(&h[32..64]);
        self.exactly_once
            .on_sent(u64::from_le_bytes(id), byzfs_bft::Digest(d));
    }

    /// A client issued `(client, rid)` with `op` (`correct`: by a correct client).
    pub fn issue(&mut self, now: Time, client: ClientId, rid: RequestId, op: &[u8], correct: bool) {
        self.exactly_once.on_issue(client, rid);
        self.reply_cache.on_issue(client);
        self.request_store.on_issue(client);
        if let Some(fs) = &mut self.fs {
            if correct && !crate::fs::is_read(op) {
                self.client_order.on_write(client, rid);
            }
            fs.results.issue(now, client, rid, op, correct);
        } else {
            if correct
                && KvOp::decode(op).is_some_and(|o| !matches!(o, KvOp::Get { .. } | KvOp::Time))
            {
                self.client_order.on_write(client, rid);
            }
            self.results.issue(now, client, rid, op, correct);
        }
        if correct {
            self.slow_view.on_issue(now);
        }
    }

    /// A correct client accepted `result` for `(client, rid)`.
    pub fn complete(&mut self, now: Time, client: ClientId, rid: RequestId, result: &[u8]) {
        match &mut self.fs {
            Some(fs) => fs.results.accept(&mut self.sink, now, client, rid, result),
            None => self
                .results
                .accept(&mut self.sink, now, client, rid, result),
        }
        self.slow_view.on_complete(now);
    }

    /// End-of-run checks of the results (read-only linearizability). Durability and liveness
    /// need the cluster's state and are run by the simulator (see [`durability`], [`liveness`]).
    pub fn finish(&mut self, now: Time) {
        if let Some(fs) = &mut self.fs {
            fs.results
                .advance(&mut self.sink, now, &self.agreement.history);
            fs.results.finish(&mut self.sink, now);
            fs.tree.check(&mut self.sink, now, &fs.results);
            fs.tree.finish();
            return;
        }
        self.results
            .advance(&mut self.sink, now, &self.agreement.history);
        self.results.finish(&mut self.sink, now);
        self.read_only.finish(&mut self.sink, &self.results);
    }
}

/// Short human form of an operation for messages.
pub fn describe_op(op: &[u8]) -> String {
    match KvOp::decode(op) {
        Some(KvOp::Put { key, value }) => format!("Put({}, {}B)", show(&key), value.len()),
        Some(KvOp::Get { key }) => format!("Get({})", show(&key)),
        Some(KvOp::Delete { key }) => format!("Delete({})", show(&key)),
        Some(KvOp::Append { key, value }) => format!("Append({}, {})", show(&key), show(&value)),
        Some(KvOp::Cas { key, expect, new }) => format!(
            "Cas({}, {}, {})",
            show(&key),
            expect.as_deref().map(show).unwrap_or_else(|| "∅".into()),
            show(&new)
        ),
        Some(KvOp::Time) => "Time".into(),
        None => format!("<undecodable {}B>", op.len()),
    }
}

/// Bytes as text if printable (truncated), else hex length.
pub fn show(b: &[u8]) -> String {
    if b.iter().all(|c| c.is_ascii_graphic() || *c == b' ') {
        let s = String::from_utf8_lossy(b);
        if s.len() > 60 {
            format!("\"{}…\"({}B)", &s[..60], b.len())
        } else {
            format!("\"{s}\"")
        }
    } else {
        format!("<{}B>", b.len())
    }
}

/// Test helper: an observable replica stub.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stub {
    /// View.
    pub view: View,
    /// Last executed.
    pub last_executed: Seq,
    /// Last tentative.
    pub last_tentative: Seq,
    /// Last stable.
    pub last_stable: Seq,
    /// Fetching.
    pub fetching: bool,
    /// State digest.
    pub digest: Digest,
    /// Stored requests that cannot run yet, for any client.
    pub stored: usize,
}

impl Observe for Stub {
    fn view(&self) -> View {
        self.view
    }
    fn last_executed(&self) -> Seq {
        self.last_executed
    }
    fn last_tentative(&self) -> Seq {
        self.last_tentative
    }
    fn last_stable(&self) -> Seq {
        self.last_stable
    }
    fn is_fetching(&self) -> bool {
        self.fetching
    }
    fn state_digest(&self) -> Digest {
        self.digest
    }
    fn cached_results(&self, _: ClientId) -> usize {
        0
    }
    fn stored_requests(&self, _: ClientId) -> usize {
        self.stored
    }
}
