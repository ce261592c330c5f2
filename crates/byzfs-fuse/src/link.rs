//! The mount's link to the cluster: one operation sent as it is, in a lane or waited for,
//! and its reply applied to the books every call passes through (the attribute cache, the
//! directory delegations' listings). What must reach the replicas before an operation, and
//! the retries, are the layers above (`sender.rs`, `calls.rs`).

use crate::attrs::{AttrCache, Effect};
use crate::cluster::Cluster;
use crate::dirs::Dirs;
use crate::gather::Gather;
use crate::handles::{Handles, RESERVE};
use crate::inflight::InFlight;
use crate::lane::{InLane, Prep};
use crate::lease::{Answer, Lease};
use crate::reclaim::Reclaimer;
use crate::stamps::Stamps;
use crate::transport::Transport;
use crate::wire::Outcome;
use byzfs_fs::{Credentials, Errno, FileHandle, FsResult, Op, Reply};
use std::collections::HashSet;
use std::time::Instant;

/// The session: the transport under it (`cluster.rs`) and the books the calls read and
/// their replies fill, each a layer's own state behind its methods (writes held back, the
/// attribute cache, close-to-open stamps, directory and file delegations, write-back in
/// flight, reserved handles, reclaim, the crypto layer). The functions here send
/// one operation as it is; what must go before it is `calls.rs`'s and `sender.rs`'s. Locks
/// and delegations borrow this and their own books only (`locks.rs`).
pub(crate) struct Link {
    /// The transport: the cluster client and how this mount calls it (`cluster.rs`).
    pub(crate) cluster: Cluster,
    /// Writes held back (`gather.rs`).
    pub(crate) gather: Gather,
    /// Attributes from the cluster's replies, answering the kernel's `getattr` within the
    /// cache timeout (`attrs.rs`).
    pub(crate) attrs: AttrCache,
    /// What each file the kernel holds looked like when last seen and last opened
    /// (close-to-open: `stamps.rs`).
    pub(crate) stamps: Stamps,
    /// Whether reclaim steps are due (`reclaim.rs`).
    pub(crate) reclaim: Reclaimer,
    /// Directory delegations and the operations answered early in them (`dirs.rs`).
    pub(crate) dirs: Dirs,
    /// File delegations (`held_files.rs`).
    pub(crate) files: crate::held_files::HeldFiles,
    /// Write-back batches sent and not yet answered (`inflight.rs`).
    pub(crate) inflight: InFlight,
    /// Handles reserved for new entries (`handles.rs`).
    pub(crate) handles: Handles,
    /// An encrypted mount's crypto layer (`crypt.rs`), between every operation and the wire.
    pub(crate) crypt: Option<Box<crate::crypt::Crypt>>,
    /// The lease every lock and delegation needs (`lease.rs`); the lock books follow its
    /// lapses when they are next borrowed (`lib.rs` `Inner::for_locks`).
    pub(crate) lease: Lease,
}

/// A lease-bearing reply of place `place`, sent at `sent`, in (`lapsed`: it says the lease
/// had lapsed before it ran): the lease's book, and the delegations a lapse dropped.
pub(crate) fn lease_answered(link: &mut Link, place: u64, lapsed: bool, sent: Instant) -> Answer {
    let answer = link.lease.answered(place, lapsed, sent);
    if let Answer::Lapsed(_) = answer {
        drop_lapsed(link);
    }
    answer
}

/// A lapse told by a reply whose place is not known exactly: `at_most` is no earlier
/// (`lease.rs`: a batch's reply).
pub(crate) fn lapsed_by(link: &mut Link, at_most: u64) {
    link.lease.lapsed_by(at_most);
    drop_lapsed(link);
}

/// The directory and file delegations older than the last lapse, forgotten; bytes kept of
/// the files may be old now.
fn drop_lapsed(link: &mut Link) {
    link.dirs.lease_lapsed(&link.lease);
    for ino in link.files.lease_lapsed(&link.lease) {
        link.dirs.contents_changed(ino);
    }
}

/// What `op`'s reply must update ([`settle`]), noted just before it is sent (`ordered`: sent
/// ordered even if read-only); a rename or a hard link through the cluster changes what
/// this mount may count as its own at once.
pub(crate) fn prep_of(link: &mut Link, op: &Op, ordered: bool) -> Prep {
    // Names changed in held directories by anything but the queue: listed again before use.
    // A held directory's own attributes come back in the reply.
    let changes_held = match op {
        Op::Batch(_) | Op::DelegateDir { .. } | Op::ReturnDir { .. } | Op::SetAttr { .. } => {
            Vec::new()
        }
        _ if op.is_read_only() || !link.dirs.any_held() => Vec::new(),
        _ => op.dirs_named(),
    };
    // A hard link or a rename makes a file reachable from another directory.
    match op {
        Op::Link { fh, .. } => link.dirs.not_mine(fh.ino),
        Op::Rename {
            from_dir,
            from_name,
            ..
        }
        | Op::RenameNoReplace {
            from_dir,
            from_name,
            ..
        } => link.dirs.renamed_through_cluster(&[(*from_dir, from_name)]),
        Op::Exchange {
            a_dir,
            a_name,
            b_dir,
            b_name,
        } => link
            .dirs
            .renamed_through_cluster(&[(*a_dir, a_name), (*b_dir, b_name)]),
        _ => {}
    }
    let sets_held = match op {
        Op::SetAttr { fh, .. } if link.dirs.holds(fh.ino) => Some(*fh),
        _ => None,
    };
    Prep {
        // The flag is only a hint: replicas decide from the operation itself what is
        // read-only.
        read_only: op.is_read_only() && !link.cluster.strict() && !ordered,
        effect: Effect::of(op),
        changes_held,
        sets_held,
    }
}

/// After `result` came back for an operation sent at the attribute cache's `mark`
/// (`u64::MAX`: the mount's lock was held since).
pub(crate) fn settle(link: &mut Link, prep: Prep, mark: u64, result: &FsResult) {
    settle_but(link, prep, mark, result, &HashSet::new());
}

/// [`settle`], the attributes of the inodes in `later` passed over (see
/// [`AttrCache::record_since_but`]).
fn settle_but(link: &mut Link, prep: Prep, mark: u64, result: &FsResult, later: &HashSet<u64>) {
    link.attrs
        .record_since_but(mark, prep.effect, result, Instant::now(), later);
    settle_delegations(link, prep, result);
}

/// What a reply means for the directories this mount holds: names changed there by
/// anything but the queue are listed again before use; a held directory's attributes set
/// through the cluster come back in the reply.
fn settle_delegations(link: &mut Link, prep: Prep, result: &FsResult) {
    if !prep.changes_held.is_empty() {
        link.dirs.changed_elsewhere(&prep.changes_held);
    }
    if let Some(fh) = prep.sets_held {
        match result {
            Ok(Reply::Attr(a)) => link.dirs.set_attr(a),
            _ => link.dirs.changed_elsewhere(&[fh]),
        }
    }
}

/// Whether `calls.rs` `send_in_lane` takes `op`: a read-only operation of a mount without the
/// crypto layer (whose reads fetch and check headers in several calls: `crypt.rs`), other
/// than the recall poll.
pub(crate) fn lane_takes(link: &Link, op: &Op) -> bool {
    link.cluster.lanes() && link.crypt.is_none() && op.is_read_only() && !matches!(op, Op::Recalls)
}

/// Sends `op` without waiting (its reply is waited for by whoever holds the returned
/// lane, without the mount's lock); its place among the mount's requests is fixed here
/// (`wire.rs`).
pub(crate) fn send_lane(link: &mut Link, cred: &Credentials, op: Op, prep: Prep) -> InLane {
    let mark = link.attrs.mark();
    link.cluster.lane(cred, op, prep, mark)
}

/// What a lane's reply does, the mount's lock taken again.
pub(crate) fn finish_in_lane(link: &mut Link, sent: InLane, out: Option<Outcome>) -> FsResult {
    let result = link.cluster.received(sent.name, sent.began, out);
    settle(link, sent.prep, sent.mark, &result);
    result
}

/// [`finish_in_lane`] for an ordered operation (`calls.rs` `ordered_lane_takes`): an inode
/// its reply describes that changed since it was sent is dropped from the attribute cache
/// (`attrs.rs` `record_ordered_since`).
pub(crate) fn finish_ordered_in_lane(
    link: &mut Link,
    sent: InLane,
    out: Option<Outcome>,
) -> FsResult {
    let result = link.cluster.received(sent.name, sent.began, out);
    let effect = sent.prep.effect;
    link.attrs
        .record_ordered_since(sent.mark, effect, &result, Instant::now());
    settle_delegations(link, sent.prep, &result);
    result
}

/// [`finish_in_lane`] for a write-back batch in flight: its reply made what the mount
/// expects by `open` (the crypto layer's, `crypt_in_flight.rs`); what it says of the
/// inodes in `later`, which batches sent after it change, is passed over (`inflight.rs`).
pub(crate) fn finish_in_flight(
    link: &mut Link,
    sent: InLane,
    out: Option<Outcome>,
    later: &HashSet<u64>,
    open: impl FnOnce(&mut Link, FsResult) -> FsResult,
) -> FsResult {
    let result = link.cluster.received(sent.name, sent.began, out);
    let result = open(link, result);
    settle_but(link, sent.prep, sent.mark, &result, later);
    result
}

/// Sends `op` as it is and waits for its result, or up to the soft mount's timeout: the
/// wire under `sender.rs` `send_op` (and under the crypto layer, `crypt.rs`).
pub(crate) fn transmit(link: &mut Link, cred: &Credentials, op: Op, read_only: bool) -> FsResult {
    link.cluster.transmit(cred, op, read_only)
}

/// The crypto layer's wire (`transport.rs`): the calls under it go out as they are.
impl Transport for Link {
    fn transmit(&mut self, cred: &Credentials, op: Op, read_only: bool) -> FsResult {
        transmit(self, cred, op, read_only)
    }

    /// Also while a batch is in flight: the crypto layer's reads of headers, nodes and
    /// old blocks then run after it (`crypt_in_flight.rs`), as ordered requests do.
    fn strict(&self) -> bool {
        self.cluster.strict() || !self.inflight.is_empty()
    }

    fn granted(&self, cred: &Credentials) -> Credentials {
        self.cluster.granted(cred)
    }

    /// From the mount's one pool (`handles.rs`), reserved on the wire if none is left. The
    /// queue of early answers, which takes from the same pool, went before the crypto
    /// layer's call (`sender.rs` `send_op` runs after `calls.rs` sent what goes first), so
    /// handles stay in increasing order.
    fn new_handle(&mut self, cred: &Credentials) -> Result<FileHandle, Errno> {
        if self.handles.is_empty() {
            let reply = transmit(self, cred, Op::ReserveInodes { count: RESERVE }, false);
            if let Err(e) = reply {
                return Err(e);
            }
            self.handles.add(reply);
        }
        self.handles.take().ok_or(Errno::EIO)
    }
}
