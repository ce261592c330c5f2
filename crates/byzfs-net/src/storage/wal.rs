//! The write-ahead log of `disk` durability: the promises (`Prepared`, `Committed`,
//! `Executed`) and batch bodies of each group commit, appended as one frame and made durable
//! with one `fdatasync`.
//!
//! Why a log and not the redb database the checkpoints live in: a group commit is a handful of
//! small records on every request's critical path, up to three times per request. A redb write
//! transaction rewrites B-tree pages of several tables, its allocator state and its header
//! (copy-on-write) before its fsync; appending one frame writes one page. Profiled at 1 client
//! (`bench micro --durability disk`), redb's commit path was about a quarter of a replica's CPU.
//!
//! Layout: segment files `wal-<index>.log` in the data directory, oldest first. A new segment
//! starts at every open and after every stored checkpoint; a segment is deleted once every
//! entry in it is at or below the stored stable checkpoint (it is never needed again).
//! Frame: payload length (u32 LE) ‖ the first 8 bytes of the payload's BLAKE3 digest ‖
//! payload (postcard). A frame cut short by a crash (it was never acknowledged: its fsync did
//! not return) is cut off the last segment at open; damage anywhere else is corruption.

use super::DiskCounters;
use byzfs_bft::message::BatchBody;
use byzfs_bft::replica::record_seq;
use byzfs_bft::{Digest, PersistRecord, Seq};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

const HEADER: usize = 12;
/// Largest frame accepted when reading (a bigger length is damage, not data).
const FRAME_MAX: usize = 1 << 30;

/// A batch body to append (borrowed from the core's `StoreRecord::Batch`).
#[derive(Serialize)]
pub(super) struct BatchRef<'a> {
    pub seq: Seq,
    pub digest: Digest,
    pub body: &'a BatchBody,
    pub big: Vec<&'a [u8]>,
}

#[derive(Serialize)]
struct FrameRef<'a> {
    records: &'a [PersistRecord],
    batches: &'a [BatchRef<'a>],
}

/// A batch body read back.
#[derive(Deserialize)]
pub(super) struct BatchEntry {
    pub seq: Seq,
    pub digest: Digest,
    pub body: BatchBody,
    pub big: Vec<Vec<u8>>,
}

/// One group commit read back.
#[derive(Deserialize)]
pub(super) struct Frame {
    pub records: Vec<PersistRecord>,
    pub batches: Vec<BatchEntry>,
}

/// The open log: the segment being appended to is the last one.
pub(super) struct Wal {
    dir: PathBuf,
    /// Every segment, oldest first: (index, highest sequence number of an entry in it).
    segments: Vec<(u64, Seq)>,
    file: File,
    /// Frames appended to `file` without an `fdatasync` since its last one
    /// ([`Wal::append_unsynced`]).
    unsynced: bool,
    /// What was written (its `db_commits` stay 0: the database is not the log's).
    counters: DiskCounters,
}

fn segment_path(dir: &Path, index: u64) -> PathBuf {
    dir.join(format!("wal-{index:016}.log"))
}

fn segment_index(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("wal-")?.strip_suffix(".log")?;
    (digits.len() == 16).then(|| digits.parse().ok())?
}

/// Makes a new or removed directory entry durable.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

fn frame_seq(f: &Frame) -> Seq {
    let records = f.records.iter().filter_map(|r| record_seq(*r));
    records
        .chain(f.batches.iter().map(|b| b.seq))
        .max()
        .unwrap_or(0)
}

/// Splits `bytes` into frames; returns them and the length of the intact prefix.
fn parse(bytes: &[u8]) -> Result<(Vec<Frame>, usize), String> {
    let mut frames = Vec::new();
    let mut at = 0;
    while bytes.len() - at >= HEADER {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or_default()) as usize;
        let end = at + HEADER + len;
        if len > FRAME_MAX || end > bytes.len() {
            break;
        }
        let payload = &bytes[at + HEADER..end];
        if Digest::of(payload).0[..8] != bytes[at + 4..at + HEADER] {
            break;
        }
        let frame = postcard::from_bytes(payload).map_err(|e| format!("bad log frame: {e}"))?;
        frames.push(frame);
        at = end;
    }
    Ok((frames, at))
}

impl Wal {
    /// Opens the log in `dir`: reads every segment (cutting a torn frame off the last one),
    /// then starts a new segment. Returns the frames, oldest first.
    pub(super) fn open(dir: &Path) -> Result<(Wal, Vec<Frame>), String> {
        let mut indexes: Vec<u64> = std::fs::read_dir(dir)
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok()?.file_name().to_str().and_then(segment_index))
            .collect();
        indexes.sort_unstable();
        let mut segments = Vec::with_capacity(indexes.len() + 1);
        let mut frames = Vec::new();
        for (i, &index) in indexes.iter().enumerate() {
            let path = segment_path(dir, index);
            let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let (mut read, intact) = parse(&bytes)?;
            if intact < bytes.len() {
                if i + 1 < indexes.len() {
                    return Err(format!("{} is damaged at byte {intact}", path.display()));
                }
                // The last frame of the last segment was being written when the process
                // stopped: its fsync never returned, so nothing was acknowledged on it.
                let f = OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(|e| e.to_string())?;
                f.set_len(intact as u64).map_err(|e| e.to_string())?;
                f.sync_all().map_err(|e| e.to_string())?;
            }
            segments.push((index, read.iter().map(frame_seq).max().unwrap_or(0)));
            frames.append(&mut read);
        }
        let next = indexes.last().map_or(0, |i| i + 1);
        let file = Self::create(dir, next).map_err(|e| e.to_string())?;
        segments.push((next, 0));
        let wal = Wal {
            dir: dir.to_path_buf(),
            segments,
            file,
            unsynced: false,
            counters: DiskCounters::default(),
        };
        Ok((wal, frames))
    }

    fn create(dir: &Path, index: u64) -> std::io::Result<File> {
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(segment_path(dir, index))?;
        sync_dir(dir)?;
        Ok(file)
    }

    /// Appends one frame and waits until it (and every frame before it) is durable.
    pub(super) fn append(
        &mut self,
        records: &[PersistRecord],
        batches: &[BatchRef<'_>],
    ) -> std::io::Result<()> {
        self.write_frame(records, batches)?;
        self.sync_file()?;
        self.unsynced = false;
        Ok(())
    }

    /// Appends one frame without waiting for the disk: it becomes durable with the next
    /// [`Wal::append`] (or before the segment is left). For records that may wait
    /// (`Executed`, the primary's `Proposed` and the bodies it proposed: see the module docs
    /// of `storage`). A crash can tear only this segment's tail, which [`Wal::open`] cuts
    /// off.
    pub(super) fn append_unsynced(
        &mut self,
        records: &[PersistRecord],
        batches: &[BatchRef<'_>],
    ) -> std::io::Result<()> {
        self.write_frame(records, batches)?;
        self.unsynced = true;
        Ok(())
    }

    /// Waits until every frame appended so far is durable (a no-op if none is pending).
    pub(super) fn sync(&mut self) -> std::io::Result<()> {
        if self.unsynced {
            self.sync_file()?;
            self.unsynced = false;
        }
        Ok(())
    }

    fn sync_file(&mut self) -> std::io::Result<()> {
        self.file.sync_data()?;
        self.counters.log_syncs += 1;
        Ok(())
    }

    fn write_frame(
        &mut self,
        records: &[PersistRecord],
        batches: &[BatchRef<'_>],
    ) -> std::io::Result<()> {
        let payload =
            postcard::to_allocvec(&FrameRef { records, batches }).map_err(std::io::Error::other)?;
        let len = u32::try_from(payload.len())
            .ok()
            .filter(|&l| l as usize <= FRAME_MAX)
            .ok_or_else(|| std::io::Error::other("log frame over 1 GiB"))?;
        let mut frame = Vec::with_capacity(HEADER + payload.len());
        frame.extend_from_slice(&len.to_le_bytes());
        frame.extend_from_slice(&Digest::of(&payload).0[..8]);
        frame.extend_from_slice(&payload);
        self.file.write_all(&frame)?;
        self.counters.log_bytes += frame.len() as u64;
        self.counters.log_frames += 1;
        let seq = records
            .iter()
            .filter_map(|r| record_seq(*r))
            .chain(batches.iter().map(|b| b.seq))
            .max()
            .unwrap_or(0);
        if let Some(last) = self.segments.last_mut() {
            last.1 = last.1.max(seq);
        }
        Ok(())
    }

    /// After checkpoint `stable` is stored: starts a new segment and deletes every segment
    /// whose entries are all at or below `stable`.
    pub(super) fn prune(&mut self, stable: Seq) -> std::io::Result<()> {
        if self.unsynced {
            // Only the last segment may end in a torn frame (`open` cuts it off there).
            self.sync_file()?;
            self.unsynced = false;
        }
        let next = self.segments.last().map_or(0, |s| s.0 + 1);
        self.file = Self::create(&self.dir, next)?;
        self.segments.push((next, 0));
        let last = self.segments.len() - 1;
        let mut kept = Vec::with_capacity(self.segments.len());
        for (i, &(index, max)) in self.segments.iter().enumerate() {
            if i < last && max <= stable {
                // A deletion lost in a crash only leaves entries that load skips.
                std::fs::remove_file(segment_path(&self.dir, index))?;
            } else {
                kept.push((index, max));
            }
        }
        self.segments = kept;
        Ok(())
    }

    /// Whether frames were appended since the last `fdatasync` (for tests).
    #[cfg(test)]
    pub(super) fn pending(&self) -> bool {
        self.unsynced
    }

    /// What was written since the log was opened.
    pub(super) fn counters(&self) -> DiskCounters {
        self.counters
    }

    /// Number of segment files (for tests and status).
    pub(super) fn segments(&self) -> usize {
        self.segments.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(seq: Seq) -> PersistRecord {
        PersistRecord::Executed {
            seq,
            digest: Digest([seq as u8; 32]),
        }
    }

    #[test]
    fn unsynced_frames_are_read_back_and_synced_before_the_segment_is_left() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut wal, _) = Wal::open(dir.path()).unwrap();
            wal.append(&[rec(1)], &[]).unwrap();
            wal.append_unsynced(&[rec(2)], &[]).unwrap();
            assert!(wal.unsynced);
            wal.prune(0).unwrap();
            assert!(!wal.unsynced, "synced before a new segment starts");
            wal.append_unsynced(&[rec(3)], &[]).unwrap();
            wal.append(&[rec(4)], &[]).unwrap();
            assert!(!wal.unsynced, "a synced frame covers the ones before it");
        }
        let (_, frames) = Wal::open(dir.path()).unwrap();
        let seqs: Vec<Seq> = frames
            .iter()
            .flat_map(|f| f.records.iter().filter_map(|r| record_seq(*r)))
            .collect();
        assert_eq!(seqs, [1, 2, 3, 4]);
    }

    #[test]
    fn a_torn_tail_is_cut_and_earlier_frames_survive() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut wal, frames) = Wal::open(dir.path()).unwrap();
            assert!(frames.is_empty());
            wal.append(&[rec(1)], &[]).unwrap();
            wal.append(&[rec(2), rec(3)], &[]).unwrap();
        }
        // A crash in the middle of the next frame: half of it on disk.
        let other = tempfile::tempdir().unwrap();
        Wal::open(other.path())
            .unwrap()
            .0
            .append(&[rec(9)], &[])
            .unwrap();
        let next = std::fs::read(segment_path(other.path(), 0)).unwrap();
        let path = segment_path(dir.path(), 0);
        let mut bytes = std::fs::read(&path).unwrap();
        let whole = bytes.len();
        bytes.extend_from_slice(&next[..next.len() / 2]);
        std::fs::write(&path, &bytes).unwrap();
        let (mut wal, frames) = Wal::open(dir.path()).unwrap();
        let recs: Vec<_> = frames.iter().flat_map(|f| f.records.clone()).collect();
        assert_eq!(recs, vec![rec(1), rec(2), rec(3)]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), whole as u64);
        wal.append(&[rec(4)], &[]).unwrap();
        drop(wal);
        let (_, frames) = Wal::open(dir.path()).unwrap();
        assert_eq!(frames.len(), 3);
    }

    #[test]
    fn damage_before_the_last_segment_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut wal, _) = Wal::open(dir.path()).unwrap();
            wal.append(&[rec(1)], &[]).unwrap();
            wal.append(&[rec(2)], &[]).unwrap();
        }
        {
            let (mut wal, _) = Wal::open(dir.path()).unwrap();
            wal.append(&[rec(3)], &[]).unwrap();
        }
        let path = segment_path(dir.path(), 0);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let e = Wal::open(dir.path()).err().unwrap();
        assert!(e.contains("damaged"), "{e}");
    }

    #[test]
    fn prune_deletes_segments_covered_by_the_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path()).unwrap();
        wal.append(&[rec(1), rec(5)], &[]).unwrap();
        wal.prune(2).unwrap(); // Segment 0 holds 5 > 2: kept.
        assert_eq!(wal.segments(), 2);
        wal.append(&[rec(6)], &[]).unwrap();
        wal.prune(5).unwrap(); // Segment 0 goes; segment 1 holds 6.
        assert_eq!(wal.segments(), 2);
        wal.prune(6).unwrap();
        assert_eq!(wal.segments(), 1);
        drop(wal);
        let (_, frames) = Wal::open(dir.path()).unwrap();
        assert!(frames.is_empty());
    }
}
