//! Write-back left in flight: held writes and early answers sent because there was no room
//! to hold more (`gather::MAX_FILES`, the queue of early answers) or because they were
//! [`gather::MAX_AGE`] old go to the cluster without the sender waiting for them, up to
//! what the links drain in a few seconds at the rate measured (`drain_rate.rs`: 1 to 64 MiB
//! of requests) and [`MAX_IN_FLIGHT`] batches at once. Across sites each batch is an
//! agreement round (60 ms of delay alone at `wan`), which a program writing many files
//! waited for every 31 files (docs/BENCHMARKS.md "Across sites, the working set kept;
//! write-back in flight"), and then every four batches while the bound was four batches
//! (docs/BENCHMARKS.md "Write-back bounded in bytes"): bounded in bytes, a writer waits
//! only for what it writes faster than the links carry, as a local file system's writer
//! waits only once its dirty pages pass their bound.
//!
//! What keeps it safe:
//! * **Order.** The replicas run a client's ordered requests in the order the mount
//!   submitted them (`wire.rs`), so every ordered operation sent later runs after the
//!   batch. A read-only one is answered without ordering and could overtake it, so any
//!   operation that names what a batch in flight touches (its [`footprint`]), or whose reach
//!   is wider than its handles, first waits for every batch in flight (`cluster.rs`
//!   `prepare`): the mount sees its own writes.
//! * **What the mount answers itself** of a file with writes in flight (its attributes, a
//!   lookup of it), it answers as of a file with writes held: from the cluster, after the
//!   batch (`filesystem.rs` `getattr`, `lib.rs` `lookup_early`).
//! * **Errors** only the replicas find are handled as the batch's sender would have: a
//!   batch of writes that fails is sent again file by file, each file keeping its own error
//!   for its next `close` or `fsync`; a failed queue of early answers is reported by the next
//!   `close`, `fsync` or `fsyncdir` and forgotten (`dirs.rs`).
//! * **Durability.** `fsync`, `fsyncdir` and unmount wait for every batch in flight. A mount
//!   that dies loses what was in flight and not yet run, as what it held (README
//!   "Write-back").
//!
//! Only a plain mount of a replicated cluster leaves batches in flight: the crypto layer
//! seals and sends a write in several calls (`crypt.rs`), and the unreplicated client sends
//! a call only when it is waited for (`wire.rs`).

use super::cluster::{finish_in_flight, send_in_flight, InLane, Link};
use super::dirs::{handles_of, QueueSent};
use super::drain_rate::DrainRate;
use super::reclaim;
use super::wire::Outcome;
use byzfs_fs::{Credentials, FsResult, Op};
use std::collections::{HashSet, VecDeque};
use std::time::Instant;

/// Most batches in flight at once, whatever their size (each keeps its footprint, which
/// every operation is checked against: [`InFlight::must_precede`]).
pub(crate) const MAX_IN_FLIGHT: usize = 256;

/// What to do with a batch's answer.
pub(crate) enum Then {
    /// The queue of early answers, with the writes that joined it.
    Queue(QueueSent),
    /// Held writes of several files, or one file's.
    Writes(super::cluster::WritesSent),
    /// Handles reserved ahead (`handles.rs`).
    Reserved,
}

impl Then {
    fn answered(self, link: &mut Link, result: FsResult) {
        match self {
            Then::Queue(q) => q.answered(link, result),
            // Sent without `invoke`'s retries: a failure is tried again.
            Then::Writes(w) => w.answered(link, result, false),
            Then::Reserved => super::handles::reserved(link, result),
        }
    }
}

/// One batch in flight.
struct Flying {
    lane: InLane,
    /// Its request's size.
    bytes: usize,
    /// When it was sent.
    sent: Instant,
    /// Inodes it writes, makes, removes or changes names in.
    footprint: HashSet<u64>,
    /// Whether its success may leave space to give back (`reclaim.rs`).
    reclaims: bool,
    then: Then,
}

/// The batches in flight, oldest first.
#[derive(Default)]
pub(crate) struct InFlight {
    flying: VecDeque<Flying>,
    /// The sum of their requests' sizes.
    bytes: usize,
    /// How fast the links drain them: how many bytes may fly.
    drain: DrainRate,
    /// Batches sent in flight, and how many of them one more had to wait for (logged at
    /// unmount).
    pub(crate) sent: u64,
    pub(crate) waited_for_room: u64,
    /// Operations that waited for every batch in flight ([`InFlight::must_precede`]), by
    /// kind (logged at unmount: where a writer still waits for the links).
    pub(crate) waited_by: std::collections::BTreeMap<&'static str, u64>,
}

impl InFlight {
    /// Whether no batch is in flight.
    pub(crate) fn is_empty(&self) -> bool {
        self.flying.is_empty()
    }

    /// Whether one more batch may go without the oldest landing first (the last one sent
    /// may pass the bound in bytes by its own size, at most a request's).
    fn has_room(&self) -> bool {
        self.flying.len() < MAX_IN_FLIGHT && self.bytes < self.drain.bound()
    }

    /// Whether a batch in flight writes, makes, removes or changes names in `ino`.
    pub(crate) fn holds(&self, ino: u64) -> bool {
        self.flying.iter().any(|f| f.footprint.contains(&ino))
    }

    /// Whether `op` must wait for the batches in flight: it names what one touches, its
    /// reach is wider than its handles, or it reads through a name (a `lookup` answers the
    /// attributes of whatever the name leads to, maybe a file with writes in flight: an
    /// `O_APPEND` write then went at the size before them). A listing answers no
    /// attributes: it waits only for batches that change names in its directory (across
    /// sites the first listing after a copy waited for the whole copy's write-back:
    /// docs/BENCHMARKS.md "Write-back bounded in bytes"). The recall poll reads no file. An
    /// ordered operation that names entries runs after the batches anyway.
    pub(crate) fn must_precede(&self, op: &Op) -> bool {
        if self.flying.is_empty() || matches!(op, Op::Recalls) {
            return false;
        }
        let Some(inos) = handles_of(op) else {
            return true;
        };
        let lists = matches!(op, Op::ReadDir { .. });
        if op.is_read_only() && !lists && !op.dirs_named().is_empty() {
            return true;
        }
        inos.iter().any(|i| self.holds(*i)) || op.dirs_named().iter().any(|d| self.holds(d.ino))
    }
}

/// Whether this mount may leave batches in flight at all (see the module docs).
pub(crate) fn may_fly(link: &Link) -> bool {
    link.crypt.is_none() && link.wire.windowed()
}

/// Sends `op` for `cred` and leaves it in flight (after the oldest, while the bound in bytes
/// or [`MAX_IN_FLIGHT`] batches are); `then` handles its answer. Sent and waited for at once where batches may not fly.
pub(crate) fn send(
    link: &mut Link,
    cred: &Credentials,
    op: Op,
    footprint: HashSet<u64>,
    then: Then,
) {
    if !may_fly(link) {
        match then {
            Then::Queue(q) => {
                let result = super::cluster::invoke_once(link, cred, op);
                q.answered(link, result)
            }
            // Sent with `invoke`'s own retries: its answer is final.
            Then::Writes(w) => {
                let result = super::cluster::invoke(link, cred, op);
                w.answered(link, result, true)
            }
            Then::Reserved => {
                let result = super::cluster::invoke(link, cred, op);
                super::handles::reserved(link, result)
            }
        }
        return;
    }
    if !link.inflight.has_room() {
        link.inflight.waited_for_room += 1;
        while !link.inflight.has_room() {
            land_oldest(link);
        }
    }
    let reclaims = reclaim::may_queue(&op);
    let lane = send_in_flight(link, cred, op);
    let bytes = lane.bytes();
    link.inflight.sent += 1;
    link.inflight.bytes += bytes;
    link.inflight.flying.push_back(Flying {
        lane,
        bytes,
        sent: Instant::now(),
        footprint,
        reclaims,
        then,
    });
    // The background thread leads the client while batches fly (`cluster.rs`).
    link.dirs.wake_background();
}

/// Waits for every batch in flight and handles their answers, oldest first. The later ones
/// stay in the list meanwhile: what an answer says of an inode they change is passed over
/// ([`land`]; a creation's size 0 was kept over the size the writes in flight after it
/// gave, and `stat` answered 0: `faults::andrew`). An answer that sends again (a failed
/// batch, file by file) lands the rest first (`cluster.rs` `prepare`).
pub(crate) fn land_all(link: &mut Link) {
    while !link.inflight.flying.is_empty() {
        land_oldest(link);
    }
}

/// [`land_all`] for an operation `why` that must see them, counted in
/// [`InFlight::waited_by`] if any is in flight.
pub(crate) fn land_all_for(link: &mut Link, why: &'static str) {
    if !link.inflight.flying.is_empty() {
        *link.inflight.waited_by.entry(why).or_default() += 1;
        land_all(link);
    }
}

/// Handles the answers already in (the background thread, after driving the client),
/// oldest first, without waiting.
pub(crate) fn land_ready(link: &mut Link) {
    while let Some(out) = link
        .inflight
        .flying
        .front_mut()
        .and_then(|f| f.lane.ready())
    {
        if let Some(f) = pop_oldest(link) {
            land(link, f, Some(out));
        }
    }
}

fn pop_oldest(link: &mut Link) -> Option<Flying> {
    let f = link.inflight.flying.pop_front()?;
    link.inflight.bytes -= f.bytes;
    link.inflight
        .drain
        .answered(f.bytes, f.sent, Instant::now());
    Some(f)
}

fn land_oldest(link: &mut Link) {
    if let Some(mut f) = pop_oldest(link) {
        let out = f.lane.wait();
        land(link, f, out);
    }
}

fn land(link: &mut Link, f: Flying, out: Option<Outcome>) {
    // What the answer says of a file a later batch still changes is already old (a
    // creation's size 0 before the writes in flight after it): the cache takes it from
    // the later batch's answer instead.
    let later: HashSet<u64> = link
        .inflight
        .flying
        .iter()
        .flat_map(|f| f.footprint.iter().copied())
        .collect();
    let result = finish_in_flight(link, f.lane, out, &later);
    link.reclaim.after(f.reclaims && result.is_ok());
    f.then.answered(link, result);
}

/// The inodes `ops` write (by handle) and name directories of: a write batch's footprint.
pub(crate) fn footprint_of(ops: &[Op]) -> HashSet<u64> {
    let mut out = HashSet::new();
    for op in ops {
        if let Some(files) = super::gather::needs(op) {
            out.extend(files);
        }
        out.extend(op.dirs_named().iter().map(|d| d.ino));
    }
    out
}
