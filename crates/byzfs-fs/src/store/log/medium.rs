//! What a [`LogStore`](super::LogStore) writes its segments to: [`DirMedium`], files in a
//! directory, or the simulator's disk (`byzfs-sim`, which loses unsynced writes at a power
//! cut).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Numbered segment files: written at offsets, read at offsets, synced, removed.
///
/// A segment written and synced is durable with its name (the medium syncs its directory
/// when it must). A write not yet synced may be lost, in part or whole, by a power cut.
pub trait Medium {
    /// The segments present, increasing.
    fn segments(&self) -> io::Result<Vec<u64>>;
    /// Length of segment `seg` (0 if absent).
    fn len(&self, seg: u64) -> io::Result<u64>;
    /// Fills `buf` from segment `seg` at `off`; an error if it does not reach that far.
    fn read_at(&self, seg: u64, off: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Writes `data` to segment `seg` at `off`, creating the segment if absent.
    fn write_at(&mut self, seg: u64, off: u64, data: &[u8]) -> io::Result<()>;
    /// Cuts segment `seg` to `len` bytes.
    fn truncate(&mut self, seg: u64, len: u64) -> io::Result<()>;
    /// Work to run on any thread (the replica's disk worker, away from its event loop):
    /// makes every write made so far to the segments `sync` durable, with their names, then
    /// removes the segments `remove`, durably. The store stops naming `remove` at once; the
    /// medium may keep handles on them until [`Medium::forget`].
    fn work(&mut self, sync: &[u64], remove: &[u64]) -> io::Result<MediumWork>;
    /// A work that removed `seg` has run: drops what this handle holds of it.
    fn forget(&mut self, seg: u64);
    /// Removes segment `seg`, durably.
    fn remove(&mut self, seg: u64) -> io::Result<()>;
}

/// A medium's [`Medium::work`], to run once on any thread.
pub type MediumWork = Box<dyn FnOnce() -> io::Result<()> + Send>;

/// Segments as files `seg-<number, 16 hex digits>.log` in a directory.
#[derive(Debug)]
pub struct DirMedium {
    dir: PathBuf,
    files: BTreeMap<u64, File>,
    /// A segment was created or removed since the directory was last synced.
    dir_dirty: bool,
    /// Never sync: the store is scratch space rebuilt at every start (`memory` mode).
    scratch: bool,
}

const PREFIX: &str = "seg-";
const SUFFIX: &str = ".log";

impl DirMedium {
    /// The segments in `dir` (created if absent). A scratch medium never syncs.
    pub fn open(dir: impl AsRef<Path>, scratch: bool) -> io::Result<DirMedium> {
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir)?;
        let mut files = BTreeMap::new();
        for e in std::fs::read_dir(&dir)? {
            let e = e?;
            let name = e.file_name();
            let Some(n) = name
                .to_str()
                .and_then(|s| s.strip_prefix(PREFIX))
                .and_then(|s| s.strip_suffix(SUFFIX))
                .and_then(|s| u64::from_str_radix(s, 16).ok())
            else {
                continue;
            };
            let f = OpenOptions::new().read(true).write(true).open(e.path())?;
            files.insert(n, f);
        }
        Ok(DirMedium {
            dir,
            files,
            dir_dirty: false,
            scratch,
        })
    }

    fn path(&self, seg: u64) -> PathBuf {
        self.dir.join(format!("{PREFIX}{seg:016x}{SUFFIX}"))
    }

    fn file(&self, seg: u64) -> io::Result<&File> {
        self.files.get(&seg).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("segment {} is missing", self.path(seg).display()),
            )
        })
    }
}

impl Medium for DirMedium {
    fn segments(&self) -> io::Result<Vec<u64>> {
        Ok(self.files.keys().copied().collect())
    }

    fn len(&self, seg: u64) -> io::Result<u64> {
        match self.files.get(&seg) {
            Some(f) => Ok(f.metadata()?.len()),
            None => Ok(0),
        }
    }

    fn read_at(&self, seg: u64, off: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file(seg)?.read_exact_at(buf, off)
    }

    fn write_at(&mut self, seg: u64, off: u64, data: &[u8]) -> io::Result<()> {
        if !self.files.contains_key(&seg) {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(self.path(seg))?;
            self.files.insert(seg, f);
            self.dir_dirty = true;
        }
        self.file(seg)?.write_all_at(data, off)
    }

    fn truncate(&mut self, seg: u64, len: u64) -> io::Result<()> {
        self.file(seg)?.set_len(len)
    }

    fn work(&mut self, sync: &[u64], remove: &[u64]) -> io::Result<MediumWork> {
        if self.scratch {
            // Nothing is synced; removed segments still give their space back.
            let paths: Vec<PathBuf> = remove.iter().map(|&s| self.path(s)).collect();
            return Ok(Box::new(move || remove_files(&paths)));
        }
        // Handles of their own, so that the event loop goes on appending through its own.
        let files = sync
            .iter()
            .filter_map(|s| self.files.get(s))
            .map(File::try_clone)
            .collect::<io::Result<Vec<File>>>()?;
        // A segment created since the last work needs its name synced with its bytes.
        let dir_sync = std::mem::take(&mut self.dir_dirty) || !remove.is_empty();
        let paths: Vec<PathBuf> = remove.iter().map(|&s| self.path(s)).collect();
        let dir = self.dir.clone();
        Ok(Box::new(move || {
            for f in &files {
                f.sync_data()?;
            }
            remove_files(&paths)?;
            if dir_sync {
                // A removal a power cut undid would bring old frames back into the replay.
                File::open(&dir)?.sync_all()?;
            }
            Ok(())
        }))
    }

    fn forget(&mut self, seg: u64) {
        self.files.remove(&seg);
    }

    fn remove(&mut self, seg: u64) -> io::Result<()> {
        if self.files.remove(&seg).is_some() {
            std::fs::remove_file(self.path(seg))?;
            if !self.scratch {
                // A removal a power cut undid would bring old frames back into the replay.
                File::open(&self.dir)?.sync_all()?;
            }
        }
        Ok(())
    }
}

/// Removes the files at `paths`; one already gone is not an error (a store that crashed
/// between a removal and the next start removes it again at replay).
fn remove_files(paths: &[PathBuf]) -> io::Result<()> {
    for p in paths {
        match std::fs::remove_file(p) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}
