//! The simulated disk under a replica of the `fs-disk-…` families: its file service keeps
//! its state in a persistent [`RedbStore`](byzfs_fs::RedbStore) written through
//! [`DiskBackend`], as a `disk`-mode replica's does in `fs-state.redb`.
//!
//! The disk holds two images: what was written, and what was synced. A process crash keeps
//! the first (the operating system still holds every write); a power cut keeps only the
//! second, so the store must reopen at its last synced commit and the replica must roll it
//! back to the checkpoint its own log names (`RedbStore::reopen_at`). The node keeps the
//! disk across its crashes; an amnesia restart wipes it.
//!
//! A crashed process writes nothing more: each backend belongs to one life of the replica
//! ([`SimDisk::crash`]), and the writes and syncs of an earlier life are dropped. Without
//! this, dropping the crashed replica's store after its successor opened the disk let redb
//! close the old database, writing its header over the image the new one was using, so a
//! later power cut left a header whose layout the file did not reach (seeds 351, 362 and
//! 549 of `--scenario fs-all`).

use redb::StorageBackend;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Debug, Default)]
struct Image {
    written: Vec<u8>,
    synced: Vec<u8>,
    syncs: u64,
    /// The replica's current life: backends of an earlier one are dead.
    life: u64,
}

/// A replica's disk, shared between the node (which cuts its power) and the store's backend.
#[derive(Clone, Debug, Default)]
pub struct SimDisk(Arc<Mutex<Image>>);

impl SimDisk {
    fn image(&self) -> MutexGuard<'_, Image> {
        // Nothing panics while holding the lock; a poisoned one still holds a whole image.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A backend for a store opened on this disk, by the replica's current life.
    pub fn backend(&self) -> DiskBackend {
        DiskBackend {
            disk: self.clone(),
            life: self.image().life,
        }
    }

    /// The replica's process died: what it opened writes nothing more.
    pub fn crash(&self) {
        self.image().life += 1;
    }

    /// A power cut: every write since the last sync is lost.
    pub fn power_cut(&self) {
        let mut i = self.image();
        i.written = i.synced.clone();
        i.life += 1;
    }

    /// An empty disk (a replica restarted without its data, or with no checkpoint recorded
    /// yet, whose store starts fresh as `byzfs replica` starts it).
    pub fn wipe(&self) {
        let mut i = self.image();
        let life = i.life + 1;
        *i = Image {
            life,
            ..Image::default()
        };
    }

    /// Syncs so far (each persisted stable checkpoint is one).
    pub fn syncs(&self) -> u64 {
        self.image().syncs
    }
}

/// redb's view of a [`SimDisk`], in one life of the replica.
#[derive(Debug)]
pub struct DiskBackend {
    disk: SimDisk,
    life: u64,
}

impl DiskBackend {
    /// The image, if this backend's process is still alive; an error as a dead process's
    /// would be (never seen: nothing runs in it).
    fn live(&self) -> io::Result<MutexGuard<'_, Image>> {
        let i = self.disk.image();
        if i.life != self.life {
            return Err(io::Error::other(
                "the process that opened this store crashed",
            ));
        }
        Ok(i)
    }
}

impl StorageBackend for DiskBackend {
    fn len(&self) -> io::Result<u64> {
        Ok(self.live()?.written.len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let i = self.live()?;
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
        let end = start
            .checked_add(out.len())
            .filter(|&e| e <= i.written.len())
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        out.copy_from_slice(&i.written[start..end]);
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let len = usize::try_from(len).map_err(|_| io::ErrorKind::InvalidInput)?;
        self.live()?.written.resize(len, 0);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut i = self.live()?;
        i.synced = i.written.clone();
        i.syncs += 1;
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut i = self.live()?;
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
        let end = start
            .checked_add(data.len())
            .ok_or(io::ErrorKind::InvalidInput)?;
        if i.written.len() < end {
            i.written.resize(end, 0);
        }
        i.written[start..end].copy_from_slice(data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_power_cut_keeps_what_was_synced_and_a_crash_keeps_everything() {
        let d = SimDisk::default();
        let b = d.backend();
        b.write(0, b"abcd").unwrap();
        b.sync_data().unwrap();
        b.write(2, b"XYZ").unwrap();
        let mut out = [0u8; 5];
        b.read(0, &mut out).unwrap();
        assert_eq!(&out, b"abXYZ");
        d.power_cut();
        // The next life's store.
        let b = d.backend();
        assert_eq!(b.len().unwrap(), 4);
        let mut out = [0u8; 4];
        b.read(0, &mut out).unwrap();
        assert_eq!(&out, b"abcd");
        assert_eq!(
            b.read(2, &mut [0u8; 3]).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
        assert_eq!(d.syncs(), 1);
        let b = d.backend();
        d.wipe();
        assert_eq!(d.syncs(), 0);
        assert_eq!(d.backend().len().unwrap(), 0);
        // The backend of the life before the wipe writes nothing more.
        assert_eq!(
            b.write(0, b"late").unwrap_err().kind(),
            io::ErrorKind::Other
        );
    }

    /// A crashed replica's store, dropped after its successor opened the disk, must not
    /// write over what the successor uses (module documentation).
    #[test]
    fn a_crashed_life_writes_nothing_more() {
        let d = SimDisk::default();
        let old = d.backend();
        old.write(0, b"abcd").unwrap();
        d.crash();
        let new = d.backend();
        assert!(old.write(0, b"XY").is_err());
        assert!(old.set_len(1).is_err());
        assert!(old.sync_data().is_err());
        let mut out = [0u8; 4];
        new.read(0, &mut out).unwrap();
        assert_eq!((&out, d.syncs()), (b"abcd", 0));
    }
}
