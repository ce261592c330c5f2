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
//!   is wider than its handles, first waits for every batch in flight (`calls.rs`,
//!   `sender.rs` `run`): the mount sees its own writes.
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
//! These are the books; `sender.rs` launches batches and lands their answers. A mount of
//! a replicated cluster leaves batches in flight; an encrypted one, one batch at a time
//! (`crypt_in_flight.rs`); the unreplicated client sends a call only when it is waited
//! for (`wire.rs`).

use crate::awaiting::Then;
use crate::dirs::handles_of;
use crate::drain_rate::DrainRate;
use crate::lane::InLane;
use crate::wire::Outcome;
use byzfs_fs::Op;
use std::collections::{HashSet, VecDeque};
use std::time::Instant;

/// Most batches in flight at once, whatever their size (each keeps its footprint, which
/// every operation is checked against: [`InFlight::must_precede`]).
pub(crate) const MAX_IN_FLIGHT: usize = 256;

/// One batch in flight.
pub(crate) struct Flying {
    pub(crate) lane: InLane,
    /// When it was sent.
    pub(crate) sent: Instant,
    /// Inodes it writes, makes, removes or changes names in.
    pub(crate) footprint: HashSet<u64>,
    /// Whether its success may leave space to give back (`reclaim.rs`).
    pub(crate) reclaims: bool,
    pub(crate) then: Then,
    /// An encrypted mount's batch as the crypto layer sealed it (`crypt_in_flight.rs`):
    /// its answer is opened when it lands.
    pub(crate) sealed: Option<Box<crate::crypt_in_flight::Sealed>>,
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
    /// Waits for batches in flight with the mount's lock let go (`unlocked.rs`),
    /// and operations that took the lock while such a wait went on (logged at unmount).
    pub(crate) waited_unlocked: u64,
    pub(crate) ran_meanwhile: u64,
    /// Batches landed (taken out answered), oldest first: all of the first `landed` sent.
    landed: u64,
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
    pub(crate) fn has_room(&self) -> bool {
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

    /// How many batches were sent so far: every one of them has landed once
    /// [`InFlight::landed`] reaches it (an `fsync` waits for those sent before it, not for
    /// what other processes send meanwhile).
    pub(crate) fn sent_so_far(&self) -> u64 {
        self.sent
    }

    /// How many batches landed so far.
    pub(crate) fn landed(&self) -> u64 {
        self.landed
    }

    /// Counts an operation `why` that waits for every batch in flight.
    pub(crate) fn waits(&mut self, why: &'static str) {
        *self.waited_by.entry(why).or_default() += 1;
    }

    /// A batch sent.
    pub(crate) fn launched(&mut self, f: Flying) {
        self.sent += 1;
        self.bytes += f.lane.bytes();
        self.flying.push_back(f);
    }

    /// The oldest batch's reply if it is in, without waiting.
    pub(crate) fn oldest_ready(&mut self) -> Option<Outcome> {
        self.flying.front_mut().and_then(|f| f.lane.ready())
    }

    /// Waits for the oldest batch's answer, leaving it first in line (`None`: nothing in
    /// flight).
    pub(crate) fn wait_oldest(&mut self) -> Option<Option<Outcome>> {
        self.flying.front_mut().map(|f| f.lane.wait())
    }

    /// Takes the oldest batch out once its answer is in; the drain rate learns how long it
    /// took (to now: measured from the time the mount began to wait instead, the rate came
    /// out too fast exactly when the mount waited on the links).
    pub(crate) fn pop_oldest(&mut self) -> Option<Flying> {
        let f = self.flying.pop_front()?;
        self.landed += 1;
        let bytes = f.lane.bytes();
        self.bytes -= bytes;
        self.drain.answered(bytes, f.sent, Instant::now());
        Some(f)
    }

    /// What the batches still in flight touch: what an answer landing before them says of
    /// those inodes is already old (`sender.rs` `land`).
    pub(crate) fn later_footprint(&self) -> HashSet<u64> {
        self.flying
            .iter()
            .flat_map(|f| f.footprint.iter().copied())
            .collect()
    }
}

/// The inodes `ops` write (by handle) and name directories of: a write batch's footprint.
pub(crate) fn footprint_of(ops: &[Op]) -> HashSet<u64> {
    let mut out = HashSet::new();
    for op in ops {
        if let Some(files) = crate::gather::needs(op) {
            out.extend(files);
        }
        out.extend(op.dirs_named().iter().map(|d| d.ino));
    }
    out
}
