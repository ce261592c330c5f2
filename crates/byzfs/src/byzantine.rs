//! **Test-only fault injection** (`byzfs replica --byzantine …`, a hidden flag, only in builds
//! with the feature `byzantine`, which `scripts/test.sh` turns on and release builds lack):
//! behaviours of a Byzantine replica, for the fault tests. Never use it on a real cluster.
//!
//! * `lie-replies`: every reply this replica sends to a client carries a wrong result under a
//!   valid MAC (the runtime re-encodes it: [`byzfs_net::LieToClients`]). For the file service
//!   the lie is a well-formed result: read data with every byte changed, attributes with a
//!   wrong size, mode, owner, link count and times, directory listings with renamed entries,
//!   success turned into an error and the reverse. Its state and its votes stay correct, so
//!   only the client's reply voting stands between the lie and the application.
//! * `old-snapshot`: every read answered as the first identical one was, by the service
//!   itself (`old_snapshot.rs`), so the lie is consistent and its digests agree.
//! * `--attack MODE` (a separate flag): attacks on the cluster's throughput for `byzfs bench
//!   attack` ([`byzfs_net::ReplicaAttack`]): a slow or equivocating primary, floods of
//!   garbage or of replayed old frames, view-change spam.
//! * `stale-replies`: a rollback. Every file's attributes are answered with the first ones
//!   this replica reported for it — an old size, old times, an old sealed header of an
//!   encrypted file — correctly MACed; everything else is told as it is. Its state and
//!   votes stay correct.

use byzfs_fs::{decode_result, encode_result, Attr, Errno, FileHandle, FsResult, Reply, Timestamp};
use byzfs_net::LieToClients;
use clap::ValueEnum;

/// A Byzantine behaviour (test-only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Byzantine {
    /// Send clients wrong results (data and attributes) with valid MACs.
    LieReplies,
    /// Send clients each file's first attributes for ever (a rollback), with valid MACs.
    StaleReplies,
    /// Answer every read as the first identical one (an old snapshot, consistent in itself;
    /// file service only: `old_snapshot.rs`).
    OldSnapshot,
}

/// An attack on the cluster's throughput (test-only; `byzfs bench attack`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Attack {
    /// As primary, hold every PRE-PREPARE for 90 % of the view-change timeout.
    SlowPrimary,
    /// As primary, send half the backups a different PRE-PREPARE for each slot.
    Equivocate,
    /// Flood the other replicas with garbage frames.
    Garbage,
    /// Flood the other replicas with replays of old, genuine frames.
    Replay,
    /// Send the other replicas signed VIEW-CHANGEs for ever higher views.
    VcSpam,
}

impl Attack {
    /// The runtime's attack.
    pub fn runtime(self) -> byzfs_net::ReplicaAttack {
        match self {
            Attack::SlowPrimary => byzfs_net::ReplicaAttack::SlowPrimary,
            Attack::Equivocate => byzfs_net::ReplicaAttack::Equivocate,
            Attack::Garbage => byzfs_net::ReplicaAttack::Garbage,
            Attack::Replay => byzfs_net::ReplicaAttack::Replay,
            Attack::VcSpam => byzfs_net::ReplicaAttack::ViewChangeSpam,
        }
    }
}

/// The liar `chosen` asks for (`None`: an honest replica); says so in the log.
pub fn chosen(chosen: Option<Byzantine>, service: &str, replica: u32) -> Option<LieToClients> {
    let liar = chosen.and_then(|b| match b {
        Byzantine::LieReplies => Some(liar(service)),
        Byzantine::StaleReplies => Some(stale()),
        // Lies in the service's results, not in the replies (`old_snapshot.rs`).
        Byzantine::OldSnapshot => None,
    });
    if liar.is_some() {
        tracing::warn!(
            replica,
            "TEST-ONLY fault injection: this replica sends wrong results to clients"
        );
    }
    liar
}

/// Logs the lies `liar` told (the fault tests read the counts).
pub fn report(liar: Option<&LieToClients>, replica: u32) {
    use std::sync::atomic::Ordering::Relaxed;
    if let Some(l) = liar {
        tracing::info!(
            replica,
            full_small = l.told.full_small.load(Relaxed),
            full_large = l.told.full_large.load(Relaxed),
            digest_only = l.told.digest_only.load(Relaxed),
            "byzantine test mode: lies told"
        );
    }
}

/// The runtime's liar for `service` (`"fs"`: file-service-aware lies; else every byte of the
/// result changed).
pub fn liar(service: &str) -> LieToClients {
    if service == "fs" {
        LieToClients::new(corrupt_fs_result)
    } else {
        LieToClients::new(corrupt_bytes)
    }
}

/// The `stale-replies` liar: each file's attributes as first reported (file service).
pub fn stale() -> LieToClients {
    let first: std::sync::Mutex<std::collections::HashMap<FileHandle, Attr>> =
        std::sync::Mutex::default();
    LieToClients::new(move |b: &[u8]| {
        let Some(Ok(mut reply)) = decode_result(b) else {
            return b.to_vec();
        };
        let Ok(mut first) = first.lock() else {
            return b.to_vec();
        };
        // Each attribute replaced by the first held for its file (recording new ones).
        reply.for_each_attr_mut(&mut |a| {
            *a = first.entry(a.fh).or_insert_with(|| a.clone()).clone();
        });
        encode_result(&Ok(reply))
    })
}

fn corrupt_bytes(b: &[u8]) -> Vec<u8> {
    if b.is_empty() {
        return b"lie".to_vec();
    }
    b.iter().map(|x| !x).collect()
}

fn corrupt_attr(a: &mut Attr) {
    a.size = a.size.wrapping_mul(3).wrapping_add(4097);
    a.used = a.used.wrapping_add(8192);
    a.mode ^= 0o777;
    a.nlink = a.nlink.wrapping_add(7);
    a.uid = a.uid.wrapping_add(4242);
    a.gid = a.gid.wrapping_add(4242);
    let later = |t: Timestamp| Timestamp {
        secs: t.secs.wrapping_add(86_400 * 365),
        nsecs: t.nsecs,
    };
    a.atime = later(a.atime);
    a.mtime = later(a.mtime);
    a.ctime = later(a.ctime);
    // An encrypted file's sealed header with every bit flipped: it must never open.
    for b in &mut a.crypt {
        *b = !*b;
    }
}

/// A believable wrong file-service result.
pub fn corrupt_fs_result(b: &[u8]) -> Vec<u8> {
    let Some(r) = decode_result(b) else {
        return corrupt_bytes(b);
    };
    let lie: FsResult = match r {
        Ok(Reply::Attr(mut a)) => {
            corrupt_attr(&mut a);
            Ok(Reply::Attr(a))
        }
        Ok(Reply::Entry(mut a)) => {
            corrupt_attr(&mut a);
            Ok(Reply::Entry(a))
        }
        Ok(Reply::Done) => Err(Errno::EIO),
        // Work left where there is none (and none where there is): a mount would send
        // steps for ever, or stop early.
        Ok(Reply::Seek { at, done }) => Ok(Reply::Seek {
            at: at.wrapping_add(4096),
            done,
        }),
        Ok(Reply::Reclaimed { blocks, more }) => Ok(Reply::Reclaimed {
            blocks: blocks.wrapping_add(1),
            more: !more,
        }),
        Ok(Reply::ReadLink(t)) => Ok(Reply::ReadLink(corrupt_link(&t))),
        Ok(Reply::Read { data, eof }) => Ok(Reply::Read {
            data: if data.is_empty() {
                b"lie".to_vec()
            } else {
                data.iter().map(|x| x.wrapping_add(1)).collect()
            },
            eof: !eof && data.is_empty(),
        }),
        Ok(Reply::Write { count, mut attr }) => {
            corrupt_attr(&mut attr);
            Ok(Reply::Write {
                count: count / 2,
                attr,
            })
        }
        Ok(Reply::ReadDir { mut entries, eof }) => {
            for e in &mut entries {
                if e.name != b"." && e.name != b".." {
                    e.name.push(b'~');
                }
            }
            Ok(Reply::ReadDir { entries, eof })
        }
        // Handles another session was given: the mount would create files over them.
        Ok(Reply::Reserved { first, count }) => Ok(Reply::Reserved {
            first: FileHandle {
                ino: first.ino.wrapping_sub(1),
                generation: first.generation,
            },
            count,
        }),
        // An older key version with another writer key: a reader trusting this replica
        // alone would accept a revoked writer's files.
        Ok(Reply::Group(Some(mut g))) => {
            g.record.version = g.record.version.saturating_sub(1);
            g.record.writer[0] ^= 1;
            Ok(Reply::Group(Some(g)))
        }
        Ok(Reply::Group(None)) => Ok(Reply::Group(Some(byzfs_fs::proto::group::SignedGroup {
            record: byzfs_fs::proto::group::GroupRecord {
                owner: [1; 32],
                name: "default".into(),
                version: 1,
                writer: [2; 32],
                lockboxes: Vec::new(),
            },
            signature: vec![3; 64],
        }))),
        // A plain file told encrypted and the other way round: the mount would show
        // ciphertext or refuse to decrypt.
        Ok(Reply::FileGroup(Some(_))) => Ok(Reply::FileGroup(None)),
        Ok(Reply::FileGroup(None)) => Ok(Reply::FileGroup(Some([3; 16]))),
        // A used sequence number: the mount's next signed request would be refused.
        Ok(Reply::WriterSeq(n)) => Ok(Reply::WriterSeq(n.wrapping_add(1))),
        // One member's reply told wrong, the rest as they were.
        Ok(Reply::Batch(mut replies)) => {
            if let Some(last) = replies.pop() {
                let told = encode_result(&Ok(last));
                let lie = decode_result(&corrupt_fs_result(&told)).and_then(Result::ok);
                replies.extend(lie);
            }
            Ok(Reply::Batch(replies))
        }
        Ok(Reply::StatFs(mut s)) => {
            s.blocks_free = s.blocks_free.wrapping_add(12345);
            s.files_free = s.files_free.wrapping_add(12345);
            Ok(Reply::StatFs(s))
        }
        Ok(Reply::Xattr(mut v)) => {
            v.push(b'~');
            Ok(Reply::Xattr(v))
        }
        Ok(Reply::Made { mut entry, mut dir }) => {
            corrupt_attr(&mut entry);
            corrupt_attr(&mut dir);
            Ok(Reply::Made { entry, dir })
        }
        Ok(Reply::Unlinked { mut dir, ino, left }) => {
            corrupt_attr(&mut dir);
            let left = match left {
                Some(_) => None,
                None => Some(dir.clone()),
            };
            Ok(Reply::Unlinked {
                dir,
                ino: ino.wrapping_add(1),
                left,
            })
        }
        Ok(Reply::Lock {
            conflict,
            lapsed,
            mut attr,
        }) => {
            if let Some(a) = &mut attr {
                corrupt_attr(a);
            }
            Ok(Reply::Lock {
                // A lock that is not there, or none where there is one.
                conflict: match conflict {
                    Some(_) => None,
                    None => Some(byzfs_fs::proto::lock::LockInfo {
                        kind: byzfs_fs::proto::lock::LockKind::Write,
                        start: 0,
                        end: byzfs_fs::proto::lock::LOCK_END_MAX,
                        pid: 1,
                        client: 0,
                    }),
                },
                lapsed: !lapsed,
                attr,
            })
        }
        // A recall where there is none, and a delegation where there is one.
        Ok(Reply::Recall) => Ok(Reply::Recalls(vec![1])),
        Ok(Reply::Delegated { .. }) => Ok(Reply::Recall),
        // No deadlock where there is one.
        Ok(Reply::Deadlock { lapsed }) => Ok(Reply::Lock {
            conflict: None,
            lapsed,
            attr: None,
        }),
        // A sweep that never ends, or one cut short.
        Ok(Reply::Swept { removed, next }) => Ok(Reply::Swept {
            removed: removed.wrapping_add(1),
            next: match next {
                Some(_) => None,
                None => Some(0),
            },
        }),
        Ok(Reply::Recalls(mut inos)) => {
            if inos.pop().is_none() {
                inos.push(byzfs_fs::proto::handle::ROOT_INO);
            }
            Ok(Reply::Recalls(inos))
        }
        Err(Errno::ENOENT) => Ok(Reply::Done),
        Err(_) => Err(Errno::ENOENT),
    };
    encode_result(&lie)
}

fn corrupt_link(t: &[u8]) -> Vec<u8> {
    let mut t = t.to_vec();
    t.extend_from_slice(b"-lie");
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use byzfs_fs::{FileHandle, FileType};

    fn attr() -> Attr {
        Attr {
            fh: FileHandle::ROOT,
            kind: FileType::Regular,
            mode: 0o644,
            nlink: 1,
            uid: 0,
            gid: 0,
            size: 10,
            used: 10,
            atime: Timestamp::default(),
            mtime: Timestamp::default(),
            ctime: Timestamp::default(),
            rdev: 0,
            crypt: vec![1, 2],
        }
    }

    #[test]
    fn the_stale_liar_answers_each_files_first_attributes_for_ever() {
        let liar = stale();
        let told = |a: Attr| decode_result(&(liar.corrupt)(&encode_result(&Ok(Reply::Attr(a)))));
        let first = attr();
        let mut later = attr();
        later.size = 99;
        later.crypt = vec![9];
        assert_eq!(told(first.clone()), Some(Ok(Reply::Attr(first.clone()))));
        assert_eq!(told(later.clone()), Some(Ok(Reply::Attr(first.clone()))));
        let mut other = later.clone();
        other.fh = FileHandle {
            ino: 5,
            generation: 1,
        };
        assert_eq!(told(other.clone()), Some(Ok(Reply::Attr(other))));
        let read = encode_result(&Ok(Reply::Read {
            data: vec![1],
            eof: true,
        }));
        assert_eq!((liar.corrupt)(&read), read);
    }

    #[test]
    fn every_fs_result_is_changed_into_another_well_formed_one() {
        let results: Vec<FsResult> = vec![
            Ok(Reply::Attr(attr())),
            Ok(Reply::Entry(attr())),
            Ok(Reply::Made {
                entry: attr(),
                dir: attr(),
            }),
            Ok(Reply::Unlinked {
                dir: attr(),
                ino: 5,
                left: None,
            }),
            Ok(Reply::Unlinked {
                dir: attr(),
                ino: 5,
                left: Some(attr()),
            }),
            Ok(Reply::Done),
            Ok(Reply::ReadLink(b"t".to_vec())),
            Ok(Reply::Read {
                data: vec![0, 255, 7],
                eof: true,
            }),
            Ok(Reply::Read {
                data: vec![],
                eof: true,
            }),
            Ok(Reply::Write {
                count: 3,
                attr: attr(),
            }),
            Err(Errno::ENOENT),
            Err(Errno::EACCES),
        ];
        for r in results {
            let b = encode_result(&r);
            let lie = corrupt_fs_result(&b);
            assert_ne!(lie, b, "{r:?}");
            assert!(decode_result(&lie).is_some(), "{r:?}");
        }
        assert_ne!(corrupt_fs_result(b"x"), b"x");
    }
}
