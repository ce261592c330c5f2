//! # byzfs-fs — the replicated file service
//!
//! A deterministic, NFSv3-like file system implementing `byzfs_bft`'s
//! [`Service`](byzfs_bft::Service) trait (ARCHITECTURE.md, the bottom layer): getattr,
//! setattr, lookup, access, readlink, read, write, create (exclusive too), mkdir, symlink,
//! mknod (fifo, socket), remove, rmdir, rename (with `renameat2`'s flags), link, readdir,
//! statfs, fsync, allocate (`fallocate` mode 0), extended attributes ([`xattr`]) and record
//! locks shared by all clients, with leases in agreed time ([`lock`]) and delegations that
//! let one client keep a file's locks while no other locks it ([`delegation`]), a
//! directory's names ([`dir_delegation`]) or a file's contents ([`file_delegation`]) while
//! no other uses them, and
//! deadlock detection for blocking requests ([`deadlock`]), and the sweep of files that
//! dead clients left hidden ([`orphan`]), on file
//! handles with
//! generation numbers. Clients (the FUSE layer, tests) encode a [`Request`] and
//! decode an [`FsResult`] with the types of [`proto`], the protocol: a module that imports
//! nothing of the execution, so a mount links exactly what the replicas decode.
//!
//! ## Example
//!
//! ```
//! use byzfs_bft::Service;
//! use byzfs_fs::{decode_result, Credentials, FileHandle, FileService, FsConfig, Op, Reply, Request};
//!
//! // Credentials taken as sent: a test's service (a replica's is `ClientPolicy::Certified`).
//! let mut fs = FileService::in_memory(FsConfig::trusted());
//! let me = Credentials::user(1000, 1000);
//! let root = Credentials::root();
//! // Agreed time of the batch: 8 bytes LE, microseconds (normally chosen by the primary).
//! let nondet = 1_700_000_000_000_000u64.to_le_bytes();
//! let run = |fs: &mut FileService, cred: &Credentials, op: Op| {
//!     let bytes = Request::new(cred.clone(), op).encode();
//!     if fs.is_read_only(&bytes) {
//!         decode_result(&fs.execute_read_only(1, &bytes))
//!     } else {
//!         decode_result(&fs.execute(1, &bytes, &nondet))
//!     }
//!     .expect("the service always answers a decodable result")
//! };
//! // Let user 1000 create files in the root.
//! let set = byzfs_fs::SetAttr { uid: Some(1000), ..Default::default() };
//! run(&mut fs, &root, Op::SetAttr { fh: FileHandle::ROOT, set }).unwrap();
//! let Reply::Made { entry: attr, .. } = run(&mut fs, &me, Op::Create {
//!     dir: FileHandle::ROOT, name: b"hello.txt".to_vec(), mode: 0o644, exclusive: true,
//! }).unwrap() else { unreachable!() };
//! run(&mut fs, &me, Op::Write { fh: attr.fh, offset: 0, data: b"hi".to_vec() }).unwrap();
//! let read = run(&mut fs, &me, Op::Read { fh: attr.fh, offset: 0, count: 10 }).unwrap();
//! assert_eq!(read, Reply::Read { data: b"hi".to_vec(), eof: true });
//! // Errors are Linux errno values, identical at every replica.
//! let again = run(&mut fs, &me, Op::Mkdir { dir: FileHandle::ROOT, name: b"hello.txt".to_vec(), mode: 0o755 });
//! assert_eq!(again, Err(byzfs_fs::Errno::EEXIST));
//! ```
//!
//! ## Design, and why
//!
//! * **All state in one partitioned store** ([`store`]): inode records, directory entries
//!   (twice: by cookie and by name), data blocks and a superblock holding the counters and
//!   the agreed clock. Checkpoints, rollback, partition digests and state transfer are the
//!   store's, so they cost O(what changed) and cover everything that replies depend on.
//! * **Placement by object** (`key.rs`): a record's partition is a hash of the object it
//!   belongs to, with 4096 partitions by default ([`FsConfig::partitions`]). A directory's
//!   entries share a partition, so `readdir` is one ordered range scan; a file's blocks are
//!   spread by 1 MiB groups, so a many-GB file does not make any one partition large and
//!   state transfer fetches only the groups that changed. We did not reuse
//!   `byzfs_bft::state::PartitionedState` as is: it hashes whole keys (no range scans) and
//!   keeps everything in memory; we reuse its AdHASH sums, so digests mean the same.
//! * **Atomic operations** ([`store::Txn`]): an operation's writes are buffered and applied
//!   only if it succeeds, so errors never leave partial effects and the code need not check
//!   everything before its first write.
//! * **Determinism**: inode numbers and generations from replicated counters, directory
//!   order = creation order (cookies from a per-directory counter), times from the agreed
//!   timestamp, capacity limits from the replicated configuration, ordered maps only.
//! * **atime is not maintained** (see [`proto::attr`]): reads stay read-only operations.
//! * **Read-only optimisation**: getattr, lookup, access, readlink, read, readdir and statfs
//!   are classified read-only by the service itself ([`Op::is_read_only`]).
//! * **Bad input** gets a deterministic errno: names with `/` or NUL (`EINVAL`), over 255
//!   bytes (`ENAMETOOLONG`), nesting deeper than [`dir::MAX_DEPTH`] (`ENAMETOOLONG`), the
//!   wrong file type (`ENOTDIR`, `EISDIR`, `EINVAL`), writes past [`proto::attr::MAX_FILE_SIZE`]
//!   (`EFBIG`), the replicated capacity exhausted (`ENOSPC`), undecodable operations
//!   (`EINVAL`). A replica whose own disk fails answers alone and is repaired by state
//!   transfer (see [`service`]).
//! * **Not POSIX**: no device nodes; an unlinked file is gone even if a client still has it
//!   open (the FUSE layer must hide this, as NFS clients do with silly renames); credentials
//!   are stated by the authenticated client machine (AUTH_SYS), within the ids its
//!   certificate's admin-signed grant allows ([`proto::grant`], [`policy`]).
//!
//! ## Storage backends
//!
//! * [`MemStore`](store::MemStore): in memory (tests, the simulator).
//! * [`LogStore`](store::LogStore): a log of segments on disk, one appended frame per
//!   operation, the index (each key's place in the log) in memory; values stay on disk, so
//!   files of many GB cost disk, not memory. Synced once per stable checkpoint, compacted
//!   there when half of what closed segments hold is garbage.
//!
//! Both implement [`store::Store`] and give identical digests and exports for the same calls
//! (property-tested), so replicas with different backends agree. The state machine itself
//! (everything but `store/log/`) does no I/O.
//!
//! ## Known limitations
//!
//! * A directory's entries live in one partition: a directory of 100,000 entries makes one
//!   partition of a few tens of MB, which state transfer moves in chunks.
//! * A disk failure inside `checkpoint`, `rollback`, `discard_checkpoints_below`,
//!   `import_partition` or `finish_import` of the log store cannot be answered (the
//!   `Service` trait has no error channel there): it is recorded (`Service::failure`) and
//!   the driver stops the replica. A failure in an operation (the common case of a full
//!   disk) is handled without stopping (see [`service`]).
//! * The log store's index is in memory (about 100 bytes and the key per record).

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod attrs;
pub mod batch;
pub mod capacity;
pub mod config;
mod contents;
pub mod crypt_file;
pub mod crypt_group;
pub mod crypt_write;
pub mod data;
pub mod deadlock;
pub mod delegation;
pub mod dir;
pub mod dir_delegation;
mod encoding;
mod exec;
mod fail;
pub mod file_delegation;
mod inode;
mod key;
pub mod lock;
#[cfg(feature = "mutations")]
pub mod mutation;
mod names;
pub mod orphan;
pub mod perm;
pub mod policy;
pub mod proto;
pub mod ranges;
pub mod reclaim;
mod rename;
pub mod reserve;
mod route;
pub mod service;
pub mod store;
mod unlink;
pub mod xattr;

pub use config::FsConfig;
pub use policy::ClientPolicy;
pub use proto::attr::{Attr, FileType, SetAttr, SetTime, StatFs, Timestamp};
pub use proto::cred::Credentials;
pub use proto::errno::Errno;
pub use proto::grant::{Grant, SignedGrant};
pub use proto::handle::FileHandle;
pub use proto::op::{Extent, Op, SpecialKind, MAX_SETATTRS};
pub use proto::reply::{DirEntry, FsResult, Reply};
pub use proto::request::{decode_result, encode_result, Request};
pub use service::FileService;
