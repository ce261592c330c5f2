//! Inode numbers reserved for a client session, so that a mount can hand a new file's
//! handle to the kernel before the replicas create it (docs/plans/27: a mount that holds a
//! directory's delegation answers `create` at once).
//!
//! Inodes are never reused: `Superblock::next_ino` and `next_generation` only grow. An
//! [`Op::ReserveInodes`] advances both by `count` and records the
//! range for the sender's session (key `16 ‖ client`); [`Op::MakeAt`]
//! creates an entry with one of those handles. Within a range, handles are spent in
//! increasing order: a `MakeAt` must name a handle above every one the session used before,
//! so no handle is ever given to two files, even if a batch that used it failed (its number
//! is then skipped for ever: 64 bits last). A session keeps at most [`MAX_RANGES`] ranges
//! (the one in use and the next); a new one beyond that drops the oldest.
//!
//! A `MakeAt` may carry the time its mount answered the creation with (the mount's clock):
//! the entry and its directory get that time, not the agreed one, if it is within
//! [`MAKE_AT_SKEW_SECS`] of it, so the attributes the kernel was given are the ones kept
//! (a mount holds early answers for up to a second; a program that `stat`s a new file
//! then and again later sees one time). A client gains nothing it lacked: an owner sets
//! its files' times with `utimes` already; this moves a creation's `ctime`, and its
//! directory's `mtime`, by at most the bound.

use crate::encoding::{decode, encode};
use crate::exec::Exec;
use crate::fail::Res;
use crate::key;
use crate::proto::attr::Timestamp;
use crate::proto::errno::Errno;
use crate::proto::handle::FileHandle;
use crate::proto::op::Op;
use crate::proto::reply::Reply;
use crate::store::Store;
use serde::{Deserialize, Serialize};

/// Most inode numbers one [`Op::ReserveInodes`] reserves.
pub const MAX_RESERVE: u32 = 4096;
/// Most ranges a session holds.
pub const MAX_RANGES: usize = 2;
/// How far (seconds) a [`Op::MakeAt`]'s own time may be from the agreed time to be taken.
pub const MAKE_AT_SKEW_SECS: u64 = 60;

/// A reserved range: handles `(ino + k, generation + k)` for `k` in `spent..count` are
/// still to be used.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
pub struct Range {
    /// The first inode number.
    pub ino: u64,
    /// Its generation.
    pub generation: u64,
    /// How many.
    pub count: u64,
    /// How many from the start are spent (used, or skipped by a later one).
    pub spent: u64,
}

impl Range {
    /// The offset of `fh` in this range if it is one of its handles not yet spent.
    fn offset_of(&self, fh: FileHandle) -> Option<u64> {
        let k = fh.ino.checked_sub(self.ino)?;
        (k < self.count && k >= self.spent && fh.generation.checked_sub(self.generation) == Some(k))
            .then_some(k)
    }
}

/// A session's reserved ranges, oldest first.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug, Default)]
pub struct Reserved {
    /// At most [`MAX_RANGES`].
    pub ranges: Vec<Range>,
}

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    fn reserved(&self) -> Res<Reserved> {
        match self.txn.get(&key::reserved(self.client))? {
            Some(b) => Ok(decode(&b)?),
            None => Ok(Reserved::default()),
        }
    }

    /// [`Op::ReserveInodes`].
    pub(crate) fn reserve_inodes(&mut self, count: u32) -> Res<Reply> {
        if count == 0 || count > MAX_RESERVE {
            return Err(Errno::EINVAL.into());
        }
        let first = FileHandle {
            ino: self.sb.next_ino,
            generation: self.sb.next_generation,
        };
        self.sb.next_ino += u64::from(count);
        self.sb.next_generation += u64::from(count);
        let mut r = self.reserved()?;
        if r.ranges.len() >= MAX_RANGES {
            r.ranges.remove(0);
        }
        r.ranges.push(Range {
            ino: first.ino,
            generation: first.generation,
            count: u64::from(count),
            spent: 0,
        });
        self.txn.put(key::reserved(self.client), encode(&r));
        Ok(Reply::Reserved { first, count })
    }

    /// [`Op::MakeAt`]: spends `at` (and every handle before it in its range), then runs
    /// `make` with it, at `time` if that is within [`MAKE_AT_SKEW_SECS`] of the agreed time
    /// (else at the agreed time).
    pub(crate) fn make_at(
        &mut self,
        at: FileHandle,
        make: Op,
        time: Option<Timestamp>,
    ) -> Res<Reply> {
        if !matches!(
            make,
            Op::Create { .. } | Op::Mkdir { .. } | Op::Symlink { .. } | Op::Mknod { .. }
        ) {
            return Err(Errno::EINVAL.into());
        }
        let mut r = self.reserved()?;
        let Some((range, k)) = r
            .ranges
            .iter_mut()
            .find_map(|g| g.offset_of(at).map(|k| (g, k)))
        else {
            return Err(Errno::EINVAL.into());
        };
        range.spent = k + 1;
        self.txn.put(key::reserved(self.client), encode(&r));
        let near = |t: &Timestamp| t.secs.abs_diff(self.now.secs) <= MAKE_AT_SKEW_SECS;
        self.at = Some((at, time.filter(near).unwrap_or(self.now)));
        let reply = self.run(make);
        // `Create` of an existing name makes nothing: the handle is spent all the same.
        self.at = None;
        reply
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_gives_each_unspent_handle_once_in_order() {
        let r = Range {
            ino: 100,
            generation: 50,
            count: 3,
            spent: 1,
        };
        let h = |ino, generation| FileHandle { ino, generation };
        assert_eq!(r.offset_of(h(100, 50)), None, "spent");
        assert_eq!(r.offset_of(h(101, 51)), Some(1));
        assert_eq!(r.offset_of(h(102, 52)), Some(2));
        assert_eq!(r.offset_of(h(103, 53)), None, "past the end");
        assert_eq!(r.offset_of(h(101, 52)), None, "another generation");
        assert_eq!(r.offset_of(h(99, 49)), None, "before the start");
    }
}
