//! [`MemMedium`]: segments in memory that a power cut can take back to their last sync, for
//! tests and the simulator's disk.

use super::{Medium, MediumWork};
use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Debug, Default, Clone)]
struct Segment {
    written: Vec<u8>,
    /// What a power cut leaves; `None`: never synced, so a power cut removes it.
    synced: Option<Vec<u8>>,
}

#[derive(Debug, Default)]
struct Disk {
    segs: BTreeMap<u64, Segment>,
    syncs: u64,
    /// The owner's current life: media of an earlier one are dead (a crashed process
    /// writes nothing more).
    life: u64,
}

/// Segments in memory, shared by every handle: the owner keeps one to cut the power while
/// a store writes through another.
#[derive(Clone, Debug, Default)]
pub struct MemMedium {
    disk: Arc<Mutex<Disk>>,
    life: u64,
}

impl MemMedium {
    /// An empty medium.
    pub fn new() -> MemMedium {
        MemMedium::default()
    }

    fn disk(&self) -> MutexGuard<'_, Disk> {
        // Nothing panics while holding the lock; a poisoned one still holds whole segments.
        self.disk.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A handle for a store opened by the owner's current life.
    pub fn handle(&self) -> MemMedium {
        MemMedium {
            disk: self.disk.clone(),
            life: self.disk().life,
        }
    }

    /// An independent copy of the segments as they are now (written and synced), as a
    /// new owner's disk.
    pub fn copy(&self) -> MemMedium {
        let d = self.disk();
        MemMedium {
            disk: Arc::new(Mutex::new(Disk {
                segs: d.segs.clone(),
                syncs: 0,
                life: 0,
            })),
            life: 0,
        }
    }

    /// The owner's process died: what it opened writes nothing more.
    pub fn crash(&self) {
        self.disk().life += 1;
    }

    /// A power cut: every segment returns to its last sync; one never synced is gone.
    pub fn power_cut(&self) {
        let mut d = self.disk();
        d.segs = std::mem::take(&mut d.segs)
            .into_iter()
            .filter_map(|(n, s)| {
                s.synced.map(|b| {
                    (
                        n,
                        Segment {
                            written: b.clone(),
                            synced: Some(b),
                        },
                    )
                })
            })
            .collect();
        d.life += 1;
    }

    /// Forgets everything (a replica restarted without its data).
    pub fn wipe(&self) {
        let mut d = self.disk();
        d.segs.clear();
        d.life += 1;
    }

    /// Syncs so far.
    pub fn syncs(&self) -> u64 {
        self.disk().syncs
    }

    /// Bytes held, written or not synced.
    pub fn bytes(&self) -> u64 {
        self.disk()
            .segs
            .values()
            .map(|s| s.written.len() as u64)
            .sum()
    }

    fn alive(&self, d: &Disk) -> io::Result<()> {
        if d.life == self.life {
            Ok(())
        } else {
            Err(io::Error::other("the process that opened this store died"))
        }
    }
}

impl Medium for MemMedium {
    fn segments(&self) -> io::Result<Vec<u64>> {
        Ok(self.disk().segs.keys().copied().collect())
    }

    fn len(&self, seg: u64) -> io::Result<u64> {
        Ok(self
            .disk()
            .segs
            .get(&seg)
            .map_or(0, |s| s.written.len() as u64))
    }

    fn read_at(&self, seg: u64, off: u64, buf: &mut [u8]) -> io::Result<()> {
        let d = self.disk();
        let s = d
            .segs
            .get(&seg)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such segment"))?;
        let start = usize::try_from(off).map_err(io::Error::other)?;
        let src = start
            .checked_add(buf.len())
            .and_then(|end| s.written.get(start..end))
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "past the end"))?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn write_at(&mut self, seg: u64, off: u64, data: &[u8]) -> io::Result<()> {
        let mut d = self.disk();
        self.alive(&d)?;
        let s = d.segs.entry(seg).or_default();
        let start = usize::try_from(off).map_err(io::Error::other)?;
        let end = start + data.len();
        if s.written.len() < end {
            s.written.resize(end, 0);
        }
        s.written[start..end].copy_from_slice(data);
        Ok(())
    }

    fn truncate(&mut self, seg: u64, len: u64) -> io::Result<()> {
        let mut d = self.disk();
        self.alive(&d)?;
        if let Some(s) = d.segs.get_mut(&seg) {
            s.written
                .truncate(usize::try_from(len).map_err(io::Error::other)?);
        }
        Ok(())
    }

    /// The work makes durable what was written when it was made (no more, as `fdatasync`
    /// promises no more), and fails if its process died meanwhile.
    fn work(&mut self, sync: &[u64], remove: &[u64]) -> io::Result<MediumWork> {
        let lens: Vec<(u64, usize)> = {
            let d = self.disk();
            self.alive(&d)?;
            sync.iter()
                .filter_map(|s| d.segs.get(s).map(|g| (*s, g.written.len())))
                .collect()
        };
        let remove = remove.to_vec();
        let handle = self.clone();
        Ok(Box::new(move || {
            let mut d = handle.disk();
            handle.alive(&d)?;
            for (seg, len) in lens {
                d.syncs += 1;
                if let Some(s) = d.segs.get_mut(&seg) {
                    let len = len.min(s.written.len());
                    if s.synced.as_ref().is_none_or(|b| b.len() <= len) {
                        s.synced = Some(s.written[..len].to_vec());
                    }
                }
            }
            for seg in remove {
                d.segs.remove(&seg);
            }
            Ok(())
        }))
    }

    fn forget(&mut self, _seg: u64) {}

    fn remove(&mut self, seg: u64) -> io::Result<()> {
        let mut d = self.disk();
        self.alive(&d)?;
        d.segs.remove(&seg);
        Ok(())
    }
}
