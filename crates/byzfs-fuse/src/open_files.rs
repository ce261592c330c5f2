//! The files open on this mount: each open is its own handle, so that a `close` (FLUSH) and
//! its later RELEASE name the same open file.
//!
//! The kernel answers `close(2)` once FLUSH returns and sends RELEASE afterwards, in the
//! background; another FUSE thread may meanwhile take a `unlink` the same process sent
//! right after `close`. That `unlink` would find the file still open here and hide it
//! (NFS's silly rename, `orphans.rs`) instead of removing it, and another mount could then
//! still open it by its inode. So a remove of a file whose every handle here was just flushed
//! waits, a short bounded time, for their RELEASE ([`OpenFiles::closing_until`]); a handle
//! flushed long ago is one a process still holds through another descriptor (`dup`, `fork`),
//! and nothing waits for it.
//! Test: `mount::mounted_cluster_behaves_like_a_linux_file_system` ("removed on A, open on B").

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long after a handle's FLUSH a remove waits for its RELEASE.
pub(crate) const CLOSING_WAIT: Duration = Duration::from_millis(200);

/// Open handles and how many of each inode.
#[derive(Default)]
pub(crate) struct OpenFiles {
    /// Handle → the inode it opened, and when it was last flushed.
    handles: HashMap<u64, Handle>,
    /// Inode → open handles of it.
    count: HashMap<u64, u32>,
    /// The last handle number given (0 is never given: directories use it).
    last: u64,
}

struct Handle {
    ino: u64,
    flushed: Option<Instant>,
}

impl OpenFiles {
    /// A new open of `ino`: its handle, for the kernel to name in FLUSH and RELEASE.
    pub(crate) fn open(&mut self, ino: u64) -> u64 {
        self.last += 1;
        self.handles
            .insert(self.last, Handle { ino, flushed: None });
        *self.count.entry(ino).or_default() += 1;
        self.last
    }

    /// A FLUSH of handle `fh` at `now` (a `close` of one of its descriptors).
    pub(crate) fn flushed(&mut self, fh: u64, now: Instant) {
        if let Some(h) = self.handles.get_mut(&fh) {
            h.flushed = Some(now);
        }
    }

    /// The RELEASE of handle `fh` of `ino`: whether it was that inode's last open here.
    pub(crate) fn release(&mut self, fh: u64, ino: u64) -> bool {
        // A handle this table never gave (none is expected) closes one open of `ino`.
        let ino = self.handles.remove(&fh).map_or(ino, |h| h.ino);
        match self.count.get_mut(&ino) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            Some(_) => {
                self.count.remove(&ino);
                true
            }
            None => false,
        }
    }

    /// Whether `ino` is open on this mount.
    pub(crate) fn contains(&self, ino: u64) -> bool {
        self.count.contains_key(&ino)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.count.is_empty()
    }

    /// Until when a remove of `ino` at `now` should wait for its RELEASE: while every
    /// handle of it here was flushed less than [`CLOSING_WAIT`] ago (the file is being
    /// closed), the end of the first such wait; `None` if a handle of it is in use or was
    /// flushed long ago (held through another descriptor: its RELEASE may never come).
    pub(crate) fn closing_until(&self, ino: u64, now: Instant) -> Option<Instant> {
        let mut first: Option<Instant> = None;
        for h in self.handles.values().filter(|h| h.ino == ino) {
            let end = h.flushed? + CLOSING_WAIT;
            if end <= now {
                return None;
            }
            first = Some(first.map_or(end, |f| f.min(end)));
        }
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flushed_handle_is_waited_for_until_its_release_or_the_wait_ends() {
        let mut files = OpenFiles::default();
        let t0 = Instant::now();
        let (a, b) = (files.open(7), files.open(7));
        assert_eq!((a, b), (1, 2));
        assert!(files.contains(7));
        let other = files.open(8);
        files.flushed(other, t0);
        assert_eq!(files.closing_until(7, t0), None);
        // One handle flushed, one in use: the file stays open.
        files.flushed(a, t0);
        assert_eq!(files.closing_until(7, t0), None);
        // Both flushed: it is being closed; the first wait to end ends the wait.
        files.flushed(b, t0 + CLOSING_WAIT / 2);
        assert_eq!(files.closing_until(7, t0), Some(t0 + CLOSING_WAIT));
        // Long after a flush, a handle still open is held through another descriptor.
        assert_eq!(files.closing_until(7, t0 + CLOSING_WAIT), None);
        assert!(!files.release(a, 7));
        assert_eq!(files.closing_until(7, t0), Some(t0 + CLOSING_WAIT * 3 / 2));
        assert!(files.contains(7));
        assert!(files.release(b, 7));
        assert!(!files.contains(7) && files.release(other, 8) && files.is_empty());
        // A handle never given closes one open of its inode.
        files.open(9);
        assert!(files.release(99, 9));
        assert!(files.is_empty());
    }
}
