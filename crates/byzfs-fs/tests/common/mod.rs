//! Test harness: a file service driven through the `Service` trait's byte interface, with an
//! agreed clock that advances by one second per mutating operation.
#![allow(dead_code)]

use byzfs_bft::Service;
use byzfs_fs::{
    decode_result, Attr, Credentials, DirEntry, Errno, FileHandle, FileService, FsConfig, FsResult,
    Op, Reply, Request, SetAttr,
};

pub const ROOT: FileHandle = FileHandle::ROOT;
/// Agreed time of the first operation (µs).
pub const T0: u64 = 1_700_000_000_000_000;

pub struct Fs {
    pub s: FileService,
    pub clock_us: u64,
    pub cred: Credentials,
}

pub fn small_config() -> FsConfig {
    FsConfig {
        partitions: 64,
        ..FsConfig::trusted()
    }
}

impl Fs {
    pub fn new() -> Fs {
        Fs::with_config(small_config())
    }

    pub fn with_config(cfg: FsConfig) -> Fs {
        Fs {
            s: FileService::in_memory(cfg),
            clock_us: T0,
            cred: Credentials::root(),
        }
    }

    /// Runs `op` as `cred` through the encoded interface; read-only ops take the read-only
    /// path, and also give the same answer when ordered (checked on a clone of nothing: the
    /// ordered path is exercised by `run_ordered`).
    pub fn run_as(&mut self, cred: &Credentials, op: Op) -> FsResult {
        let bytes = Request::new(cred.clone(), op).encode();
        let out = if self.s.is_read_only(&bytes) {
            self.s.execute_read_only(9, &bytes)
        } else {
            self.clock_us += 1_000_000;
            self.s.execute(9, &bytes, &self.clock_us.to_le_bytes())
        };
        decode_result(&out).expect("result decodes")
    }

    /// Runs `op` through the ordered path even if it is read-only.
    pub fn run_ordered(&mut self, op: Op) -> FsResult {
        let bytes = Request::new(self.cred.clone(), op).encode();
        self.clock_us += 1_000_000;
        decode_result(&self.s.execute(9, &bytes, &self.clock_us.to_le_bytes())).unwrap()
    }

    /// Runs `op` through the ordered path as client `client` (locks belong to clients).
    pub fn run_client(&mut self, client: u64, op: Op) -> FsResult {
        let bytes = Request::new(self.cred.clone(), op).encode();
        self.clock_us += 1_000_000;
        decode_result(&self.s.execute(client, &bytes, &self.clock_us.to_le_bytes())).unwrap()
    }

    pub fn run(&mut self, op: Op) -> FsResult {
        let cred = self.cred.clone();
        self.run_as(&cred, op)
    }

    pub fn entry(r: FsResult) -> Attr {
        match r.as_ref().ok().and_then(Reply::entry) {
            Some(a) => a.clone(),
            None => panic!("expected an entry, got {r:?}"),
        }
    }

    pub fn create(&mut self, dir: FileHandle, name: &str) -> Attr {
        Self::entry(self.run(Op::Create {
            dir,
            name: name.into(),
            mode: 0o644,
            exclusive: true,
        }))
    }

    pub fn mkdir(&mut self, dir: FileHandle, name: &str) -> Attr {
        Self::entry(self.run(Op::Mkdir {
            dir,
            name: name.into(),
            mode: 0o755,
        }))
    }

    pub fn lookup(&mut self, dir: FileHandle, name: &str) -> FsResult {
        self.run(Op::Lookup {
            dir,
            name: name.into(),
        })
    }

    pub fn getattr(&mut self, fh: FileHandle) -> Attr {
        match self.run(Op::GetAttr { fh }) {
            Ok(Reply::Attr(a)) => a,
            other => panic!("getattr: {other:?}"),
        }
    }

    pub fn write(&mut self, fh: FileHandle, offset: u64, data: &[u8]) -> FsResult {
        self.run(Op::Write {
            fh,
            offset,
            data: data.to_vec(),
        })
    }

    pub fn read(&mut self, fh: FileHandle, offset: u64, count: u32) -> Vec<u8> {
        match self.run(Op::Read { fh, offset, count }) {
            Ok(Reply::Read { data, .. }) => data,
            other => panic!("read: {other:?}"),
        }
    }

    pub fn truncate(&mut self, fh: FileHandle, size: u64) -> FsResult {
        self.run(Op::SetAttr {
            fh,
            set: SetAttr {
                size: Some(size),
                ..SetAttr::default()
            },
        })
    }

    /// Every entry of `dir` (without `.` and `..`), listing `page` entries at a time.
    pub fn list(&mut self, dir: FileHandle, page: u32) -> Vec<DirEntry> {
        let mut out = Vec::new();
        let mut cookie = 0;
        loop {
            match self.run(Op::ReadDir {
                dir,
                cookie,
                max_entries: page,
            }) {
                Ok(Reply::ReadDir { entries, eof }) => {
                    if let Some(l) = entries.last() {
                        cookie = l.cookie;
                    }
                    out.extend(entries.into_iter().filter(|e| e.cookie > 2));
                    if eof {
                        return out;
                    }
                }
                other => panic!("readdir: {other:?}"),
            }
        }
    }

    pub fn names(&mut self, dir: FileHandle) -> Vec<String> {
        self.list(dir, 100)
            .into_iter()
            .map(|e| String::from_utf8_lossy(&e.name).into_owned())
            .collect()
    }

    /// Records in the store.
    pub fn records(&self) -> usize {
        self.s.store().len()
    }

    /// A canonical dump of the whole tree: path → (kind, mode, size, nlink, content).
    pub fn dump(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        self.dump_dir(ROOT, "", &mut out);
        out
    }

    fn dump_dir(&mut self, dir: FileHandle, path: &str, out: &mut Vec<String>) {
        for e in self.list(dir, 7) {
            let p = format!("{path}/{}", String::from_utf8_lossy(&e.name));
            let a = self.getattr(e.fh);
            let content = match a.kind {
                byzfs_fs::FileType::Regular => {
                    let d = self.read(e.fh, 0, u32::MAX);
                    format!("{:?}", blake3::hash(&d))
                }
                byzfs_fs::FileType::Symlink => match self.run(Op::ReadLink { fh: e.fh }) {
                    Ok(Reply::ReadLink(t)) => String::from_utf8_lossy(&t).into_owned(),
                    other => panic!("{other:?}"),
                },
                _ => String::new(),
            };
            out.push(format!(
                "{p} {:?} {:o} size={} nlink={} uid={} mtime={:?} {content}",
                a.kind, a.mode, a.size, a.nlink, a.uid, a.mtime
            ));
            if a.kind == byzfs_fs::FileType::Directory {
                self.dump_dir(e.fh, &p, out);
            }
        }
    }
}

pub fn err(e: Errno) -> FsResult {
    Err(e)
}

/// Asserts `r` granted a delegation of a directory or a file (no locks).
#[track_caller]
pub fn delegated(r: FsResult) {
    assert!(
        matches!(r, Ok(Reply::Delegated { ref mine, .. }) if mine.is_empty()),
        "{r:?}"
    );
}

/// The recall list of `client`.
pub fn recalls(fs: &mut Fs, client: u64) -> Vec<u64> {
    match fs.run_client(client, Op::Recalls) {
        Ok(Reply::Recalls(l)) => l,
        other => panic!("{other:?}"),
    }
}

/// A lock request of `owner` (its pid is `100 + owner`).
pub fn req(
    fh: FileHandle,
    owner: u64,
    kind: Option<byzfs_fs::proto::lock::LockKind>,
    start: u64,
    end: u64,
) -> byzfs_fs::proto::lock::LockReq {
    byzfs_fs::proto::lock::LockReq {
        fh,
        owner,
        kind,
        start,
        end,
        pid: 100 + owner as u32,
    }
}
