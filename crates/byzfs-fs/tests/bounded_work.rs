//! Every operation's work is bounded by a constant, whatever the size of the files and
//! directories it touches (ARCHITECTURE.md "Bounded work"): each replica executes every
//! operation with every other request waiting, and the checkpoint after it and a rollback
//! cost what it changed. The store below counts what each operation reads and writes; the
//! test runs every operation of the service on large inputs and checks the counts against
//! the bounds, so an operation whose work grows with its input fails here.

use byzfs_bft::{Digest, Seq, Service};
use byzfs_fs::data::BLOCK_SIZE;
use byzfs_fs::proto::batch::MAX_BATCH;
use byzfs_fs::proto::lock::{LockKind, LockReq};
use byzfs_fs::proto::op::{Extent, XattrSet, MAX_IO, MAX_READDIR_ENTRIES};
use byzfs_fs::reclaim::STEP_BLOCKS;
use byzfs_fs::store::{Entries, MemStore, Store, StoreError, WriteSet};
use byzfs_fs::{
    decode_result, Credentials, FileHandle, FileService, FsConfig, FsResult, Op, Reply, Request,
    SetAttr, SpecialKind,
};
use std::cell::Cell;

/// A [`MemStore`] that counts records read and written.
struct Counting {
    inner: MemStore,
    read: Cell<u64>,
    read_bytes: Cell<u64>,
    written: u64,
    written_bytes: u64,
}

impl Counting {
    fn reset(&mut self) {
        self.read.set(0);
        self.read_bytes.set(0);
        self.written = 0;
        self.written_bytes = 0;
    }
}

impl Store for Counting {
    fn partition_count(&self) -> u32 {
        self.inner.partition_count()
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let v = self.inner.get(key)?;
        self.read.set(self.read.get() + 1);
        let n = v.as_ref().map_or(0, Vec::len) as u64;
        self.read_bytes.set(self.read_bytes.get() + n);
        Ok(v)
    }
    fn range(&self, start: &[u8], end: &[u8], limit: usize) -> Result<Entries, StoreError> {
        let v = self.inner.range(start, end, limit)?;
        // A scan costs at least one look-up even if it finds nothing.
        self.read.set(self.read.get() + 1 + v.len() as u64);
        let n: usize = v.iter().map(|(k, v)| k.len() + v.len()).sum();
        self.read_bytes.set(self.read_bytes.get() + n as u64);
        Ok(v)
    }
    fn apply(&mut self, writes: WriteSet) -> Result<(), StoreError> {
        self.written += writes.len() as u64;
        self.written_bytes += writes
            .iter()
            .map(|(k, v)| (k.len() + v.as_ref().map_or(0, Vec::len)) as u64)
            .sum::<u64>();
        self.inner.apply(writes)
    }
    fn current_digests(&self) -> Vec<Digest> {
        self.inner.current_digests()
    }
    fn checkpoint(&mut self, seq: Seq) -> Vec<Digest> {
        self.inner.checkpoint(seq)
    }
    fn checkpoint_digests(&self, seq: Seq) -> Option<Vec<Digest>> {
        self.inner.checkpoint_digests(seq)
    }
    fn latest_checkpoint(&self) -> Option<Seq> {
        self.inner.latest_checkpoint()
    }
    fn discard_checkpoints_below(&mut self, seq: Seq) {
        self.inner.discard_checkpoints_below(seq)
    }
    fn rollback(&mut self) -> Option<Seq> {
        self.inner.rollback()
    }
    fn export_partition(&self, seq: Seq, part: u32) -> Option<Vec<u8>> {
        self.inner.export_partition(seq, part)
    }
    fn import_partition(&mut self, part: u32, data: &[u8], expected: Digest) -> bool {
        self.inner.import_partition(part, data, expected)
    }
    fn finish_import(&mut self, seq: Seq) -> Vec<Digest> {
        self.inner.finish_import(seq)
    }
}

struct Bench {
    s: FileService<Counting>,
    clock: u64,
}

/// What one operation cost.
#[derive(Debug, Clone, Copy)]
struct Work {
    read: u64,
    read_bytes: u64,
    written: u64,
    written_bytes: u64,
}

impl Bench {
    fn run(&mut self, op: Op) -> FsResult {
        let bytes = Request::new(Credentials::root(), op).encode();
        let out = if self.s.is_read_only(&bytes) {
            self.s.execute_read_only(3, &bytes)
        } else {
            self.clock += 1_000_000;
            self.s.execute(3, &bytes, &self.clock.to_le_bytes())
        };
        decode_result(&out).expect("result decodes")
    }

    fn measure(&mut self, op: Op) -> (FsResult, Work) {
        self.s.store_mut().reset();
        let r = self.run(op);
        let st = self.s.store();
        let w = Work {
            read: st.read.get(),
            read_bytes: st.read_bytes.get(),
            written: st.written,
            written_bytes: st.written_bytes,
        };
        (r, w)
    }

    fn entry(&mut self, op: Op) -> FileHandle {
        match self.run(op) {
            Ok(r) => r.entry().expect("an entry").fh,
            Err(e) => panic!("{e:?}"),
        }
    }

    fn file(&mut self, dir: FileHandle, name: &str) -> FileHandle {
        self.entry(Op::Create {
            dir,
            name: name.as_bytes().to_vec(),
            mode: 0o644,
            exclusive: true,
        })
    }

    /// Fills `fh` with `bytes` bytes, a MiB at a time.
    fn fill(&mut self, fh: FileHandle, bytes: u64) {
        let mut off = 0;
        while off < bytes {
            let n = u64::from(MAX_IO).min(bytes - off);
            self.run(Op::Write {
                fh,
                offset: off,
                data: vec![0xa5; n as usize],
            })
            .unwrap();
            off += n;
        }
    }
}

/// The largest inputs: files of this many MiB, directories of this many entries.
const FILE_MIB: u64 = 48;
const DIR_ENTRIES: u32 = 3_000;

fn names(n: &str) -> Vec<u8> {
    n.as_bytes().to_vec()
}

fn lock(fh: FileHandle, owner: u64, kind: Option<LockKind>) -> LockReq {
    LockReq {
        fh,
        owner,
        kind,
        start: 0,
        end: 10,
        pid: 1,
    }
}

/// Every operation, on the largest input there is for it. The match is exhaustive: a new
/// operation does not compile until it is listed here.
fn the_operations(b: &mut Bench) -> Vec<(&'static str, Op)> {
    let root = FileHandle::ROOT;
    let mut ops: Vec<(&'static str, Op)> = Vec::new();
    let big_dir = b.entry(Op::Mkdir {
        dir: root,
        name: names("big-dir"),
        mode: 0o755,
    });
    for n in 0..DIR_ENTRIES {
        b.file(big_dir, &format!("f{n:05}"));
    }
    let mut big = Vec::new();
    for n in 0..8 {
        let f = b.file(root, &format!("big{n}"));
        b.fill(f, FILE_MIB << 20);
        big.push(f);
    }
    let attrs = b.file(root, "attrs");
    // The most attributes a file may hold: 1 MiB of names and values.
    for n in 0.. {
        let r = b.run(Op::SetXattr {
            fh: attrs,
            name: format!("user.{n:04}").into_bytes(),
            value: vec![1; 60_000],
            how: XattrSet::Any,
        });
        if r.is_err() {
            break;
        }
    }
    let empty_dir = b.entry(Op::Mkdir {
        dir: big_dir,
        name: names("empty"),
        mode: 0o755,
    });
    // The directory the group operations join to a group.
    let joins = b.entry(Op::Mkdir {
        dir: root,
        name: names("joins"),
        mode: 0o755,
    });
    let link = b.entry(Op::Symlink {
        dir: root,
        name: names("link"),
        target: names("big0"),
    });
    let small = b.file(root, "small");
    let one_mib = vec![7u8; MAX_IO as usize];
    for op in all_kinds(
        root, big_dir, empty_dir, joins, &big, attrs, link, small, &one_mib,
    ) {
        let name = op.name();
        ops.push((name, op));
    }
    // Last, the most work a batch may hold: two removals of large files (sharing one
    // operation's budget of blocks to delete), 1 MiB written, and creations in the
    // 3,000-entry directory, one at a reserved handle, up to `MAX_BATCH` members.
    let first = match b.run(Op::ReserveInodes { count: 1 }) {
        Ok(Reply::Reserved { first, .. }) => first,
        other => panic!("reserve: {other:?}"),
    };
    let mut members = vec![
        Op::Remove {
            dir: root,
            name: names("big6"),
        },
        Op::Remove {
            dir: root,
            name: names("big7"),
        },
        Op::Write {
            fh: small,
            offset: 0,
            data: one_mib.clone(),
        },
        Op::MakeAt {
            time: None,
            at: first,
            make: Box::new(Op::Mkdir {
                dir: big_dir,
                name: names("reserved"),
                mode: 0o755,
            }),
        },
    ];
    while members.len() < MAX_BATCH {
        members.push(Op::Create {
            dir: big_dir,
            name: format!("g{:05}", members.len()).into_bytes(),
            mode: 0o644,
            exclusive: true,
        });
    }
    ops.push(("batch", Op::Batch(members)));
    ops
}

#[allow(clippy::too_many_arguments)]
fn all_kinds(
    root: FileHandle,
    big_dir: FileHandle,
    empty_dir: FileHandle,
    joins: FileHandle,
    big: &[FileHandle],
    attrs: FileHandle,
    link: FileHandle,
    small: FileHandle,
    one_mib: &[u8],
) -> Vec<Op> {
    let half = one_mib.len() / 2;
    let ops = vec![
        Op::GetAttr { fh: big[0] },
        // Shrinks a large file to a non-zero size (a stale tail is queued).
        Op::SetAttr {
            fh: big[0],
            set: SetAttr {
                size: Some(5),
                ..SetAttr::default()
            },
        },
        Op::Lookup {
            dir: big_dir,
            name: names("f01234"),
        },
        Op::Access {
            fh: big[1],
            mask: 2,
        },
        Op::ReadLink { fh: link },
        Op::Read {
            fh: big[1],
            offset: 3,
            count: MAX_IO,
        },
        Op::Write {
            fh: big[1],
            offset: 7,
            data: one_mib.to_vec(),
        },
        Op::Create {
            dir: big_dir,
            name: names("new"),
            mode: 0o644,
            exclusive: false,
        },
        Op::Mkdir {
            dir: big_dir,
            name: names("new-dir"),
            mode: 0o755,
        },
        Op::Symlink {
            dir: big_dir,
            name: names("new-link"),
            target: vec![b'a'; 4000],
        },
        Op::Mknod {
            dir: big_dir,
            name: names("fifo"),
            kind: SpecialKind::Fifo,
            mode: 0o644,
        },
        // The last link of a large file.
        Op::Remove {
            dir: root,
            name: names("big2"),
        },
        Op::Rmdir {
            dir: big_dir,
            name: names("empty"),
        },
        // Over a large file.
        Op::Rename {
            from_dir: root,
            from_name: names("small"),
            to_dir: root,
            to_name: names("big3"),
        },
        Op::Link {
            fh: big[1],
            dir: big_dir,
            name: names("hard"),
        },
        Op::ReadDir {
            dir: big_dir,
            cookie: 0,
            max_entries: MAX_READDIR_ENTRIES,
        },
        Op::StatFs,
        Op::Fsync { fh: big[1] },
        Op::RenameNoReplace {
            from_dir: big_dir,
            from_name: names("f00001"),
            to_dir: root,
            to_name: names("moved"),
        },
        Op::Exchange {
            a_dir: big_dir,
            a_name: names("f00002"),
            b_dir: root,
            b_name: names("big1"),
        },
        // Grows the file with the stale tail: `EBUSY`, after looking at a bounded part.
        Op::Allocate {
            fh: big[0],
            end: 1 << 40,
        },
        Op::GetXattr {
            fh: attrs,
            name: names("user.0003"),
        },
        Op::ListXattr { fh: attrs },
        Op::SetXattr {
            fh: attrs,
            name: names("user.0000"),
            value: vec![2; 60_000],
            how: XattrSet::Replace,
        },
        Op::RemoveXattr {
            fh: attrs,
            name: names("user.0001"),
        },
        Op::WriteGather {
            fh: big[4],
            extents: vec![
                Extent {
                    offset: 0,
                    data: one_mib[..half].to_vec(),
                },
                Extent {
                    offset: 1 << 30,
                    data: one_mib[half..].to_vec(),
                },
            ],
        },
        // Writes and truncates to zero a large file in one operation.
        Op::WriteSetAttr {
            fh: big[5],
            extents: vec![Extent {
                offset: 0,
                data: one_mib[..half].to_vec(),
            }],
            sets: vec![SetAttr {
                size: Some(0),
                ..SetAttr::default()
            }],
        },
        Op::GetLk {
            fh: big[1],
            owner: 1,
            kind: LockKind::Write,
            start: 0,
            end: 10,
        },
        Op::SetLk(lock(big[1], 1, Some(LockKind::Write))),
        Op::ReleaseLocks {
            fh: big[1],
            owner: 1,
        },
        Op::RenewLease,
        Op::LockDelegate(lock(big[1], 2, Some(LockKind::Read))),
        Op::ReturnDelegation {
            fh: big[1],
            locks: vec![],
        },
        Op::Recalls,
        Op::SetLkWait(lock(big[1], 3, Some(LockKind::Write))),
        Op::CancelWait {
            fh: big[1],
            owner: 3,
        },
        Op::SweepOrphans { after: 0 },
        Op::SweepDir {
            dir: big_dir,
            after: 0,
        },
        Op::Reclaim { file: None },
        // The large file removed by removing its last link, whose removal is then queued
        // with its attributes.
        Op::Remove {
            dir: root,
            name: names("attrs"),
        },
        Op::Reclaim { file: Some(big[0]) },
        Op::CopyRange {
            from: big[1],
            from_offset: 5,
            to: big[4],
            to_offset: 3 << 20,
            len: MAX_IO,
        },
        Op::Punch {
            fh: big[1],
            offset: 5,
            len: MAX_IO,
            keep_size: true,
        },
        // A hole past 48 MiB of data: looks at a bounded number of groups, then answers
        // where to go on from.
        Op::Seek {
            fh: big[1],
            offset: 2 << 20,
            hole: true,
        },
        // Refused here (no reporters configured): one record read at most.
        Op::ReportCapacity {
            replica: 0,
            bytes: 1 << 30,
        },
        Op::ReserveInodes {
            count: byzfs_fs::reserve::MAX_RESERVE,
        },
        Op::DelegateDir { dir: big_dir },
        Op::ReturnDir { dir: big_dir },
        Op::DelegateFile { file: big[1] },
        Op::ReturnFile { file: big[1] },
        // The biggest write there is, at the mount's time.
        Op::WriteAt {
            time: byzfs_fs::Timestamp::default(),
            write: Box::new(Op::Write {
                fh: big[1],
                offset: 5 << 20,
                data: vec![9; MAX_IO as usize],
            }),
        },
        // The largest record a group may have, then reading it back.
        group_put_max(),
        Op::GroupGet { group: max_group() },
        // Refused (no writer proof), then with one (refused too: `joins` existed before).
        Op::SetGroup {
            dir: joins,
            group: max_group(),
        },
        byzfs_fs::proto::signed::sign(
            &ed25519_dalek::SigningKey::from_bytes(&[8; 32]),
            &[0; 16],
            &[max_group()],
            1,
            3,
            1,
            &Credentials::root(),
            Op::SetGroup {
                dir: joins,
                group: max_group(),
            },
        ),
        Op::FileGroup { fh: joins },
        Op::WriterSeq,
        // The most ranges and bytes one may ask for, across a big file's groups.
        Op::ReadGather {
            fh: big[1],
            ranges: (0..byzfs_fs::proto::op::MAX_GATHER_READS as u64)
                .map(|k| {
                    (
                        k * (3 << 20),
                        MAX_IO / byzfs_fs::proto::op::MAX_GATHER_READS as u32,
                    )
                })
                .collect(),
        },
        // Refused: not reserved (the one that is, is in the batch measured last).
        Op::MakeAt {
            time: None,
            at: FileHandle {
                ino: 1 << 40,
                generation: 1,
            },
            make: Box::new(Op::Mkdir {
                dir: big_dir,
                name: names("at"),
                mode: 0o755,
            }),
        },
    ];
    // Exhaustive: a new operation must be added above.
    for op in &ops {
        match op {
            Op::GetAttr { .. }
            | Op::SetAttr { .. }
            | Op::Lookup { .. }
            | Op::Access { .. }
            | Op::ReadLink { .. }
            | Op::Read { .. }
            | Op::Write { .. }
            | Op::Create { .. }
            | Op::Mkdir { .. }
            | Op::Symlink { .. }
            | Op::Mknod { .. }
            | Op::Remove { .. }
            | Op::Rmdir { .. }
            | Op::Rename { .. }
            | Op::Link { .. }
            | Op::ReadDir { .. }
            | Op::StatFs
            | Op::Fsync { .. }
            | Op::RenameNoReplace { .. }
            | Op::Exchange { .. }
            | Op::Allocate { .. }
            | Op::GetXattr { .. }
            | Op::ListXattr { .. }
            | Op::SetXattr { .. }
            | Op::RemoveXattr { .. }
            | Op::WriteGather { .. }
            | Op::WriteSetAttr { .. }
            | Op::GetLk { .. }
            | Op::SetLk(_)
            | Op::ReleaseLocks { .. }
            | Op::RenewLease
            | Op::LockDelegate(_)
            | Op::ReturnDelegation { .. }
            | Op::Recalls
            | Op::SetLkWait(_)
            | Op::CancelWait { .. }
            | Op::SweepOrphans { .. }
            | Op::SweepDir { .. }
            | Op::Reclaim { .. }
            | Op::CopyRange { .. }
            | Op::Punch { .. }
            | Op::Seek { .. }
            | Op::ReportCapacity { .. }
            | Op::ReserveInodes { .. }
            | Op::MakeAt { .. }
            | Op::DelegateDir { .. }
            | Op::ReturnDir { .. }
            | Op::GroupPut { .. }
            | Op::GroupGet { .. }
            | Op::SetGroup { .. }
            | Op::Signed { .. }
            | Op::FileGroup { .. }
            | Op::WriterSeq
            | Op::ReadGather { .. }
            | Op::DelegateFile { .. }
            | Op::ReturnFile { .. }
            | Op::WriteAt { .. } => {}
            // Measured last, by `the_operations`.
            Op::Batch(_) => unreachable!("a batch is measured apart"),
        }
    }
    let kinds: std::collections::BTreeSet<&str> = ops.iter().map(Op::name).collect();
    assert_eq!(
        kinds.len(),
        57,
        "every kind of operation but the batch is measured here"
    );
    let _ = (empty_dir, small);
    ops
}

/// Records written by one operation: a 1 MiB write touches 64 blocks, their group records
/// and the inode; a removal or truncation deletes at most `STEP_BLOCKS` blocks and their
/// groups (`byzfs_fs::reclaim`); a batch adds at most three records (an inode and a name's
/// two entry records) per member, its writes and deletions sharing one operation's bounds.
const MAX_WRITTEN: u64 = 2 * STEP_BLOCKS + 64 + 3 * MAX_BATCH as u64;
/// Bytes written by one operation: 1 MiB of data, or 1 MiB of attributes, and keys.
const MAX_WRITTEN_BYTES: u64 = (1 << 20) + (64 << 10);
/// Records read: a directory sweep looks at 256 entries and the files they name; a
/// removal counts and deletes `STEP_BLOCKS` blocks; `listxattr` reads the attributes.
const MAX_READ: u64 = 4 * STEP_BLOCKS + 1_100;
/// Bytes read: 2 MiB of blocks read, cut or deleted, or 1 MiB of attributes, and keys.
const MAX_READ_BYTES: u64 = (2 << 20) + 2 * BLOCK_SIZE + (256 << 10);

#[test]
fn every_operation_does_bounded_work() {
    let cfg = FsConfig {
        partitions: 64,
        ..FsConfig::trusted()
    };
    let store = Counting {
        inner: MemStore::new(cfg.partitions),
        read: Cell::new(0),
        read_bytes: Cell::new(0),
        written: 0,
        written_bytes: 0,
    };
    let mut b = Bench {
        s: FileService::with_store(store, cfg).unwrap(),
        clock: 1_700_000_000_000_000,
    };
    let ops = the_operations(&mut b);
    let mut table = Vec::new();
    let mut over = Vec::new();
    for (name, op) in ops {
        let (r, w) = b.measure(op);
        let line = format!(
            "{name:<18} {:>6} read {:>9} B   {:>5} written {:>9} B   {}",
            w.read,
            w.read_bytes,
            w.written,
            w.written_bytes,
            match &r {
                Ok(Reply::Reclaimed { blocks, more }) => format!("reclaimed {blocks}, more {more}"),
                Ok(_) => "ok".to_string(),
                Err(e) => format!("{e:?}"),
            }
        );
        if w.written > MAX_WRITTEN
            || w.written_bytes > MAX_WRITTEN_BYTES
            || w.read > MAX_READ
            || w.read_bytes > MAX_READ_BYTES
        {
            over.push(line.clone());
        }
        table.push(line);
    }
    println!("{}", table.join("\n"));
    assert!(over.is_empty(), "over the bound:\n{}", over.join("\n"));
}

/// The id of [`group_put_max`]'s group: the longest name of owner `[7; 32]`.
fn max_group() -> [u8; 16] {
    let owner = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let name = "n".repeat(byzfs_fs::proto::group::MAX_NAME);
    byzfs_fs::proto::group::group_id(&owner.verifying_key().to_bytes(), &name)
}

/// A new group's record with the longest name and the most lockboxes, each as large as
/// allowed, signed by its owner.
fn group_put_max() -> Op {
    use byzfs_fs::proto::group::{signed_bytes, GroupRecord, MAX_LOCKBOX, MAX_LOCKBOXES, MAX_NAME};
    use ed25519_dalek::{Signer, SigningKey};
    let owner = SigningKey::from_bytes(&[7; 32]);
    let writer = SigningKey::from_bytes(&[8; 32]);
    let record = GroupRecord {
        owner: owner.verifying_key().to_bytes(),
        name: "n".repeat(MAX_NAME),
        version: 1,
        writer: writer.verifying_key().to_bytes(),
        lockboxes: vec![vec![0xAB; MAX_LOCKBOX]; MAX_LOCKBOXES],
    };
    let signature = owner
        .sign(&signed_bytes(&[0; 16], &max_group(), &record))
        .to_bytes()
        .to_vec();
    Op::GroupPut {
        group: max_group(),
        record,
        signature,
    }
}
