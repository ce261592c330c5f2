//! Close-to-open books: what each file the kernel holds looked like when this mount last saw
//! it, and when an `open` last let the kernel drop its pages, so an `open` can tell whether
//! another client changed the file since and whether the kernel's pages may stay
//! (`FOPEN_KEEP_CACHE`; `filesystem.rs` `open`).

use crate::attrs::Stamp;
use std::collections::HashMap;

/// The stamps, by inode.
#[derive(Default)]
pub(crate) struct Stamps {
    /// The last attributes seen of each inode the kernel holds.
    seen: HashMap<u64, Stamp>,
    /// The attributes each inode had at its last `open` that let the kernel drop its
    /// cached pages.
    opened: HashMap<u64, Stamp>,
}

impl Stamps {
    /// `ino` seen as `stamp`; what it was seen as before.
    pub(crate) fn saw(&mut self, ino: u64, stamp: Stamp) -> Option<Stamp> {
        self.seen.insert(ino, stamp)
    }

    /// What `ino` was last seen as.
    pub(crate) fn last(&self, ino: u64) -> Option<Stamp> {
        self.seen.get(&ino).copied()
    }

    /// `ino` to be looked at afresh (removed or replaced here).
    pub(crate) fn unsee(&mut self, ino: u64) {
        self.seen.remove(&ino);
    }

    /// The kernel dropped `ino`'s pages at `stamp` (they are of that version from now on).
    pub(crate) fn pages_dropped(&mut self, ino: u64, stamp: Stamp) {
        self.opened.insert(ino, stamp);
    }

    /// Whether an `open` finding `ino` at `stamp` may keep the kernel's pages: it is as it
    /// was when they were last dropped. If not, they are dropped now, at `stamp`.
    pub(crate) fn keeps_pages(&mut self, ino: u64, stamp: Stamp) -> bool {
        let keep = self.opened.get(&ino) == Some(&stamp);
        if !keep {
            self.opened.insert(ino, stamp);
        }
        keep
    }

    /// The kernel forgot `ino`.
    pub(crate) fn forget(&mut self, ino: u64) {
        self.seen.remove(&ino);
        self.opened.remove(&ino);
    }
}
