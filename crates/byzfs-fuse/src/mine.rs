//! What this mount made in the directories it holds (`dirs.rs`), and the bytes of the small
//! files among them.
//!
//! No other mount can reach such a file until this one gives its directory back (it would
//! have to look the name up there, which recalls the directory), so what this mount last
//! saw of it is current: its attributes (`dirs.rs`), and, for a regular file made empty
//! here and changed only by this mount's writes since, its contents. Those are kept here
//! up to [`MAX_FILE`] a file and [`MAX_BYTES`] in all, so reading a file the mount just
//! wrote asks nobody: the kernel keeps the whole pages written through it, but not a
//! partial last page, which it reads back (one round trip a file, 40 ms across sites).
//!
//! A file's bytes are dropped at any change this mount does not copy here (a truncation,
//! `fallocate`, a copy into it, a write the replicas refused), and with the file when it
//! stops being this mount's: removed, linked elsewhere, renamed out, its directory given
//! back or forgotten.

use std::collections::HashMap;

/// The largest file whose bytes are kept.
pub(crate) const MAX_FILE: usize = 1 << 20;
/// The most bytes kept in all.
pub(crate) const MAX_BYTES: usize = 64 << 20;

/// The inodes this mount made in held directories, each with its directory, and the
/// contents of the small regular files among them.
#[derive(Default)]
pub(crate) struct Mine {
    /// Inode → the held directory it was made in.
    dirs: HashMap<u64, u64>,
    /// Inode → its whole contents.
    bytes: HashMap<u64, Vec<u8>>,
    /// The sum of `bytes`' lengths.
    total: usize,
    /// Reads answered from `bytes` (logged at unmount).
    pub(crate) reads: u64,
    /// Changes this mount made to any file's contents so far: a read's bytes are kept
    /// ([`Mine::keep_read`]) only if none came between its send and its reply.
    changes: u64,
}

impl Mine {
    /// `ino` was made in held directory `dir`; `empty_file`: a regular file, made empty,
    /// whose bytes are then kept.
    pub(crate) fn made(&mut self, ino: u64, dir: u64, empty_file: bool) {
        self.dirs.insert(ino, dir);
        self.drop_bytes(ino);
        if empty_file {
            self.bytes.insert(ino, Vec::new());
        }
    }

    /// The held directory `ino` was made in, if this mount made it.
    pub(crate) fn dir_of(&self, ino: u64) -> Option<u64> {
        self.dirs.get(&ino).copied()
    }

    /// `ino` is no longer this mount's alone.
    pub(crate) fn remove(&mut self, ino: u64) {
        self.dirs.remove(&ino);
        self.drop_bytes(ino);
    }

    /// Keeps what was made in the directories `keep` says yes to.
    pub(crate) fn retain_dirs(&mut self, keep: impl Fn(u64) -> bool) {
        let gone: Vec<u64> = self
            .dirs
            .iter()
            .filter(|(_, &d)| !keep(d))
            .map(|(&i, _)| i)
            .collect();
        for ino in gone {
            self.remove(ino);
        }
    }

    /// Forgets everything.
    pub(crate) fn clear(&mut self) {
        self.dirs.clear();
        self.bytes.clear();
        self.total = 0;
    }

    /// This mount wrote `data` at `offset` of `ino` (held back or sent, and not refused):
    /// its kept bytes, if any, change alike; a file grown past [`MAX_FILE`], or past what
    /// [`MAX_BYTES`] leaves, is no longer kept.
    pub(crate) fn wrote(&mut self, ino: u64, offset: u64, data: &[u8]) {
        self.changes += 1;
        let Some(kept) = self.bytes.get(&ino) else {
            return;
        };
        let end = usize::try_from(offset)
            .ok()
            .and_then(|o| o.checked_add(data.len()));
        let grows = end.map(|e| e.saturating_sub(kept.len()));
        let fits = match (end, grows) {
            (Some(e), Some(g)) => e <= MAX_FILE && self.total + g <= MAX_BYTES,
            _ => false,
        };
        if !fits {
            self.drop_bytes(ino);
            return;
        }
        let (Some(end), Some(grows), Some(kept)) = (end, grows, self.bytes.get_mut(&ino)) else {
            return;
        };
        let start = end - data.len();
        if kept.len() < end {
            // A write past the end leaves a hole of zeros, as in the file.
            kept.resize(end, 0);
        }
        kept[start..end].copy_from_slice(data);
        self.total += grows;
    }

    /// `ino` changed in a way not copied here: its bytes are read from the cluster again.
    pub(crate) fn changed(&mut self, ino: u64) {
        self.changes += 1;
        self.drop_bytes(ino);
    }

    /// The count of changes [`Mine::keep_read`] compares with.
    pub(crate) fn changes(&self) -> u64 {
        self.changes
    }

    /// A read of `ino` from its start, sent when [`Mine::changes`] was `seen`, came back
    /// with the whole file, `data` (shorter than asked): kept, as a file made here is, if
    /// nothing changed since and it fits (a file this mount holds: `held_files.rs`).
    pub(crate) fn keep_read(&mut self, ino: u64, data: &[u8], seen: u64) -> bool {
        let fits = data.len() <= MAX_FILE && self.total + data.len() <= MAX_BYTES;
        if seen != self.changes || self.bytes.contains_key(&ino) || !fits {
            return false;
        }
        self.bytes.insert(ino, data.to_vec());
        self.total += data.len();
        true
    }

    /// Up to `count` bytes of `ino` from `offset`, if its contents are kept (empty past
    /// the end, as a read there).
    pub(crate) fn read(&mut self, ino: u64, offset: u64, count: u32) -> Option<Vec<u8>> {
        let kept = self.bytes.get(&ino)?;
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(kept.len());
        let end = start.saturating_add(count as usize).min(kept.len());
        self.reads += 1;
        Some(kept[start..end].to_vec())
    }

    fn drop_bytes(&mut self, ino: u64) {
        if let Some(b) = self.bytes.remove(&ino) {
            self.total -= b.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes in pieces, past the end (a hole), over what is there, and reads anywhere,
    /// as a file would.
    #[test]
    fn kept_bytes_follow_the_writes() {
        let mut m = Mine::default();
        m.made(5, 1, true);
        assert_eq!(m.read(5, 0, 10), Some(Vec::new()), "made empty");
        m.wrote(5, 0, b"hello");
        m.wrote(5, 8, b"xy");
        m.wrote(5, 1, b"EL");
        assert_eq!(m.read(5, 0, 100), Some(b"hELlo\0\0\0xy".to_vec()));
        assert_eq!(m.read(5, 3, 3), Some(b"lo\0".to_vec()));
        assert_eq!(m.read(5, 10, 4), Some(Vec::new()), "at the end");
        assert_eq!(m.read(5, u64::MAX, 4), Some(Vec::new()), "far past it");
        assert_eq!(m.total, 10);
        assert_eq!(m.reads, 5);
        assert_eq!(m.dir_of(5), Some(1));
    }

    /// Directories and symlinks are this mount's but keep no bytes; a change not copied,
    /// a removal, or a directory given back drops them.
    #[test]
    fn bytes_go_with_the_file_or_at_a_change() {
        let mut m = Mine::default();
        m.made(5, 1, true);
        m.made(6, 1, false);
        m.made(7, 2, true);
        m.wrote(5, 0, b"abc");
        m.wrote(7, 0, b"defg");
        assert_eq!(m.read(6, 0, 1), None, "not a file made empty");
        m.changed(5);
        assert_eq!(m.read(5, 0, 3), None);
        assert_eq!(m.dir_of(5), Some(1), "still this mount's");
        m.wrote(5, 0, b"zz");
        assert_eq!(m.read(5, 0, 3), None, "dropped for good");
        m.retain_dirs(|d| d != 2);
        assert_eq!((m.read(7, 0, 4), m.dir_of(7)), (None, None));
        assert_eq!(m.total, 0);
        m.made(8, 1, true);
        m.wrote(8, 0, b"q");
        m.remove(8);
        assert_eq!((m.read(8, 0, 1), m.dir_of(8), m.total), (None, None, 0));
    }

    /// A whole file read is kept only if no change came between the read's send and its
    /// reply, and then follows the writes.
    #[test]
    fn a_read_is_kept_only_if_nothing_changed_meanwhile() {
        let mut m = Mine::default();
        let seen = m.changes();
        m.wrote(3, 0, b"other file");
        assert!(!m.keep_read(5, b"old", seen), "a write came between");
        let seen = m.changes();
        assert!(m.keep_read(5, b"whole", seen));
        assert!(!m.keep_read(5, b"again", seen), "kept already");
        m.wrote(5, 5, b"!");
        assert_eq!(m.read(5, 0, 10), Some(b"whole!".to_vec()));
        assert_eq!(m.total, 6);
        m.changed(5);
        assert_eq!((m.read(5, 0, 1), m.total), (None, 0));
        let seen = m.changes();
        assert!(!m.keep_read(6, &vec![0; MAX_FILE + 1], seen), "too big");
    }

    /// A file grown past [`MAX_FILE`], or past what [`MAX_BYTES`] leaves, is read from the
    /// cluster; the others stay.
    #[test]
    fn kept_bytes_are_bounded() {
        let mut m = Mine::default();
        m.made(1, 9, true);
        m.wrote(1, MAX_FILE as u64 - 1, b"x");
        assert_eq!(m.total, MAX_FILE);
        m.wrote(1, MAX_FILE as u64, b"y");
        assert_eq!((m.read(1, 0, 1), m.total), (None, 0), "past MAX_FILE");
        m.wrote(1, 0, b"y");
        assert_eq!(m.read(1, 0, 1), None, "not kept again");
        let files = MAX_BYTES / MAX_FILE;
        for ino in 10..10 + files as u64 {
            m.made(ino, 9, true);
            m.wrote(ino, 0, &vec![7; MAX_FILE]);
        }
        assert_eq!(m.total, MAX_BYTES);
        m.made(99, 9, true);
        m.wrote(99, 0, b"z");
        assert_eq!(m.read(99, 0, 1), None, "no room left");
        m.wrote(10, 0, b"a");
        assert_eq!(
            m.read(10, 0, 2),
            Some(vec![b'a', 7]),
            "a write within a kept file"
        );
        m.wrote(11, u64::MAX, b"a");
        assert_eq!(m.read(11, 0, 1), None, "an offset past usize");
        assert_eq!(m.total, MAX_BYTES - MAX_FILE);
    }
}
