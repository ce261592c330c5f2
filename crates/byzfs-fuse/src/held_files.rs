//! File delegations this mount holds (`byzfs_fs::file_delegation`): regular files no other
//! mount reads or changes until they are given back, so this mount answers their `open`
//! without asking the replicas (the kernel keeps their pages), and their `close` sends
//! nothing: their writes are written back with other files' (`gather.rs`, within
//! `gather::MAX_AGE`), at `fsync`, when the gather is full, and when the delegation is
//! given back.
//!
//! * **Asked for** at an `open` for writing of a regular file this mount did not make in a
//!   directory it holds (those are its own already: `mine.rs`), in place of the `open`'s
//!   look at the file's attributes; not again for [`CONTENDED_FOR`] after another mount had
//!   it or asked for it, and at most [`MAX_HELD`] at once.
//! * **Given back** when another mount asks (the recall poll, `delegations.rs`, or an
//!   operation of this mount that waits for another's: `calls.rs` `invoke`, `sender.rs`
//!   `run`), after [`IDLE`] unused, and at unmount: its held writes and its write-back in
//!   flight reach the replicas first (`recalls.rs` `give_back_file`).
//! * **A mount that dies** loses what it had not written back of these files, as a local
//!   file system loses what no `fsync` covered at a power cut; the delegations lapse with
//!   its lease (30 s), and the other mounts go on.
//!
//! This file holds the books only.

use byzfs_fs::FileHandle;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Most files held at once.
pub(crate) const MAX_HELD: usize = 1024;
/// How long a file another mount had or asked for is not asked for again.
pub(crate) const CONTENDED_FOR: Duration = Duration::from_secs(5);
/// Unused (no `open`, read, write or attribute answered from it) for this long: given back.
pub(crate) const IDLE: Duration = Duration::from_secs(120);

/// One held file.
struct Held {
    fh: FileHandle,
    used: Instant,
    /// The place of the reply that granted it (`lease.rs`).
    place: u64,
}

/// The file delegations this mount holds.
pub(crate) struct HeldFiles {
    /// Ask for file delegations at all (`MountOptions::file_delegations`; never on an
    /// encrypted mount).
    enabled: bool,
    held: HashMap<u64, Held>,
    /// Files another mount had or asked for, and when.
    contended: HashMap<u64, Instant>,
    /// Files given back lately (bounded by [`MAX_HELD`]).
    returned: HashMap<u64, FileHandle>,
    /// Granted and given back, for the log at unmount.
    pub(crate) granted: u64,
    pub(crate) given_back: u64,
    /// `open`s answered without a round trip.
    pub(crate) opens_answered: u64,
}

impl HeldFiles {
    pub(crate) fn new(enabled: bool) -> HeldFiles {
        HeldFiles {
            enabled,
            held: HashMap::new(),
            contended: HashMap::new(),
            returned: HashMap::new(),
            granted: 0,
            given_back: 0,
            opens_answered: 0,
        }
    }

    /// Whether this mount holds `ino`'s delegation.
    pub(crate) fn holds(&self, ino: u64) -> bool {
        self.held.contains_key(&ino)
    }

    /// Whether any is held (the recall poll and the lease renewal run while some are).
    pub(crate) fn any(&self) -> bool {
        !self.held.is_empty()
    }

    /// [`HeldFiles::holds`], and if so `ino` counts as used now.
    pub(crate) fn use_held(&mut self, ino: u64, now: Instant) -> bool {
        match self.held.get_mut(&ino) {
            Some(h) => {
                h.used = now;
                true
            }
            None => false,
        }
    }

    /// Whether to ask for `ino`'s delegation at an `open` for writing now.
    pub(crate) fn wanted(&mut self, ino: u64, now: Instant) -> bool {
        if !self.enabled || self.held.contains_key(&ino) || self.held.len() >= MAX_HELD {
            return false;
        }
        match self.contended.get(&ino) {
            Some(&t) if now.saturating_duration_since(t) < CONTENDED_FOR => false,
            Some(_) => {
                self.contended.remove(&ino);
                true
            }
            None => true,
        }
    }

    /// The replicas granted `fh`'s delegation, by the reply of place `place`.
    pub(crate) fn install(&mut self, fh: FileHandle, now: Instant, place: u64) {
        self.granted += 1;
        self.held.insert(
            fh.ino,
            Held {
                fh,
                used: now,
                place,
            },
        );
    }

    /// Another mount holds `ino`, or asked for it: not asked for again for
    /// [`CONTENDED_FOR`].
    pub(crate) fn contended(&mut self, ino: u64, now: Instant) {
        if self.contended.len() >= MAX_HELD {
            self.contended
                .retain(|_, t| now.saturating_duration_since(*t) < CONTENDED_FOR);
        }
        self.contended.insert(ino, now);
    }

    /// Stops holding `ino` (to give it back: another mount asked for it, `contended`, or
    /// not); its handle if it was held.
    pub(crate) fn take(&mut self, ino: u64, contended: bool, now: Instant) -> Option<FileHandle> {
        let h = self.held.remove(&ino)?;
        self.given_back += 1;
        if self.returned.len() >= MAX_HELD {
            self.returned.clear();
        }
        self.returned.insert(ino, h.fh);
        if contended {
            self.contended(ino, now);
        }
        Some(h.fh)
    }

    /// Up to `most` held files unused for [`IDLE`], taken.
    pub(crate) fn take_idle(&mut self, now: Instant, most: usize) -> Vec<FileHandle> {
        let idle: Vec<u64> = self
            .held
            .iter()
            .filter(|(_, h)| now.saturating_duration_since(h.used) >= IDLE)
            .map(|(&i, _)| i)
            .take(most)
            .collect();
        idle.into_iter()
            .filter_map(|i| self.take(i, false, now))
            .collect()
    }

    /// Every held file, taken (at unmount).
    pub(crate) fn take_all(&mut self) -> Vec<FileHandle> {
        let now = Instant::now();
        let all: Vec<u64> = self.held.keys().copied().collect();
        all.into_iter()
            .filter_map(|i| self.take(i, false, now))
            .collect()
    }

    /// The files held.
    #[cfg(test)]
    pub(crate) fn inos(&self) -> Vec<u64> {
        self.held.keys().copied().collect()
    }

    /// The replicas dropped this session's delegations granted before the lease's last
    /// lapse: those are no longer held (writes held for them go as any file's). Returns
    /// them.
    pub(crate) fn lease_lapsed(&mut self, lease: &crate::lease::Lease) -> Vec<u64> {
        let gone: Vec<u64> = self
            .held
            .iter()
            .filter(|(_, h)| lease.dropped(h.place))
            .map(|(&ino, _)| ino)
            .collect();
        for ino in &gone {
            self.held.remove(ino);
        }
        if !gone.is_empty() {
            tracing::warn!(
                files = gone.len(),
                "the cluster dropped this mount's file delegations: its lease lapsed"
            );
        }
        gone
    }

    /// The handle of `ino` if this mount gave it back lately: a recall of it means the
    /// replicas did not take the return (a soft mount's timeout), and it goes again.
    pub(crate) fn given_back_lately(&self, ino: u64) -> Option<FileHandle> {
        self.returned.get(&ino).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fh(ino: u64) -> FileHandle {
        FileHandle { ino, generation: 1 }
    }

    #[test]
    fn a_contended_file_is_not_asked_for_again_for_a_while() {
        let t = Instant::now();
        let mut h = HeldFiles::new(true);
        assert!(h.wanted(5, t));
        h.install(fh(5), t, 1);
        assert!(!h.wanted(5, t), "held already");
        assert!(h.use_held(5, t + Duration::from_secs(1)));
        assert_eq!(h.take(5, true, t), Some(fh(5)));
        assert!(!h.holds(5));
        assert!(!h.wanted(5, t + CONTENDED_FOR / 2));
        assert!(h.wanted(5, t + CONTENDED_FOR));
        assert_eq!((h.granted, h.given_back), (1, 1));
        assert_eq!(h.given_back_lately(5), Some(fh(5)));
        assert_eq!(h.given_back_lately(6), None);
        assert!(!HeldFiles::new(false).wanted(5, t), "disabled");
    }

    #[test]
    fn idle_files_are_taken_and_used_ones_kept() {
        let t = Instant::now();
        let mut h = HeldFiles::new(true);
        h.install(fh(1), t, 1);
        h.install(fh(2), t, 1);
        h.use_held(2, t + IDLE / 2);
        assert_eq!(h.take_idle(t + IDLE, 8), vec![fh(1)]);
        assert!(h.holds(2));
        assert_eq!(h.take_idle(t + IDLE, 8), Vec::<FileHandle>::new());
        let mut all = h.take_all();
        all.sort_by_key(|f| f.ino);
        assert_eq!(all, vec![fh(2)]);
        assert!(!h.any());
    }

    #[test]
    fn at_most_max_held_at_once_and_none_after_a_lapse() {
        let t = Instant::now();
        let mut h = HeldFiles::new(true);
        for i in 0..MAX_HELD as u64 {
            h.install(fh(i + 10), t, i);
        }
        assert!(!h.wanted(1, t));
        let mut lease = crate::lease::Lease::default();
        lease.answered(MAX_HELD as u64 - 1, true, t);
        let mut gone = h.lease_lapsed(&lease);
        gone.sort_unstable();
        assert_eq!(gone, (10..MAX_HELD as u64 + 9).collect::<Vec<_>>());
        assert_eq!(
            h.inos(),
            vec![MAX_HELD as u64 + 9],
            "granted at the lapse's place"
        );
        assert!(h.wanted(1, t));
    }
}
