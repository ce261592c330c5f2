//! The encoding of stored records (postcard), and the tests that pin it.
//!
//! What this crate writes outlives the binary that wrote it: records in the service's store
//! (inodes, directory entries, locks); requests, which replicas keep in their logs and execute
//! again after a restart; and results, which the library's reply cache keeps in checkpoints to
//! answer a client's retransmission. Postcard numbers an enum's variants by position and writes a
//! struct's fields in declaration order, so reordering either silently changes the format: new
//! variants and fields go last. The tests below pin every variant's number and the bytes of one
//! value of each stored type, so such a change fails here instead of in a user's data directory.
//!
//! (History, from the repository's log: commit 0ff3baf inserted `Reply::Lock` before
//! `Unlinked`, so a result cached by an older binary, answering a retransmission across the
//! upgrade, would be misread. No other stored enum or struct was reordered since the store's
//! format number was introduced.)

use crate::store::StoreError;
use serde::{de::DeserializeOwned, Serialize};

/// Encodes a record.
pub(crate) fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    // Serializing plain structs into a growable Vec cannot fail.
    postcard::to_allocvec(v).expect("postcard serialization into a Vec is infallible")
}

/// Decodes a stored record; a record that does not decode is local corruption.
pub(crate) fn decode<T: DeserializeOwned>(b: &[u8]) -> Result<T, StoreError> {
    match postcard::take_from_bytes(b) {
        Ok((v, [])) => Ok(v),
        _ => Err(StoreError::Io("corrupt record".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deadlock::Wait;
    use crate::delegation::Delegation;
    use crate::dir::{EntryRec, NameRec, Target};
    use crate::inode::{Inode, Superblock};
    use crate::key;
    use crate::lock::Lease;
    use crate::proto::attr::{Attr, FileType, SetAttr, SetTime, StatFs, Timestamp};
    use crate::proto::cred::Credentials;
    use crate::proto::errno::Errno;
    use crate::proto::handle::FileHandle;
    use crate::proto::lock::{Held, LockInfo, LockKind, LockOwner, LockReq, Returned};
    use crate::proto::op::{Extent, Op, SpecialKind, XattrSet};
    use crate::proto::reply::{DirEntry, Reply};
    use crate::proto::request::{encode_result, Request};
    use crate::reclaim::{DataRec, Doomed, Queue};
    use std::collections::BTreeSet;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// Checks that each value encodes with its expected first byte and decodes back, and
    /// that the cases cover every tag from 0 to the largest.
    fn check_tags<T>(cases: &[(T, u8)])
    where
        T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let mut seen = BTreeSet::new();
        for (v, tag) in cases {
            let bytes = encode(v);
            assert_eq!(bytes[0], *tag, "{v:?}");
            assert_eq!(decode::<T>(&bytes).ok().as_ref(), Some(v));
            seen.insert(*tag);
        }
        let all: BTreeSet<u8> = (0..seen.len() as u8).collect();
        assert_eq!(seen, all, "a variant without a case");
    }

    const FH: FileHandle = FileHandle {
        ino: 5,
        generation: 6,
    };
    const T1: Timestamp = Timestamp { secs: 7, nsecs: 8 };

    fn attr() -> Attr {
        Attr {
            fh: FH,
            kind: FileType::Regular,
            mode: 0o644,
            nlink: 1,
            uid: 2,
            gid: 3,
            size: 4,
            used: 5,
            atime: T1,
            mtime: T1,
            ctime: T1,
            rdev: 9,
            crypt: vec![10],
        }
    }

    fn lock_req() -> LockReq {
        LockReq {
            fh: FH,
            owner: 1,
            kind: Some(LockKind::Write),
            start: 2,
            end: 3,
            pid: 4,
        }
    }

    /// The tag each operation is stored with. The match is exhaustive, so a new variant does
    /// not compile until it is given a number here (the next one).
    fn op_tag(op: &Op) -> u8 {
        match op {
            Op::GetAttr { .. } => 0,
            Op::SetAttr { .. } => 1,
            Op::Lookup { .. } => 2,
            Op::Access { .. } => 3,
            Op::ReadLink { .. } => 4,
            Op::Read { .. } => 5,
            Op::Write { .. } => 6,
            Op::Create { .. } => 7,
            Op::Mkdir { .. } => 8,
            Op::Symlink { .. } => 9,
            Op::Mknod { .. } => 10,
            Op::Remove { .. } => 11,
            Op::Rmdir { .. } => 12,
            Op::Rename { .. } => 13,
            Op::Link { .. } => 14,
            Op::ReadDir { .. } => 15,
            Op::StatFs => 16,
            Op::Fsync { .. } => 17,
            Op::RenameNoReplace { .. } => 18,
            Op::Exchange { .. } => 19,
            Op::Allocate { .. } => 20,
            Op::GetXattr { .. } => 21,
            Op::ListXattr { .. } => 22,
            Op::SetXattr { .. } => 23,
            Op::RemoveXattr { .. } => 24,
            Op::WriteGather { .. } => 25,
            Op::WriteSetAttr { .. } => 26,
            Op::GetLk { .. } => 27,
            Op::SetLk(_) => 28,
            Op::ReleaseLocks { .. } => 29,
            Op::RenewLease => 30,
            Op::LockDelegate(_) => 31,
            Op::ReturnDelegation { .. } => 32,
            Op::Recalls => 33,
            Op::SetLkWait(_) => 34,
            Op::CancelWait { .. } => 35,
            Op::SweepOrphans { .. } => 36,
            Op::SweepDir { .. } => 37,
            Op::Reclaim { .. } => 38,
            Op::CopyRange { .. } => 39,
            Op::Punch { .. } => 40,
            Op::Seek { .. } => 41,
            Op::ReportCapacity { .. } => 42,
            Op::ReserveInodes { .. } => 43,
            Op::MakeAt { .. } => 44,
            Op::Batch(_) => 45,
            Op::DelegateDir { .. } => 46,
            Op::ReturnDir { .. } => 47,
            Op::GroupPut { .. } => 48,
            Op::GroupGet { .. } => 49,
            Op::SetGroup { .. } => 50,
            Op::Signed { .. } => 51,
            Op::FileGroup { .. } => 52,
            Op::WriterSeq => 53,
            Op::ReadGather { .. } => 54,
            Op::DelegateFile { .. } => 55,
            Op::ReturnFile { .. } => 56,
            Op::WriteAt { .. } => 57,
        }
    }

    #[test]
    fn every_operation_keeps_its_number() {
        let n = || b"n".to_vec();
        let ext = || {
            vec![Extent {
                offset: 1,
                data: vec![2],
            }]
        };
        let ops = vec![
            Op::GetAttr { fh: FH },
            Op::SetAttr {
                fh: FH,
                set: SetAttr::default(),
            },
            Op::Lookup { dir: FH, name: n() },
            Op::Access { fh: FH, mask: 4 },
            Op::ReadLink { fh: FH },
            Op::Read {
                fh: FH,
                offset: 1,
                count: 2,
            },
            Op::Write {
                fh: FH,
                offset: 1,
                data: vec![3],
            },
            Op::Create {
                dir: FH,
                name: n(),
                mode: 0o600,
                exclusive: true,
            },
            Op::Mkdir {
                dir: FH,
                name: n(),
                mode: 0o700,
            },
            Op::Symlink {
                dir: FH,
                name: n(),
                target: n(),
            },
            Op::Mknod {
                dir: FH,
                name: n(),
                kind: SpecialKind::Fifo,
                mode: 0o600,
            },
            Op::Remove { dir: FH, name: n() },
            Op::Rmdir { dir: FH, name: n() },
            Op::Rename {
                from_dir: FH,
                from_name: n(),
                to_dir: FH,
                to_name: n(),
            },
            Op::Link {
                fh: FH,
                dir: FH,
                name: n(),
            },
            Op::ReadDir {
                dir: FH,
                cookie: 1,
                max_entries: 2,
            },
            Op::StatFs,
            Op::Fsync { fh: FH },
            Op::RenameNoReplace {
                from_dir: FH,
                from_name: n(),
                to_dir: FH,
                to_name: n(),
            },
            Op::Exchange {
                a_dir: FH,
                a_name: n(),
                b_dir: FH,
                b_name: n(),
            },
            Op::Allocate { fh: FH, end: 1 },
            Op::GetXattr { fh: FH, name: n() },
            Op::ListXattr { fh: FH },
            Op::SetXattr {
                fh: FH,
                name: n(),
                value: vec![1],
                how: XattrSet::Replace,
            },
            Op::RemoveXattr { fh: FH, name: n() },
            Op::WriteGather {
                fh: FH,
                extents: ext(),
            },
            Op::WriteSetAttr {
                fh: FH,
                extents: ext(),
                sets: vec![SetAttr::default()],
            },
            Op::GetLk {
                fh: FH,
                owner: 1,
                kind: LockKind::Read,
                start: 2,
                end: 3,
            },
            Op::SetLk(lock_req()),
            Op::ReleaseLocks { fh: FH, owner: 1 },
            Op::RenewLease,
            Op::LockDelegate(lock_req()),
            Op::ReturnDelegation {
                fh: FH,
                locks: vec![Returned {
                    owner: 1,
                    kind: LockKind::Write,
                    start: 2,
                    end: 3,
                    pid: 4,
                }],
            },
            Op::Recalls,
            Op::SetLkWait(lock_req()),
            Op::CancelWait { fh: FH, owner: 1 },
            Op::SweepOrphans { after: 1 },
            Op::SweepDir { dir: FH, after: 1 },
            Op::Reclaim { file: Some(FH) },
            Op::CopyRange {
                from: FH,
                from_offset: 1,
                to: FH,
                to_offset: 2,
                len: 3,
            },
            Op::Punch {
                fh: FH,
                offset: 1,
                len: 2,
                keep_size: true,
            },
            Op::Seek {
                fh: FH,
                offset: 1,
                hole: true,
            },
            Op::ReportCapacity {
                replica: 1,
                bytes: 2,
            },
            Op::ReserveInodes { count: 1 },
            Op::MakeAt {
                time: None,
                at: FH,
                make: Box::new(Op::Mkdir {
                    dir: FH,
                    name: n(),
                    mode: 1,
                }),
            },
            Op::Batch(vec![Op::Remove { dir: FH, name: n() }]),
            Op::DelegateDir { dir: FH },
            Op::ReturnDir { dir: FH },
            Op::DelegateFile { file: FH },
            Op::ReturnFile { file: FH },
            Op::WriteAt {
                time: Timestamp::default(),
                write: Box::new(Op::Fsync { fh: FH }),
            },
            Op::GroupPut {
                group: [1; 16],
                record: crate::proto::group::GroupRecord {
                    owner: [2; 32],
                    name: "team".into(),
                    version: 1,
                    writer: [3; 32],
                    lockboxes: vec![vec![4]],
                },
                signature: vec![5; 64],
            },
            Op::GroupGet { group: [1; 16] },
            Op::SetGroup {
                dir: FH,
                group: [1; 16],
            },
            Op::Signed {
                seq: 1,
                proofs: vec![crate::proto::proof::WriterProof {
                    group: [1; 16],
                    version: 1,
                    signature: vec![2; 64],
                }],
                op: Box::new(Op::StatFs),
                headers: vec![(FH, vec![3])],
                expect: vec![(FH, vec![4])],
            },
            Op::FileGroup { fh: FH },
            Op::WriterSeq,
            Op::ReadGather {
                fh: FH,
                ranges: vec![(1, 2)],
            },
        ];
        let cases: Vec<(Op, u8)> = ops
            .into_iter()
            .map(|op| {
                let tag = op_tag(&op);
                (op, tag)
            })
            .collect();
        check_tags(&cases);
    }

    #[test]
    fn every_reply_keeps_its_number() {
        let a = attr;
        check_tags(&[
            (Reply::Attr(a()), 0),
            (Reply::Entry(a()), 1),
            (Reply::Done, 2),
            (Reply::ReadLink(vec![1]), 3),
            (
                Reply::Read {
                    data: vec![1],
                    eof: true,
                },
                4,
            ),
            (
                Reply::Write {
                    count: 1,
                    attr: a(),
                },
                5,
            ),
            (
                Reply::ReadDir {
                    entries: vec![DirEntry {
                        cookie: 1,
                        name: b"n".to_vec(),
                        fh: FH,
                        kind: FileType::Directory,
                    }],
                    eof: false,
                },
                6,
            ),
            (
                Reply::StatFs(StatFs {
                    block_size: 1,
                    blocks: 2,
                    blocks_free: 3,
                    files: 4,
                    files_free: 5,
                    name_max: 6,
                }),
                7,
            ),
            (Reply::Xattr(vec![1]), 8),
            (
                Reply::Made {
                    entry: a(),
                    dir: a(),
                },
                9,
            ),
            (
                Reply::Lock {
                    conflict: Some(LockInfo {
                        kind: LockKind::Read,
                        start: 1,
                        end: 2,
                        pid: 3,
                        client: 4,
                    }),
                    lapsed: false,
                    attr: None,
                },
                10,
            ),
            (
                Reply::Unlinked {
                    dir: a(),
                    ino: 1,
                    left: None,
                },
                11,
            ),
            (Reply::Recall, 12),
            (
                Reply::Delegated {
                    lapsed: false,
                    attr: a(),
                    mine: vec![],
                },
                13,
            ),
            (Reply::Recalls(vec![1]), 14),
            (Reply::Deadlock { lapsed: true }, 15),
            (
                Reply::Swept {
                    removed: 1,
                    next: Some(2),
                },
                16,
            ),
            (
                Reply::Reclaimed {
                    blocks: 1,
                    more: true,
                },
                17,
            ),
            (Reply::Seek { at: 1, done: true }, 18),
            (
                Reply::Reserved {
                    first: FH,
                    count: 2,
                },
                19,
            ),
            (Reply::Batch(vec![Reply::Done]), 20),
            (Reply::Group(None), 21),
            (Reply::FileGroup(None), 22),
            (Reply::WriterSeq(1), 23),
        ]);
    }

    #[test]
    fn every_small_enum_keeps_its_numbers() {
        check_tags(&[
            (FileType::Regular, 0),
            (FileType::Directory, 1),
            (FileType::Symlink, 2),
            (FileType::Fifo, 3),
            (FileType::Socket, 4),
            (FileType::CharDevice, 5),
            (FileType::BlockDevice, 6),
        ]);
        check_tags(&[
            (SpecialKind::Fifo, 0),
            (SpecialKind::Socket, 1),
            (SpecialKind::CharDevice(1), 2),
            (SpecialKind::BlockDevice(1), 3),
        ]);
        check_tags(&[(SetTime::Now, 0), (SetTime::At(T1), 1)]);
        check_tags(&[
            (
                Doomed::Blocks {
                    data: 1,
                    from: 2,
                    owner: 3,
                },
                0,
            ),
            (Doomed::Xattrs { ino: 1 }, 1),
        ]);
        check_tags(&[(LockKind::Read, 0), (LockKind::Write, 1)]);
        check_tags(&[
            (XattrSet::Any, 0),
            (XattrSet::Create, 1),
            (XattrSet::Replace, 2),
        ]);
    }

    /// One value of every stored record type (and of a request, a result and some store
    /// keys), with the bytes this crate writes for it in log store format 1
    /// ([`crate::store::LOG_FORMAT`]). A change here needs a new format number.
    #[test]
    fn stored_records_keep_their_bytes() {
        let target = Target {
            ino: 5,
            generation: 6,
            kind: FileType::Symlink,
        };
        let owner = LockOwner {
            client: 1,
            owner: 2,
        };
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            (
                "superblock",
                encode(&Superblock {
                    clock_us: 1,
                    next_ino: 2,
                    next_generation: 3,
                    used_bytes: 4,
                    inodes: 5,
                }),
                "0102030405",
            ),
            (
                "inode",
                encode(&Inode {
                    generation: 1,
                    kind: FileType::Symlink,
                    mode: 0o777,
                    nlink: 2,
                    uid: 3,
                    gid: 4,
                    size: 5,
                    used: 6,
                    atime: T1,
                    mtime: Timestamp { secs: -1, nsecs: 9 },
                    ctime: T1,
                    parent: 7,
                    next_cookie: 8,
                    entries: 9,
                    target: b"ab".to_vec(),
                    rdev: 10,
                }),
                "0102ff0302030405060e0801090e080708090261620a",
            ),
            (
                "entry",
                encode(&EntryRec {
                    name: b"a".to_vec(),
                    target: target.clone(),
                }),
                "0161050602",
            ),
            ("name", encode(&NameRec { cookie: 3, target }), "03050602"),
            (
                "lease",
                encode(&Lease {
                    epoch: 1,
                    renewed_us: 2,
                }),
                "0102",
            ),
            (
                "delegation",
                encode(&Delegation {
                    client: 1,
                    epoch: 2,
                    recalled_us: Some(3),
                }),
                "01020103",
            ),
            ("recalls", encode(&vec![1u64, 300]), "0201ac02"),
            (
                "data",
                encode(&DataRec {
                    id: 300,
                    stale: Some(2),
                }),
                "ac020102",
            ),
            (
                "reclaim queue",
                encode(&Queue {
                    next: 3,
                    entries: 1,
                }),
                "0301",
            ),
            (
                "reclaim entry",
                encode(&Doomed::Blocks {
                    data: 300,
                    from: 64,
                    owner: 0,
                }),
                "00ac024000",
            ),
            (
                "waits",
                encode(&vec![Wait {
                    owner: 1,
                    ino: 2,
                    on: owner,
                    at_us: 3,
                }]),
                "010102010203",
            ),
            (
                "locks",
                encode(&vec![Held {
                    owner,
                    epoch: 3,
                    kind: LockKind::Write,
                    start: 4,
                    end: u64::MAX,
                    pid: 5,
                }]),
                "010102030104ffffffffffffffffff0105",
            ),
            (
                "request",
                Request::new(
                    Credentials {
                        uid: 1,
                        gid: 2,
                        groups: vec![3],
                    },
                    Op::WriteSetAttr {
                        fh: FH,
                        extents: vec![Extent {
                            offset: 1,
                            data: vec![2, 3],
                        }],
                        sets: vec![SetAttr {
                            mode: Some(0o600),
                            uid: None,
                            gid: Some(4),
                            size: Some(5),
                            atime: Some(SetTime::Now),
                            mtime: Some(SetTime::At(T1)),
                        }],
                    },
                )
                .encode(),
                // Last: the grant (#43), none here.
                "010201031a05060101020203010180030001040105010001010e0800",
            ),
            (
                "signed grant",
                encode(&crate::proto::grant::SignedGrant {
                    cert_id: 5,
                    grant: crate::proto::grant::Grant {
                        uids: crate::proto::grant::Ids::Ranges(vec![(1000, 1000)]),
                        gids: crate::proto::grant::Ids::Any,
                        root: false,
                        anon_uid: 65534,
                        anon_gid: 65534,
                    },
                    signature: vec![9; 64],
                }),
                "050101e807e8070000feff03feff0340\
                 0909090909090909090909090909090909090909090909090909090909090909\
                 0909090909090909090909090909090909090909090909090909090909090909",
            ),
            (
                // A wire format only (results are not stored here): `Attr::crypt` added.
                "result ok",
                encode_result(&Ok(Reply::Attr(attr()))),
                "0000050600a40301020304050e080e080e0809010a",
            ),
            ("result err", encode_result(&Err(Errno::ENOENT)), "0104"),
            (
                "reserved",
                encode(&crate::reserve::Reserved {
                    ranges: vec![crate::reserve::Range {
                        ino: 1,
                        generation: 2,
                        count: 3,
                        spent: 4,
                    }],
                }),
                "0101020304",
            ),
            (
                "key reserved",
                key::reserved(1),
                "5a400c219ae92bff100000000000000001",
            ),
            ("key superblock", key::superblock(), "f570a99a27348b6700"),
            (
                "key inode",
                key::inode(300),
                "5224f7e347c5b1e801000000000000012c",
            ),
            (
                "key name",
                key::name(1, b"a"),
                "8e91689904a27f5903000000000000000161",
            ),
            (
                "key data",
                key::data(300),
                "5224f7e347c5b1e80c000000000000012c",
            ),
            (
                "key reclaim",
                key::reclaim(1),
                "bafad270edc909890d0000000000000001",
            ),
            (
                "key reclaim queue",
                key::reclaim_queue(),
                "bafad270edc909890e",
            ),
            (
                "key block",
                key::block(2, 3),
                "12d0e4f6d528e19c0400000000000000020000000000000003",
            ),
        ];
        let wrong: Vec<String> = cases
            .into_iter()
            .filter(|(_, bytes, want)| hex(bytes) != *want)
            .map(|(what, bytes, want)| format!("{what}: {} (was {want})", hex(&bytes)))
            .collect();
        assert!(wrong.is_empty(), "changed encodings:\n{}", wrong.join("\n"));
    }

    proptest::proptest! {
        /// A delegation's, a lease's and a recall list's records as a disk may hand them
        /// back (random, or a valid record with bytes changed, cut or added): decoded or
        /// refused as corrupt, never a panic; a decoded one survives its own encoding
        /// (postcard takes over-long varints, so not always the same bytes).
        #[test]
        fn lock_records_from_a_hostile_disk_decode_or_are_refused(
            random in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            flips in proptest::collection::vec((0usize..32, proptest::prelude::any::<u8>()), 0..4),
            cut in 0usize..40,
            extra in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..4),
        ) {
            let valid = encode(&Delegation {
                client: 7,
                epoch: 300,
                recalled_us: Some(1_700_000_000_000_000),
            });
            let mut mutated = valid.clone();
            for (at, x) in &flips {
                if let Some(b) = mutated.get_mut(*at) {
                    *b ^= x;
                }
            }
            mutated.truncate(cut);
            mutated.extend(&extra);
            for bytes in [&random, &mutated] {
                if let Ok(d) = decode::<Delegation>(bytes) {
                    proptest::prop_assert_eq!(decode::<Delegation>(&encode(&d)).ok(), Some(d));
                }
                if let Ok(l) = decode::<Lease>(bytes) {
                    proptest::prop_assert_eq!(decode::<Lease>(&encode(&l)).ok(), Some(l));
                }
                let _ = decode::<Vec<u64>>(bytes);
            }
        }
    }
}
