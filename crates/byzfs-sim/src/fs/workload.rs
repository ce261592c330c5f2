//! The correct clients' file workload: random namespace and data operations over a few names
//! (`a`, `b`, ...) in the directories a client has seen, so that clients collide (one creates
//! what another removes, renames a directory another writes in, writes a file another
//! truncates, sets an extended attribute another removes, makes a symbolic link where another
//! creates a file), on handles that may have gone stale. Reads (read, readdir, lookup,
//! getattr, readlink, getxattr, listxattr) are sent read-only.
//! Writes are small, so no file outgrows what one operation may delete
//! (`byzfs_fs::reclaim::STEP_BLOCKS`) and the model need not know the reclaim queue; some are
//! big enough for separate request transmission.

use super::{credentials, grant, handles_in};
use crate::rng::{chance, SimRng};
use crate::workload::WorkloadParams;
use byzfs_bft::ClientId;
use byzfs_fs::proto::grant::SignedGrant;
use byzfs_fs::proto::op::XattrSet;
use byzfs_fs::{decode_result, FileHandle, FileType, Op, Request, SetAttr};
use rand::Rng;

/// Handles a client remembers at most (the oldest are forgotten first).
const KNOWN_MAX: usize = 48;
/// Modes a `chmod` sets: the owner keeps every right, so permissions never decide a result.
const MODES: [u32; 4] = [0o700, 0o755, 0o775, 0o777];

/// One correct client's operation generator.
#[derive(Debug)]
pub struct FsWorkload {
    params: WorkloadParams,
    client: ClientId,
    rng: SimRng,
    counter: u64,
    grant: SignedGrant,
    /// Handles seen, with their types, oldest first (the root always first).
    known: Vec<(FileHandle, FileType)>,
}

impl FsWorkload {
    /// A generator for `client` drawing from `rng` (its own stream).
    pub fn new(params: WorkloadParams, client: ClientId, rng: SimRng) -> FsWorkload {
        FsWorkload {
            params,
            client,
            rng,
            counter: 0,
            grant: grant(client),
            known: vec![(FileHandle::ROOT, FileType::Directory)],
        }
    }

    /// Think time before the next operation, µs (as the key-value workload's).
    pub fn think_us(&mut self, pacing: bool) -> u64 {
        if pacing && chance(&mut self.rng, self.params.pause_ppm) {
            return self.rng.gen_range(0..=self.params.pause_max_us);
        }
        self.rng.gen_range(0..=self.params.think_max_us)
    }

    fn name(&mut self) -> Vec<u8> {
        let n = self.rng.gen_range(0..self.params.keys.max(1)) as u8;
        vec![b'a' + n]
    }

    /// A known handle, of type `kind` three times in four when one is known.
    fn pick(&mut self, kind: FileType) -> FileHandle {
        let of_kind: Vec<FileHandle> = self
            .known
            .iter()
            .filter(|(_, k)| *k == kind)
            .map(|(h, _)| *h)
            .collect();
        if !of_kind.is_empty() && self.rng.gen_range(0..4) != 0 {
            return of_kind[self.rng.gen_range(0..of_kind.len())];
        }
        self.known[self.rng.gen_range(0..self.known.len())].0
    }

    /// A known handle of either type (extended attributes go on both).
    fn any(&mut self) -> FileHandle {
        self.known[self.rng.gen_range(0..self.known.len())].0
    }

    /// An extended attribute's name: `user.` and one of the workload's names, so clients
    /// collide on them as on file names.
    fn xattr_name(&mut self) -> Vec<u8> {
        [b"user.".as_slice(), &self.name()].concat()
    }

    fn dir(&mut self) -> FileHandle {
        self.pick(FileType::Directory)
    }

    fn file(&mut self) -> FileHandle {
        self.pick(FileType::Regular)
    }

    /// Bytes that say who wrote them, `len` long.
    fn data(&mut self, len: usize) -> Vec<u8> {
        let tag = format!("{}.{};", self.client, self.counter).into_bytes();
        tag.iter().copied().cycle().take(len).collect()
    }

    /// The next operation (an encoded request) and whether to send it read-only.
    pub fn next_op(&mut self) -> (Vec<u8>, bool) {
        self.counter += 1;
        let roll = self.rng.gen_range(0..1000);
        let op = match roll {
            0..150 => Op::Create {
                dir: self.dir(),
                name: self.name(),
                mode: 0o644,
                exclusive: self.rng.gen_bool(0.5),
            },
            150..230 => Op::Mkdir {
                dir: self.dir(),
                name: self.name(),
                mode: 0o755,
            },
            230..380 => {
                let fh = self.file();
                let offset = if self.rng.gen_bool(0.5) {
                    self.rng.gen_range(0..64)
                } else {
                    self.rng.gen_range(0..20_000)
                };
                let len = if chance(&mut self.rng, self.params.big_put_ppm) {
                    self.rng.gen_range(1_000..=3_000)
                } else {
                    self.rng.gen_range(1..=40)
                };
                Op::Write {
                    fh,
                    offset,
                    data: self.data(len),
                }
            }
            380..430 => Op::SetAttr {
                fh: self.file(),
                set: SetAttr {
                    size: Some(self.rng.gen_range(0..24_000)),
                    ..SetAttr::default()
                },
            },
            430..460 => Op::SetAttr {
                fh: self.pick(FileType::Directory),
                set: SetAttr {
                    mode: Some(MODES[self.rng.gen_range(0..MODES.len())]),
                    ..SetAttr::default()
                },
            },
            460..520 => Op::Remove {
                dir: self.dir(),
                name: self.name(),
            },
            520..560 => Op::Rmdir {
                dir: self.dir(),
                name: self.name(),
            },
            560..640 => Op::Rename {
                from_dir: self.dir(),
                from_name: self.name(),
                to_dir: self.dir(),
                to_name: self.name(),
            },
            640..660 => Op::RenameNoReplace {
                from_dir: self.dir(),
                from_name: self.name(),
                to_dir: self.dir(),
                to_name: self.name(),
            },
            660..680 => Op::Exchange {
                a_dir: self.dir(),
                a_name: self.name(),
                b_dir: self.dir(),
                b_name: self.name(),
            },
            680..700 => Op::Link {
                fh: self.file(),
                dir: self.dir(),
                name: self.name(),
            },
            700..800 => Op::Read {
                fh: self.file(),
                offset: if self.rng.gen_bool(0.7) {
                    0
                } else {
                    self.rng.gen_range(0..20_000)
                },
                count: self.rng.gen_range(1..=30_000),
            },
            800..880 => Op::ReadDir {
                dir: self.dir(),
                cookie: 0,
                max_entries: 64,
            },
            880..930 => Op::Lookup {
                dir: self.dir(),
                name: self.name(),
            },
            930..945 => {
                let how =
                    [XattrSet::Any, XattrSet::Create, XattrSet::Replace][self.rng.gen_range(0..3)];
                let len = self.rng.gen_range(0..=24);
                Op::SetXattr {
                    fh: self.any(),
                    name: self.xattr_name(),
                    value: self.data(len),
                    how,
                }
            }
            945..953 => Op::RemoveXattr {
                fh: self.any(),
                name: self.xattr_name(),
            },
            953..965 => Op::GetXattr {
                fh: self.any(),
                name: self.xattr_name(),
            },
            965..972 => Op::ListXattr { fh: self.any() },
            972..984 => {
                let len = self.rng.gen_range(1..=12);
                Op::Symlink {
                    dir: self.dir(),
                    name: self.name(),
                    target: self.data(len),
                }
            }
            984..992 => Op::ReadLink {
                fh: self.pick(FileType::Symlink),
            },
            _ => Op::GetAttr {
                fh: self.pick(FileType::Regular),
            },
        };
        let ro = op.is_read_only();
        let req = Request::granted(credentials(), op, self.grant.clone());
        (req.encode(), ro)
    }

    /// Learns the handles a completed operation's result names.
    pub fn observe(&mut self, result: &[u8]) {
        let Some(Ok(reply)) = decode_result(result) else {
            return;
        };
        for (h, k) in handles_in(&reply) {
            if !self.known.iter().any(|(x, _)| *x == h) {
                if self.known.len() >= KNOWN_MAX {
                    // Keep the root.
                    self.known.remove(1);
                }
                self.known.push((h, k));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{substream, Purpose};

    #[test]
    fn reproducible_and_reads_go_read_only() {
        let p = WorkloadParams {
            keys: 3,
            think_max_us: 10,
            pause_max_us: 0,
            pause_ppm: 0,
            big_put_ppm: 200_000,
            big_put_max: 300,
            read_apart: false,
        };
        let mut a = FsWorkload::new(p.clone(), 100, substream(9, Purpose::Workload, 1));
        let mut b = FsWorkload::new(p, 100, substream(9, Purpose::Workload, 1));
        let ops: Vec<_> = (0..500).map(|_| a.next_op()).collect();
        let again: Vec<_> = (0..500).map(|_| b.next_op()).collect();
        assert_eq!(ops, again);
        assert!(ops.iter().all(|(o, ro)| *ro == super::super::is_read(o)));
        assert!(ops.iter().filter(|(_, ro)| *ro).count() > 100);
    }
}
