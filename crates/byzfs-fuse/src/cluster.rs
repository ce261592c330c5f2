//! The transport: the cluster client with its window (`wire.rs`), how this mount calls it
//! (the soft mount's timeout, reads ordered or not, lanes), and the tally of what it sent.
//! It knows operations only as requests to send; what their replies mean for the mount's
//! books is the session layer's (`link.rs`).

use crate::lane::{InLane, LaneCount, Prep};
use crate::wire::{Outcome, Wire};
use byzfs_bft::client::Access;
use byzfs_fs::{decode_result, Credentials, Errno, FsResult, Op};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The cluster as this mount calls it.
pub(crate) struct Cluster {
    /// The cluster client, shared with callers waiting without the mount's lock and with
    /// the background thread, which drives it.
    wire: Arc<Wire>,
    /// Operations sent, by kind: how many, and the time spent waiting for them (logged at
    /// unmount: where a workload's round trips and time go).
    sent: BTreeMap<&'static str, (u64, Duration)>,
    /// `None`: a hard mount (see [`crate::MountOptions::timeout`]).
    timeout: Option<Duration>,
    /// Send read-only operations as ordered requests.
    strict: bool,
    /// Operations go in lanes (more than one FUSE thread: `lib.rs` `call`).
    lanes: bool,
    /// Ordered operations in lanes, counted (`calls.rs` `ordered_lane_takes`).
    ordered_lanes: LaneCount,
    /// Requests handed to the client so far: the next one's place in the order the
    /// replicas run this mount's requests in (`lease.rs` tags what a lease-bearing reply
    /// installs with its request's place).
    places: u64,
}

impl Cluster {
    /// Calls through `wire`, `timeout` `None` for a hard mount.
    pub(crate) fn new(
        wire: Arc<Wire>,
        timeout: Option<Duration>,
        strict: bool,
        lanes: bool,
    ) -> Self {
        Cluster {
            wire,
            sent: BTreeMap::new(),
            timeout,
            strict,
            lanes,
            ordered_lanes: LaneCount::default(),
            places: 0,
        }
    }

    /// The place the next request will take among this mount's requests (`lease.rs`).
    /// The replicas run a client's requests in the order they were handed to it, which is
    /// the order of the calls here: each is made under the mount's lock.
    pub(crate) fn next_place(&self) -> u64 {
        self.places
    }

    /// The place of the last request sent ([`Cluster::next_place`]).
    pub(crate) fn last_place(&self) -> u64 {
        self.places.saturating_sub(1)
    }

    /// The client, for a thread that drives it or asks its counters.
    pub(crate) fn wire(&self) -> &Arc<Wire> {
        &self.wire
    }

    /// The soft mount's timeout (`None`: hard).
    pub(crate) fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Whether every read goes ordered (`--strict`).
    pub(crate) fn strict(&self) -> bool {
        self.strict
    }

    /// Whether operations may go in lanes at all (more than one FUSE thread).
    pub(crate) fn lanes(&self) -> bool {
        self.lanes
    }

    /// Whether a call may be left in flight and waited for later (`Wire::windowed`).
    pub(crate) fn windowed(&self) -> bool {
        self.wire.windowed()
    }

    /// Operations sent, by kind: how many, and the time waited for them.
    pub(crate) fn tally(&self) -> &BTreeMap<&'static str, (u64, Duration)> {
        &self.sent
    }

    /// Ordered operations sent in lanes, so far.
    pub(crate) fn ordered_lanes(&self) -> LaneCount {
        self.ordered_lanes
    }

    /// One more ordered operation on its way in a lane.
    pub(crate) fn ordered_lane_sent(&mut self) {
        self.ordered_lanes.sent();
    }

    /// One ordered operation in a lane answered.
    pub(crate) fn ordered_lane_answered(&mut self) {
        self.ordered_lanes.answered();
    }

    /// Sends `op` without waiting; its place among the mount's requests is fixed here
    /// (`wire.rs`). `prep` is what its reply must update, `mark` the attribute cache's
    /// mark now (`attrs.rs` `record_since`): the session layer's, carried back with it.
    ///
    /// A read goes read-only even while this mount's ordered requests are outstanding
    /// (`Access::ReadApart`; docs/PROTOCOL.md §1.8): the session sends one in a lane only
    /// once every write-back it answered early and the read may see has landed
    /// (`inflight.rs` `must_precede`, `calls.rs` `send_in_lane`), so what is outstanding
    /// is what other processes' operations have not completed, which a read may miss.
    pub(crate) fn lane(&mut self, cred: &Credentials, op: Op, prep: Prep, mark: u64) -> InLane {
        let name = op.name();
        tracing::trace!(op = name, files = ?files_of(&op), "send in a lane");
        let request = self.wire.request(cred, op);
        let access = if prep.read_only {
            Access::ReadApart
        } else {
            Access::Ordered
        };
        let place = self.places;
        self.places += 1;
        InLane {
            place,
            mark,
            bytes: request.len(),
            ticket: self.wire.call(request, access),
            wire: Arc::clone(&self.wire),
            prep,
            name,
            began: Instant::now(),
            timeout: self.timeout,
        }
    }

    /// Sends `op` as it is and waits for its result, or up to the soft mount's timeout.
    pub(crate) fn transmit(&mut self, cred: &Credentials, op: Op, read_only: bool) -> FsResult {
        let name = op.name();
        tracing::trace!(op = name, files = ?files_of(&op), "send");
        let began = Instant::now();
        self.places += 1;
        let ticket = self
            .wire
            .call(self.wire.request(cred, op), Access::from(read_only));
        let out = self.wire.wait(ticket, self.timeout, name);
        self.received(name, began, out)
    }

    /// The result of an operation `name` sent at `began`, from what its wait got (`None`:
    /// the soft mount's timeout), counted in the tally.
    pub(crate) fn received(
        &mut self,
        name: &'static str,
        began: Instant,
        out: Option<Outcome>,
    ) -> FsResult {
        let tally = self.sent.entry(name).or_default();
        tally.0 += 1;
        tally.1 += began.elapsed();
        match out {
            Some(Ok(b)) => decode_result(&b).unwrap_or(Err(Errno::EIO)),
            Some(Err(e)) => {
                tracing::warn!(op = name, error = %e, "invoke failed");
                Err(Errno::EIO)
            }
            None => {
                tracing::warn!(op = name, "no reply within the soft mount's timeout: EIO");
                Err(Errno::EIO)
            }
        }
    }

    /// `cred` mapped into the client's grant, as its requests carry it.
    pub(crate) fn granted(&self, cred: &Credentials) -> Credentials {
        self.wire.granted(cred)
    }
}

/// The inodes `op` names by handle, for the trace (tests count a file's round trips).
fn files_of(op: &Op) -> Vec<u64> {
    match op {
        Op::DelegateFile { file } | Op::ReturnFile { file } => vec![file.ino],
        _ => op.files_named().iter().map(|f| f.ino).collect(),
    }
}
