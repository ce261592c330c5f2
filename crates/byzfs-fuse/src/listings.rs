//! Open directories listed from this mount's books: a directory it holds (`dirs.rs`) is
//! listed, at `opendir`, from the names it keeps, and that open directory's `readdir`s
//! are answered from the copy, asking nobody (across sites each `readdir` was a round trip,
//! and the kernel asks twice per directory: the second finds the end).
//!
//! As POSIX allows, an open directory lists the names it had when it was opened (or last
//! rewound: a `readdir` from offset 0 copies them again if the directory is still held);
//! a directory given back meanwhile goes on from the copy. Offsets are positions in the
//! copy, meaningful to that open directory only, as `telldir` needs.

use byzfs_fs::FileType;
use std::collections::HashMap;

/// One entry: its name, inode number and type.
pub(crate) type Entry = (Vec<u8>, u64, FileType);

/// The copies of the open directories listed here, by the handle their `opendir` got.
#[derive(Default)]
pub(crate) struct Listings {
    open: HashMap<u64, Vec<Entry>>,
    /// The last handle given (0 is never given: it stands for a directory listed by the
    /// cluster).
    last: u64,
}

impl Listings {
    /// A directory opened with these entries (`.` and `..` first): its handle.
    pub(crate) fn open(&mut self, entries: Vec<Entry>) -> u64 {
        self.last += 1;
        self.open.insert(self.last, entries);
        self.last
    }

    /// Whether `handle` is listed here.
    pub(crate) fn has(&self, handle: u64) -> bool {
        self.open.contains_key(&handle)
    }

    /// Copies the entries again (a rewind of a directory still held).
    pub(crate) fn renew(&mut self, handle: u64, entries: Vec<Entry>) {
        if let Some(e) = self.open.get_mut(&handle) {
            *e = entries;
        }
    }

    /// The entries of `handle` from `offset` on, each with the offset of the one after it
    /// (what the kernel passes back to go on); `None` if `handle` is not listed here.
    pub(crate) fn from(&self, handle: u64, offset: u64) -> Option<Vec<(u64, &Entry)>> {
        let entries = self.open.get(&handle)?;
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        Some(
            entries
                .iter()
                .enumerate()
                .skip(start)
                .map(|(i, e)| (i as u64 + 1, e))
                .collect(),
        )
    }

    /// `handle` was closed.
    pub(crate) fn release(&mut self, handle: u64) {
        self.open.remove(&handle);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, ino: u64) -> Entry {
        (name.as_bytes().to_vec(), ino, FileType::Regular)
    }

    /// Each open directory goes through its own copy; an offset the kernel passes back
    /// goes on after the entry it followed; a rewind copies again; a release forgets.
    #[test]
    fn open_directories_list_their_own_copies() {
        let mut l = Listings::default();
        let a = l.open(vec![entry(".", 1), entry("..", 1), entry("x", 5)]);
        let b = l.open(vec![entry(".", 2), entry("..", 1)]);
        assert_ne!((a, b), (0, 0));
        assert_ne!(a, b);
        let names = |l: &Listings, h, off| -> Option<Vec<(u64, String)>> {
            l.from(h, off).map(|v| {
                v.into_iter()
                    .map(|(o, e)| (o, String::from_utf8_lossy(&e.0).into_owned()))
                    .collect()
            })
        };
        let all = vec![(1, ".".into()), (2, "..".into()), (3, "x".into())];
        assert_eq!(names(&l, a, 0), Some(all));
        assert_eq!(names(&l, a, 2), Some(vec![(3, "x".into())]));
        assert_eq!(names(&l, a, 3), Some(vec![]), "at the end");
        assert_eq!(names(&l, a, u64::MAX), Some(vec![]), "far past it");
        assert_eq!(names(&l, b, 1), Some(vec![(2, "..".into())]));
        l.renew(a, vec![entry(".", 1), entry("..", 1)]);
        assert_eq!(names(&l, a, 2), Some(vec![]), "rewound, without x");
        assert!(l.has(a));
        l.release(a);
        assert!(!l.has(a));
        assert_eq!(names(&l, a, 0), None);
        assert_eq!(names(&l, 0, 0), None, "0: listed by the cluster");
    }
}
