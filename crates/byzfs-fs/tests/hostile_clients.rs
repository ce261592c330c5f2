//! Hostile clients at the service's byte interface (issue #43): random sequences of
//! well-formed operations — nested, out of range, lock and delegation traffic, forged
//! proofs and group records — from several clients with random credentials, and requests
//! nested far deeper than any correct client nests. No replica may panic or overflow its
//! stack, every replica gives the same answer, and the replicated state stays identical at
//! every replica, two in memory and one on a log store.

use crate::common;

use byzfs_bft::Service;
use byzfs_fs::proto::group::GroupRecord;
use byzfs_fs::proto::lock::{LockKind, LockReq};
use byzfs_fs::proto::proof::WriterProof;
use byzfs_fs::store::LogStore;
use byzfs_fs::{
    decode_result, Credentials, Errno, Extent, FileHandle, FileService, FsResult, Op, Request,
    SetAttr, SpecialKind,
};
use common::*;
use proptest::prelude::*;

/// Who sends a step: one of three clients (two sessions of certificate 1, one of 2), with
/// credentials from a small set that includes root and ids that own nothing.
#[derive(Clone, Debug)]
struct Step {
    client: u8,
    uid: u8,
    gids: Vec<u8>,
    op: T,
    /// Ask for the read-only path even for a mutating operation (a client may set the
    /// read-only flag on anything).
    read_only: bool,
}

/// An operation, with handles given as indexes into the handles seen so far.
#[derive(Clone, Debug)]
enum T {
    Create(u8, u8),
    Mkdir(u8, u8),
    Symlink(u8, u8, u16),
    Mknod(u8, u8, u8),
    Write(u8, u64, u16),
    Gather(u8, Vec<(u64, u16)>),
    SetAttr(u8, Option<u16>, Option<u8>, Option<u8>, Option<u64>),
    Remove(u8, u8),
    Rmdir(u8, u8),
    Rename(u8, u8, u8, u8),
    Exchange(u8, u8, u8, u8),
    Link(u8, u8, u8),
    SetXattr(u8, u8, u16),
    Lock(u8, u8, Option<bool>, u64, u64, bool),
    Release(u8, u8),
    Renew,
    Recalls,
    Reserve(u32),
    MakeAt(u64, Box<T>),
    WriteAt(u64, Box<T>),
    Batch(Vec<T>),
    Signed(u64, u8, Box<T>),
    GroupPut(u8, u32),
    SetGroup(u8, u8),
    Capacity(u32, u64),
    Reclaim(Option<u8>),
    Sweep(u64),
    DelegateDir(u8),
    ReturnDir(u8),
    DelegateFile(u8),
    ReturnFile(u8),
    Copy(u8, u64, u8, u64, u32),
    Punch(u8, u64, u32),
    Allocate(u8, u64),
    Read(u8, u64, u32),
    Gathered(u8, Vec<(u64, u32)>),
    ReadDir(u8, u64, u32),
    Lookup(u8, u8),
    Access(u8, u32),
    Seek(u8, u64, bool),
    StatFs,
}

fn name(n: u8) -> Vec<u8> {
    match n {
        // The names no correct client sends: empty, a slash, a NUL, `..`, too long.
        248 => Vec::new(),
        249 => b"a/b".to_vec(),
        250 => b"a\0".to_vec(),
        251 => b"..".to_vec(),
        252.. => vec![b'x'; 256],
        k => vec![b'a' + k % 6],
    }
}

fn creation() -> impl Strategy<Value = T> {
    let h = 0u8..24;
    prop_oneof![
        (h.clone(), any::<u8>()).prop_map(|(d, n)| T::Create(d, n)),
        (h.clone(), any::<u8>()).prop_map(|(d, n)| T::Mkdir(d, n)),
        (h.clone(), any::<u8>(), 0u16..5000).prop_map(|(d, n, l)| T::Symlink(d, n, l)),
        (h, any::<u8>(), any::<u8>()).prop_map(|(d, n, k)| T::Mknod(d, n, k)),
    ]
}

fn plain() -> impl Strategy<Value = T> {
    let h = 0u8..24;
    let off = prop_oneof![0u64..70_000, Just(u64::MAX - 3), Just(1u64 << 62)];
    prop_oneof![
        4 => creation(),
        4 => (h.clone(), off.clone(), any::<u16>()).prop_map(|(f, o, l)| T::Write(f, o, l)),
        1 => (h.clone(), prop::collection::vec((off.clone(), 0u16..9000), 0..5)).prop_map(|(f, e)| T::Gather(f, e)),
        2 => (h.clone(), prop::option::of(any::<u16>()), prop::option::of(any::<u8>()), prop::option::of(any::<u8>()), prop::option::of(off.clone()))
            .prop_map(|(f, m, u, g, s)| T::SetAttr(f, m, u, g, s)),
        2 => (h.clone(), any::<u8>()).prop_map(|(d, n)| T::Remove(d, n)),
        1 => (h.clone(), any::<u8>()).prop_map(|(d, n)| T::Rmdir(d, n)),
        2 => (h.clone(), any::<u8>(), h.clone(), any::<u8>()).prop_map(|(a, b, c, d)| T::Rename(a, b, c, d)),
        1 => (h.clone(), any::<u8>(), h.clone(), any::<u8>()).prop_map(|(a, b, c, d)| T::Exchange(a, b, c, d)),
        1 => (h.clone(), h.clone(), any::<u8>()).prop_map(|(f, d, n)| T::Link(f, d, n)),
        1 => (h.clone(), any::<u8>(), any::<u16>()).prop_map(|(f, n, l)| T::SetXattr(f, n, l)),
        2 => (h.clone(), 0u8..4, prop::option::of(any::<bool>()), off.clone(), off.clone(), any::<bool>())
            .prop_map(|(f, o, k, s, e, w)| T::Lock(f, o, k, s, e, w)),
        1 => (h.clone(), 0u8..4).prop_map(|(f, o)| T::Release(f, o)),
        1 => Just(T::Renew),
        1 => Just(T::Recalls),
        1 => prop_oneof![0u32..40, Just(u32::MAX)].prop_map(T::Reserve),
        1 => (0u8..6, any::<u32>()).prop_map(|(g, v)| T::GroupPut(g, v)),
        1 => (h.clone(), 0u8..6).prop_map(|(d, g)| T::SetGroup(d, g)),
        1 => (0u32..6, any::<u64>()).prop_map(|(r, b)| T::Capacity(r, b)),
        1 => prop::option::of(h.clone()).prop_map(T::Reclaim),
        1 => any::<u64>().prop_map(T::Sweep),
        1 => h.clone().prop_map(T::DelegateDir),
        1 => h.clone().prop_map(T::ReturnDir),
        1 => h.clone().prop_map(T::DelegateFile),
        1 => h.clone().prop_map(T::ReturnFile),
        1 => (h.clone(), off.clone(), h.clone(), off.clone(), any::<u32>()).prop_map(|(a, b, c, d, l)| T::Copy(a, b, c, d, l)),
        1 => (h.clone(), off.clone(), any::<u32>()).prop_map(|(f, o, l)| T::Punch(f, o, l)),
        1 => (h.clone(), off.clone()).prop_map(|(f, e)| T::Allocate(f, e)),
        2 => (h.clone(), off.clone(), any::<u32>()).prop_map(|(f, o, c)| T::Read(f, o, c)),
        1 => (h.clone(), prop::collection::vec((off.clone(), any::<u32>()), 0..20)).prop_map(|(f, r)| T::Gathered(f, r)),
        2 => (h.clone(), 0u64..10, any::<u32>()).prop_map(|(d, c, m)| T::ReadDir(d, c, m)),
        2 => (h.clone(), any::<u8>()).prop_map(|(d, n)| T::Lookup(d, n)),
        1 => (h.clone(), 0u32..9).prop_map(|(f, m)| T::Access(f, m)),
        1 => (h.clone(), off, any::<bool>()).prop_map(|(f, o, x)| T::Seek(f, o, x)),
        1 => Just(T::StatFs),
    ]
}

/// Any operation: mostly plain ones; some nested forms, well nested or not.
fn any_op() -> impl Strategy<Value = T> {
    let nested = plain().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            (any::<u64>(), inner.clone()).prop_map(|(at, t)| T::MakeAt(at, Box::new(t))),
            (any::<u64>(), creation()).prop_map(|(at, t)| T::MakeAt(at, Box::new(t))),
            (any::<u64>(), inner.clone()).prop_map(|(at, t)| T::WriteAt(at, Box::new(t))),
            prop::collection::vec(inner.clone(), 0..5).prop_map(T::Batch),
            prop::collection::vec(plain(), 1..5).prop_map(T::Batch),
            (any::<u64>(), 0u8..3, inner).prop_map(|(s, p, t)| T::Signed(s, p, Box::new(t))),
        ]
    });
    prop_oneof![6 => plain(), 1 => nested]
}

fn step() -> impl Strategy<Value = Step> {
    (
        0u8..3,
        // Root half of the time: the root directory is root's, so others make little.
        prop_oneof![Just(0u8), 1u8..5],
        prop::collection::vec(0u8..5, 0..3),
        any_op(),
        prop::bool::weighted(0.15),
    )
        .prop_map(|(client, uid, gids, op, read_only)| Step {
            client,
            uid,
            gids,
            op,
            read_only,
        })
}

/// The ids the steps act as: root, two users, nobody, and one id nothing belongs to.
const IDS: [u32; 5] = [0, 1000, 1001, 65534, 4_000_000_000];

/// Protocol client ids: certificate 1's sessions 1 and 2, certificate 2's session 1.
const CLIENTS: [u64; 3] = [1 << 40 | 1, 1 << 40 | 2, 2 << 40 | 1];

/// Handle `i`: one seen in a reply, mostly; else one no one was given.
fn handle(known: &[FileHandle], i: u8) -> FileHandle {
    match i {
        0..=19 => known[usize::from(i) % known.len()],
        // A stale generation of a number in use, and a number never used.
        20 | 21 => FileHandle {
            ino: u64::from(i) - 19,
            generation: 1,
        },
        _ => FileHandle {
            ino: u64::from(i) << 40,
            generation: u64::MAX,
        },
    }
}

fn lock_req(fh: FileHandle, owner: u8, kind: Option<bool>, start: u64, end: u64) -> LockReq {
    LockReq {
        fh,
        owner: u64::from(owner),
        kind: kind.map(|w| if w { LockKind::Write } else { LockKind::Read }),
        start,
        end,
        pid: u32::from(owner),
    }
}

fn to_op(t: &T, known: &[FileHandle]) -> Op {
    let h = |i: &u8| handle(known, *i);
    match t {
        T::Create(d, n) => Op::Create {
            dir: h(d),
            name: name(*n),
            mode: 0o644,
            exclusive: n % 2 == 0,
        },
        T::Mkdir(d, n) => Op::Mkdir {
            dir: h(d),
            name: name(*n),
            mode: 0o755,
        },
        T::Symlink(d, n, l) => Op::Symlink {
            dir: h(d),
            name: name(*n),
            target: vec![b't'; usize::from(*l)],
        },
        T::Mknod(d, n, k) => Op::Mknod {
            dir: h(d),
            name: name(*n),
            kind: match k % 4 {
                0 => SpecialKind::Fifo,
                1 => SpecialKind::Socket,
                2 => SpecialKind::CharDevice(u64::from(*k)),
                _ => SpecialKind::BlockDevice(u64::MAX),
            },
            mode: 0o600,
        },
        T::Write(f, o, l) => Op::Write {
            fh: h(f),
            offset: *o,
            data: vec![7; usize::from(*l)],
        },
        T::Gather(f, e) => Op::WriteGather {
            fh: h(f),
            extents: e
                .iter()
                .map(|&(offset, l)| Extent {
                    offset,
                    data: vec![3; usize::from(l)],
                })
                .collect(),
        },
        T::SetAttr(f, m, u, g, s) => Op::SetAttr {
            fh: h(f),
            set: SetAttr {
                mode: m.map(u32::from),
                uid: u.map(|u| IDS[usize::from(u) % IDS.len()]),
                gid: g.map(|g| IDS[usize::from(g) % IDS.len()]),
                size: *s,
                ..SetAttr::default()
            },
        },
        T::Remove(d, n) => Op::Remove {
            dir: h(d),
            name: name(*n),
        },
        T::Rmdir(d, n) => Op::Rmdir {
            dir: h(d),
            name: name(*n),
        },
        T::Rename(a, b, c, d) => Op::Rename {
            from_dir: h(a),
            from_name: name(*b),
            to_dir: h(c),
            to_name: name(*d),
        },
        T::Exchange(a, b, c, d) => Op::Exchange {
            a_dir: h(a),
            a_name: name(*b),
            b_dir: h(c),
            b_name: name(*d),
        },
        T::Link(f, d, n) => Op::Link {
            fh: h(f),
            dir: h(d),
            name: name(*n),
        },
        T::SetXattr(f, n, l) => Op::SetXattr {
            fh: h(f),
            name: [b"user.".as_slice(), &name(*n)].concat(),
            value: vec![1; usize::from(*l)],
            how: byzfs_fs::proto::op::XattrSet::Any,
        },
        T::Lock(f, o, k, s, e, wait) => {
            let r = lock_req(h(f), *o, *k, *s, *e);
            if *wait {
                Op::SetLkWait(r)
            } else {
                Op::LockDelegate(r)
            }
        }
        T::Release(f, o) => Op::ReleaseLocks {
            fh: h(f),
            owner: u64::from(*o),
        },
        T::Renew => Op::RenewLease,
        T::Recalls => Op::Recalls,
        T::Reserve(n) => Op::ReserveInodes { count: *n },
        T::WriteAt(at, t) => Op::WriteAt {
            time: byzfs_fs::Timestamp {
                secs: at.rotate_left(17) as i64,
                nsecs: (*at as u32) % 1_000_000_000,
            },
            write: Box::new(to_op(t, known)),
        },
        T::MakeAt(at, t) => Op::MakeAt {
            // Any time at all, the extremes among them (the bound is checked without
            // overflow), or none.
            time: (at % 3 != 0).then_some(byzfs_fs::Timestamp {
                secs: at.rotate_left(17) as i64,
                nsecs: (*at as u32) % 1_000_000_000,
            }),
            at: FileHandle {
                ino: at % 64,
                generation: at >> 6,
            },
            make: Box::new(to_op(t, known)),
        },
        T::Batch(ts) => Op::Batch(ts.iter().map(|t| to_op(t, known)).collect()),
        T::Signed(seq, proofs, t) => Op::Signed {
            seq: *seq,
            proofs: (0..*proofs)
                .map(|p| WriterProof {
                    group: [p; 16],
                    version: 1,
                    signature: vec![p; 64],
                })
                .collect(),
            op: Box::new(to_op(t, known)),
            headers: vec![(h(&0), vec![9; 40])],
            expect: Vec::new(),
        },
        T::GroupPut(g, v) => {
            let owner = [*g; 32];
            let name = format!("team-{g}");
            Op::GroupPut {
                // The id derived from owner and name half the time (the signature is still
                // forged), another the rest.
                group: if g % 2 == 0 {
                    byzfs_fs::proto::group::group_id(&owner, &name)
                } else {
                    [*g; 16]
                },
                record: GroupRecord {
                    owner,
                    name,
                    version: *v,
                    writer: [g.wrapping_add(1); 32],
                    lockboxes: vec![vec![*g; 100]],
                },
                signature: vec![*g; 64],
            }
        }
        T::SetGroup(d, g) => Op::SetGroup {
            dir: h(d),
            group: [*g; 16],
        },
        T::Capacity(replica, bytes) => Op::ReportCapacity {
            replica: *replica,
            bytes: *bytes,
        },
        T::Reclaim(f) => Op::Reclaim {
            file: f.as_ref().map(h),
        },
        T::Sweep(after) => Op::SweepOrphans { after: *after },
        T::DelegateDir(d) => Op::DelegateDir { dir: h(d) },
        T::ReturnDir(d) => Op::ReturnDir { dir: h(d) },
        T::DelegateFile(d) => Op::DelegateFile { file: h(d) },
        T::ReturnFile(d) => Op::ReturnFile { file: h(d) },
        T::Copy(a, ao, b, bo, len) => Op::CopyRange {
            from: h(a),
            from_offset: *ao,
            to: h(b),
            to_offset: *bo,
            len: *len,
        },
        T::Punch(f, o, len) => Op::Punch {
            fh: h(f),
            offset: *o,
            len: *len,
            keep_size: o % 2 == 0,
        },
        T::Allocate(f, end) => Op::Allocate {
            fh: h(f),
            end: *end,
        },
        T::Read(f, o, c) => Op::Read {
            fh: h(f),
            offset: *o,
            count: *c,
        },
        T::Gathered(f, r) => Op::ReadGather {
            fh: h(f),
            ranges: r.clone(),
        },
        T::ReadDir(d, c, m) => Op::ReadDir {
            dir: h(d),
            cookie: *c,
            max_entries: *m,
        },
        T::Lookup(d, n) => Op::Lookup {
            dir: h(d),
            name: name(*n),
        },
        T::Access(f, m) => Op::Access { fh: h(f), mask: *m },
        T::Seek(f, o, hole) => Op::Seek {
            fh: h(f),
            offset: *o,
            hole: *hole,
        },
        T::StatFs => Op::StatFs,
    }
}

/// The replicas: two in memory, one on a log store in `dir`.
struct Replicas {
    mem: [FileService; 2],
    disk: FileService<LogStore>,
}

impl Replicas {
    fn new(dir: &std::path::Path) -> Replicas {
        let cfg = small_config();
        let store = LogStore::create_scratch(dir.join("r"), cfg.partitions).expect("scratch store");
        Replicas {
            mem: [
                FileService::in_memory(cfg.clone()),
                FileService::in_memory(cfg.clone()),
            ],
            disk: FileService::with_store(store, cfg).expect("file service on a log store"),
        }
    }

    /// Runs `bytes` at every replica, ordered or read-only, and returns the one answer
    /// they all gave (or fails the test).
    fn run(&mut self, client: u64, bytes: &[u8], read_only: bool, now: u64) -> Vec<u8> {
        let nondet = now.to_le_bytes();
        let answers: Vec<Vec<u8>> = if read_only {
            vec![
                self.mem[0].execute_read_only(client, bytes),
                self.mem[1].execute_read_only(client, bytes),
                self.disk.execute_read_only(client, bytes),
            ]
        } else {
            vec![
                self.mem[0].execute(client, bytes, &nondet),
                self.mem[1].execute(client, bytes, &nondet),
                self.disk.execute(client, bytes, &nondet),
            ]
        };
        assert_eq!(answers[0], answers[1], "two replicas in memory differ");
        assert_eq!(answers[0], answers[2], "the replica on a log store differs");
        answers[0].clone()
    }

    fn same_state(&self) {
        let d = self.mem[0].current_partition_digests();
        assert_eq!(d, self.mem[1].current_partition_digests());
        assert_eq!(d, self.disk.current_partition_digests());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn hostile_clients_leave_every_replica_alike(steps in prop::collection::vec(step(), 1..50)) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut r = Replicas::new(dir.path());
        let mut known = vec![ROOT];
        let mut now = T0;
        for s in &steps {
            let cred = Credentials {
                uid: IDS[usize::from(s.uid)],
                gid: IDS[usize::from(s.uid)],
                groups: s.gids.iter().map(|&g| IDS[usize::from(g)]).collect(),
            };
            let bytes = Request::new(cred, to_op(&s.op, &known)).encode();
            let read_only = s.read_only || r.mem[0].is_read_only(&bytes);
            now += 1_000_000;
            let out = r.run(CLIENTS[usize::from(s.client)], &bytes, read_only, now);
            let result: Option<FsResult> = decode_result(&out);
            prop_assert!(result.is_some(), "an answer every client decodes");
            if let Some(Ok(reply)) = result {
                let mut seen = Vec::new();
                let mut reply = reply;
                reply.for_each_attr_mut(&mut |a| seen.push(a.fh));
                for fh in seen {
                    if !known.contains(&fh) && known.len() < 24 {
                        known.push(fh);
                    }
                }
            }
            r.same_state();
        }
    }
}

/// `Batch` nested `depth` deep around a `StatFs`, as root, built as bytes: the value itself
/// could not be built or dropped without recursing as deep.
fn deep_batch(depth: usize) -> Vec<u8> {
    let plain = Request::new(Credentials::root(), Op::StatFs).encode();
    // Root's credentials take 3 bytes; StatFs's tag (16) follows, then no grant (0).
    assert_eq!(plain[3..], [16, 0]);
    let mut b = plain[..3].to_vec();
    for _ in 0..depth {
        b.extend_from_slice(&[45, 1]); // Batch (tag 45) of one member
    }
    b.extend_from_slice(&plain[3..]);
    b
}

/// The request of issue #43: 200,000 nested batches (400 KB) aborted every replica with a
/// stack overflow in `is_read_only`, and, once ordered, again at each restart. Decoding
/// now stops at the fourth level, so even a thread with a 64 KiB stack refuses it.
#[test]
fn deep_nesting_is_refused_without_overflow() {
    let bytes = deep_batch(200_000);
    assert!(bytes.len() > 400_000);
    let answers = std::thread::Builder::new()
        .stack_size(64 << 10)
        .spawn(move || {
            let mut fs = FileService::in_memory(small_config());
            let ro = fs.is_read_only(&bytes);
            let read = decode_result(&fs.execute_read_only(1 << 40 | 1, &bytes));
            let ordered = decode_result(&fs.execute(1 << 40 | 1, &bytes, &T0.to_le_bytes()));
            (ro, read, ordered)
        })
        .expect("thread")
        .join()
        .expect("no overflow, no panic");
    assert_eq!(
        answers,
        (false, Some(Err(Errno::EINVAL)), Some(Err(Errno::EINVAL)))
    );
    // The same construction at depth 1 is a well-formed request: the bytes are right.
    let one = Request::decode(&deep_batch(1)).expect("depth 1 decodes");
    assert_eq!(one.op, Op::Batch(vec![Op::StatFs]));
}
