//! The mount's attribute cache: the attributes the cluster's replies carried, so that the
//! kernel's `getattr` is answered here for up to the mount's cache timeout
//! ([`DEFAULT_CACHE_TIMEOUT`](super::DEFAULT_CACHE_TIMEOUT)) after they were fetched — the
//! bound the kernel's own attribute cache already gives (NFS's attribute cache).
//!
//! Why: the kernel drops its cached attributes of a directory whenever this mount creates or
//! removes a name in it, and with `default_permissions` it then asks for them again before
//! the next lookup there — about one `getattr` per create or remove (PostMark: 13 k of 41 k
//! operations). The replies of those operations carry the directory's attributes after the
//! operation (`Reply::Made`, `Reply::Unlinked`, NFSv3's post-operation attributes), so the
//! question is answered without a round trip.
//!
//! What keeps it exact for this mount's own changes: every reply that carries attributes
//! refreshes them; an operation whose effect on other inodes the reply does not describe
//! drops what it may have changed (extended attributes: the file; a rename or exchange:
//! everything, since it changes the moved inode's ctime and a replaced one's link count);
//! a failed modifying operation drops everything (a soft mount's timeout leaves it unknown
//! whether it ran). `open` never uses the cache (close-to-open consistency).

use byzfs_fs::proto::attr::Timestamp;
use byzfs_fs::{Attr, FsResult, Op, Reply};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// At most this many inodes are cached; past it the cache starts afresh (the kernel's
/// `forget` normally keeps it far smaller).
const MAX_ENTRIES: usize = 1 << 16;

/// Attributes by inode number, with when they were fetched.
///
/// A reply may come back after later changes were recorded (the mount's lanes wait for
/// their replies without its lock: `lib.rs` `call`), so the cache counts its changes: a
/// reply recorded with [`AttrCache::record_since`] fills only inodes nothing changed since
/// its call was sent ([`AttrCache::mark`]), and is otherwise dropped (a later reply, a
/// held-back write, a removal knows better).
#[derive(Default)]
pub struct AttrCache {
    by_ino: HashMap<u64, (Attr, Instant)>,
    /// Changes counted so far.
    tick: u64,
    /// The tick of each inode's last change (filled or dropped).
    changed: HashMap<u64, u64>,
    /// The tick at which everything was last dropped.
    cleared: u64,
}

/// What an operation may change, taken before it is sent (it is consumed by the sending).
#[derive(Clone, Copy)]
pub struct Effect {
    modifies: bool,
    reach: Reach,
}

impl Effect {
    /// The effect of `op`.
    pub fn of(op: &Op) -> Effect {
        Effect {
            // Lock operations change no file: their errors (EAGAIN) leave the cache.
            modifies: !op.is_read_only() && !op.is_lock(),
            reach: reach(op),
        }
    }
}

/// What an operation may change beyond what its reply describes.
#[derive(Clone, Copy)]
enum Reach {
    /// Nothing (read-only operations, and those whose replies carry every change).
    Described,
    /// This inode's attributes (ctime).
    Inode(u64),
    /// Attributes of inodes the reply does not name.
    Unknown,
}

fn reach(op: &Op) -> Reach {
    match op {
        Op::SetXattr { fh, .. } | Op::RemoveXattr { fh, .. } => Reach::Inode(fh.ino),
        Op::Rename { .. }
        | Op::RenameNoReplace { .. }
        | Op::Exchange { .. }
        // Files it removes, and the links left of them.
        | Op::SweepOrphans { .. }
        | Op::SweepDir { .. } => Reach::Unknown,
        _ => Reach::Described,
    }
}

impl AttrCache {
    /// Attributes of `ino` fetched less than `ttl` ago, and how long they stay valid.
    pub fn fresh(&self, ino: u64, ttl: Duration) -> Option<(&Attr, Duration)> {
        let (a, at) = self.by_ino.get(&ino)?;
        let left = ttl.checked_sub(at.elapsed())?;
        (!left.is_zero()).then_some((a, left))
    }

    /// The last attributes of `ino` the cache holds, however old.
    pub fn last(&self, ino: u64) -> Option<&Attr> {
        self.by_ino.get(&ino).map(|(a, _)| a)
    }

    /// Learns from the `result` of an operation with `effect`, received at `now` and sent
    /// while the cache was as it is (the mount's lock held from sending to now).
    #[cfg(test)]
    pub fn record(&mut self, effect: Effect, result: &FsResult, now: Instant) {
        self.record_since(u64::MAX, effect, result, now);
    }

    /// Where the cache stands: a call sent now has its reply recorded with
    /// [`AttrCache::record_since`] this mark.
    pub fn mark(&self) -> u64 {
        self.tick
    }

    /// [`AttrCache::record`] for a call sent at `mark`: its attributes fill only inodes
    /// that did not change since (what it drops, it always drops).
    #[cfg(test)]
    pub fn record_since(&mut self, mark: u64, effect: Effect, result: &FsResult, now: Instant) {
        self.record_since_but(mark, effect, result, now, &HashSet::new());
    }

    /// [`AttrCache::record_since`] for an ordered operation whose reply was waited for
    /// without the mount's lock (`calls.rs` `ordered_lane_takes`): an inode it describes
    /// that changed since it was sent (another ordered operation's reply, answered in
    /// either order) is dropped, not kept as the other left it, which may be the older.
    pub fn record_ordered_since(
        &mut self,
        mark: u64,
        effect: Effect,
        result: &FsResult,
        now: Instant,
    ) {
        let stale: Vec<u64> = described(result)
            .into_iter()
            .filter(|&ino| !self.unchanged_since(mark, ino))
            .collect();
        self.record_since_but(mark, effect, result, now, &HashSet::new());
        for ino in stale {
            self.forget(ino);
        }
    }

    /// [`AttrCache::record_since`], but what the result says of the inodes in `later` is
    /// passed over: requests already sent after this one change them (write-back in
    /// flight, `inflight.rs`), and their own results fill them.
    pub fn record_since_but(
        &mut self,
        mark: u64,
        effect: Effect,
        result: &FsResult,
        now: Instant,
        later: &HashSet<u64>,
    ) {
        let put = |c: &mut Self, a: &Attr| {
            if !later.contains(&a.fh.ino) {
                c.put(mark, a, now);
            }
        };
        match result {
            Ok(Reply::Attr(a) | Reply::Entry(a) | Reply::Write { attr: a, .. }) => {
                put(self, a);
            }
            Ok(Reply::Made { entry, dir }) => {
                put(self, entry);
                put(self, dir);
            }
            Ok(Reply::Unlinked { dir, ino, left }) => {
                put(self, dir);
                match left {
                    Some(a) => put(self, a),
                    None => self.forget(*ino),
                }
            }
            // Its members' replies, in order (a batch holds no rename: `byzfs_fs::batch`):
            // each inode once, as the last member left it. A put marks its inode changed,
            // so a second one from the same reply would be refused as newer than `mark`
            // (a creation's size 0 kept over the size its write then gave).
            Ok(Reply::Batch(replies)) => {
                let mut last: HashMap<u64, Option<&Attr>> = HashMap::new();
                for r in replies {
                    match r {
                        Reply::Attr(a) | Reply::Entry(a) | Reply::Write { attr: a, .. } => {
                            last.insert(a.fh.ino, Some(a));
                        }
                        Reply::Made { entry, dir } => {
                            last.insert(entry.fh.ino, Some(entry));
                            last.insert(dir.fh.ino, Some(dir));
                        }
                        Reply::Unlinked { dir, ino, left } => {
                            last.insert(dir.fh.ino, Some(dir));
                            last.insert(*ino, left.as_ref());
                        }
                        _ => {}
                    }
                }
                for (ino, a) in last {
                    match a {
                        Some(a) => put(self, a),
                        None => self.forget(ino),
                    }
                }
            }
            Ok(_) => {}
            Err(_) if effect.modifies => self.clear(),
            Err(_) => {}
        }
        if result.is_ok() {
            match effect.reach {
                Reach::Described => {}
                Reach::Inode(ino) => self.forget(ino),
                Reach::Unknown => self.clear(),
            }
        }
    }

    /// Whether a reply to a call sent at `mark` may still fill `ino`.
    pub fn unchanged_since(&self, mark: u64, ino: u64) -> bool {
        self.cleared <= mark && self.changed.get(&ino).is_none_or(|t| *t <= mark)
    }

    /// Learns attributes this mount made itself: an entry it answered early and its
    /// directory (`dirs.rs`), until the batch's reply brings the cluster's.
    pub fn learn(&mut self, a: &Attr, now: Instant) {
        self.put(u64::MAX, a, now);
    }

    /// Drops `ino` (the kernel forgot it, or it changed in a way no reply described).
    pub fn forget(&mut self, ino: u64) {
        self.by_ino.remove(&ino);
        self.touch(ino);
    }

    /// Drops everything.
    fn clear(&mut self) {
        self.tick += 1;
        self.cleared = self.tick;
        self.by_ino.clear();
        self.changed.clear();
    }

    /// Counts a change of `ino`.
    fn touch(&mut self, ino: u64) {
        if self.changed.len() >= MAX_ENTRIES {
            self.clear();
        }
        self.tick += 1;
        self.changed.insert(ino, self.tick);
    }

    fn put(&mut self, mark: u64, a: &Attr, now: Instant) {
        if !self.unchanged_since(mark, a.fh.ino) {
            return;
        }
        if self.by_ino.len() >= MAX_ENTRIES {
            self.clear();
        }
        self.by_ino.insert(a.fh.ino, (a.clone(), now));
        self.touch(a.fh.ino);
    }
}

/// The inodes whose attributes `result` describes.
fn described(result: &FsResult) -> Vec<u64> {
    match result {
        Ok(Reply::Attr(a) | Reply::Entry(a) | Reply::Write { attr: a, .. }) => vec![a.fh.ino],
        Ok(Reply::Made { entry, dir }) => vec![entry.fh.ino, dir.fh.ino],
        Ok(Reply::Unlinked { dir, ino, .. }) => vec![dir.fh.ino, *ino],
        Ok(Reply::Batch(replies)) => replies
            .iter()
            .flat_map(|r| described(&Ok(r.clone())))
            .collect(),
        _ => Vec::new(),
    }
}

/// What of an inode's attributes says its data or size changed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    size: u64,
    mtime: Timestamp,
    ctime: Timestamp,
}

impl Stamp {
    pub(crate) fn of(a: &Attr) -> Stamp {
        Stamp {
            size: a.size,
            mtime: a.mtime,
            ctime: a.ctime,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use byzfs_fs::{Errno, FileHandle, FileType, Timestamp};

    const TTL: Duration = Duration::from_secs(1);

    fn attr(ino: u64, size: u64) -> Attr {
        Attr {
            fh: FileHandle { ino, generation: 1 },
            kind: FileType::Regular,
            mode: 0o644,
            nlink: 1,
            uid: 0,
            gid: 0,
            size,
            used: size,
            atime: Timestamp::default(),
            mtime: Timestamp::default(),
            ctime: Timestamp::default(),
            rdev: 0,
            crypt: Vec::new(),
        }
    }

    fn fh(ino: u64) -> FileHandle {
        FileHandle { ino, generation: 1 }
    }

    fn size(c: &AttrCache, ino: u64) -> Option<u64> {
        c.fresh(ino, TTL).map(|(a, _)| a.size)
    }

    /// A batch answered to a call sent at a mark (a write-back batch left in flight,
    /// `inflight.rs`): each inode as its last member left it, an unchanged one filled, one
    /// changed since the mark left alone.
    #[test]
    fn a_batch_recorded_since_a_mark_keeps_each_inodes_last_attributes() {
        let mut c = AttrCache::default();
        let t0 = Instant::now();
        c.record(Effect::of(&Op::StatFs), &Ok(Reply::Attr(attr(9, 1))), t0);
        let mark = c.mark();
        c.forget(9);
        let batch = Ok(Reply::Batch(vec![
            Reply::Made {
                entry: attr(5, 0),
                dir: attr(1, 4096),
            },
            Reply::Write {
                count: 707,
                attr: attr(5, 707),
            },
            Reply::Write {
                count: 2,
                attr: attr(9, 2),
            },
            Reply::Unlinked {
                dir: attr(1, 4096),
                ino: 6,
                left: None,
            },
        ]));
        c.record_since(mark, Effect::of(&Op::Batch(Vec::new())), &batch, t0);
        assert_eq!(
            (size(&c, 5), size(&c, 1), size(&c, 9), size(&c, 6)),
            (Some(707), Some(4096), None, None)
        );
        // An earlier batch's answer lands while a later one still changes inode 5: what
        // it says of 5 (its creation, size 0) is passed over, and the later one's answer,
        // sent at a mark before it, still fills it.
        let mut c = AttrCache::default();
        let early = c.mark();
        c.forget(5);
        let late = c.mark();
        let made = Ok(Reply::Made {
            entry: attr(5, 0),
            dir: attr(1, 4096),
        });
        let later: HashSet<u64> = [5].into();
        c.record_since_but(early, Effect::of(&Op::StatFs), &made, t0, &later);
        assert_eq!((size(&c, 5), size(&c, 1)), (None, Some(4096)));
        let written = Ok(Reply::Write {
            count: 707,
            attr: attr(5, 707),
        });
        c.record_since_but(late, Effect::of(&Op::StatFs), &written, t0, &HashSet::new());
        assert_eq!(size(&c, 5), Some(707));
    }

    #[test]
    fn replies_with_attributes_fill_it_and_they_expire() {
        let mut c = AttrCache::default();
        let t0 = Instant::now();
        let made = Ok(Reply::Made {
            entry: attr(5, 0),
            dir: attr(1, 4096),
        });
        c.record(Effect::of(&Op::StatFs), &made, t0);
        assert_eq!((size(&c, 5), size(&c, 1)), (Some(0), Some(4096)));
        let written = Ok(Reply::Write {
            count: 3,
            attr: attr(5, 3),
        });
        c.record(Effect::of(&Op::StatFs), &written, t0);
        assert_eq!(size(&c, 5), Some(3));
        // Fetched more than the TTL ago: not fresh.
        let old = t0.checked_sub(TTL).unwrap_or(t0);
        c.record(
            Effect::of(&Op::GetAttr { fh: fh(7) }),
            &Ok(Reply::Attr(attr(7, 1))),
            old,
        );
        if old < t0 {
            assert_eq!(size(&c, 7), None);
        }
    }

    #[test]
    fn a_removal_refreshes_the_directory_and_drops_a_freed_inode() {
        let mut c = AttrCache::default();
        let now = Instant::now();
        c.record(Effect::of(&Op::StatFs), &Ok(Reply::Attr(attr(5, 9))), now);
        c.record(Effect::of(&Op::StatFs), &Ok(Reply::Attr(attr(6, 9))), now);
        let remove = |name: &str| Op::Remove {
            dir: FileHandle::ROOT,
            name: name.into(),
        };
        let gone = Ok(Reply::Unlinked {
            dir: attr(1, 10),
            ino: 5,
            left: None,
        });
        c.record(Effect::of(&remove("a")), &gone, now);
        assert_eq!((size(&c, 1), size(&c, 5)), (Some(10), None));
        let left = Ok(Reply::Unlinked {
            dir: attr(1, 11),
            ino: 6,
            left: Some(attr(6, 2)),
        });
        c.record(Effect::of(&remove("b")), &left, now);
        assert_eq!((size(&c, 1), size(&c, 6)), (Some(11), Some(2)));
    }

    #[test]
    fn changes_no_reply_describes_drop_what_they_may_have_changed() {
        let mut c = AttrCache::default();
        let now = Instant::now();
        let fill = |c: &mut AttrCache| {
            for ino in [1, 5, 6] {
                c.record(Effect::of(&Op::StatFs), &Ok(Reply::Attr(attr(ino, 1))), now);
            }
        };
        fill(&mut c);
        let set = Op::SetXattr {
            fh: fh(5),
            name: b"user.a".to_vec(),
            value: Vec::new(),
            how: byzfs_fs::proto::op::XattrSet::Any,
        };
        c.record(Effect::of(&set), &Ok(Reply::Done), now);
        assert_eq!((size(&c, 5), size(&c, 6)), (None, Some(1)));
        let rename = Op::Rename {
            from_dir: FileHandle::ROOT,
            from_name: b"a".to_vec(),
            to_dir: FileHandle::ROOT,
            to_name: b"b".to_vec(),
        };
        c.record(Effect::of(&rename), &Ok(Reply::Done), now);
        assert_eq!((size(&c, 1), size(&c, 6)), (None, None));
        // A failed change may or may not have run (a soft mount's timeout): drop all.
        fill(&mut c);
        let write = Op::Write {
            fh: fh(6),
            offset: 0,
            data: vec![1],
        };
        c.record(Effect::of(&write), &Err(Errno::EIO), now);
        assert_eq!(size(&c, 1), None);
        // A failed read changes nothing.
        fill(&mut c);
        c.record(
            Effect::of(&Op::GetAttr { fh: fh(9) }),
            &Err(Errno::ESTALE),
            now,
        );
        assert_eq!(size(&c, 1), Some(1));
        c.forget(1);
        assert_eq!(size(&c, 1), None);
    }

    /// A reply that comes back after later changes (a lane's: `lib.rs` `call`) fills only
    /// what did not change since its call was sent.
    #[test]
    fn a_late_reply_does_not_overwrite_what_changed_after_it_was_sent() {
        let mut c = AttrCache::default();
        let now = Instant::now();
        let get = |ino| Effect::of(&Op::GetAttr { fh: fh(ino) });
        c.record(get(5), &Ok(Reply::Attr(attr(5, 1))), now);
        let sent = c.mark();
        // Meanwhile: a newer reply for 5, a held-back write drops 6.
        c.record(get(5), &Ok(Reply::Attr(attr(5, 2))), now);
        c.forget(6);
        for ino in [5, 6, 7] {
            c.record_since(sent, get(ino), &Ok(Reply::Attr(attr(ino, 9))), now);
        }
        assert_eq!(
            (size(&c, 5), size(&c, 6), size(&c, 7)),
            (Some(2), None, Some(9))
        );
        // After everything was dropped, no reply sent before fills anything.
        let sent = c.mark();
        c.clear();
        c.record_since(sent, get(8), &Ok(Reply::Attr(attr(8, 1))), now);
        assert_eq!(size(&c, 8), None);
        // A reply sent after fills as usual.
        let sent = c.mark();
        c.record_since(sent, get(8), &Ok(Reply::Attr(attr(8, 3))), now);
        assert_eq!(size(&c, 8), Some(3));
    }
}
