//! The crypto layer run over a file service in memory ([`Memory`], a [`Transport`]):
//! without FUSE, replicas or a network, so that what the layer sends, and what the replicas
//! then hold, can be checked exactly (issue #45 item 1).

use crate::crypt::Crypt;
use crate::crypt_nodes::FileNodes;
use crate::transport::Transport;
use byzfs_bft::Service;
use byzfs_crypt::file::{self, DirHeader};
use byzfs_crypt::member::{open_mine, seal_record, Identity, Role};
use byzfs_fs::proto::group::{signed_bytes, GroupRecord};
use byzfs_fs::proto::signed::sign_with_headers;
use byzfs_fs::{
    decode_result, Credentials, Errno, FileHandle, FileService, FsConfig, FsResult, Op, Reply,
    Request, SetAttr,
};
use ed25519_dalek::Signer;
use std::collections::VecDeque;

const CLUSTER: [u8; 16] = [7; 16];
const CLIENT: u64 = 9;

/// One file service in memory, answering as a whole cluster would.
struct Memory {
    s: FileService,
    clock_us: u64,
    reserved: VecDeque<FileHandle>,
    /// Operations sent ordered and read-only, by name, in order.
    sent: Vec<String>,
}

impl Memory {
    fn new() -> Memory {
        Memory {
            s: FileService::in_memory(FsConfig {
                partitions: 16,
                cluster_id: CLUSTER,
                ..FsConfig::trusted()
            }),
            clock_us: 1_700_000_000_000_000,
            reserved: VecDeque::new(),
            sent: Vec::new(),
        }
    }
}

impl Transport for Memory {
    fn transmit(&mut self, cred: &Credentials, op: Op, read_only: bool) -> FsResult {
        let name = match &op {
            Op::Signed { op, expect, .. } => {
                format!("signed {} expecting {}", op.name(), expect.len())
            }
            op => op.name().to_string(),
        };
        let bytes = Request::new(cred.clone(), op).encode();
        let out = if read_only && self.s.is_read_only(&bytes) {
            self.sent.push(format!("{name} (read-only)"));
            self.s.execute_read_only(CLIENT, &bytes)
        } else {
            self.sent.push(name);
            self.clock_us += 1_000_000;
            self.s.execute(CLIENT, &bytes, &self.clock_us.to_le_bytes())
        };
        decode_result(&out).unwrap_or(Err(Errno::EIO))
    }

    fn strict(&self) -> bool {
        false
    }

    fn granted(&self, cred: &Credentials) -> Credentials {
        cred.clone()
    }

    fn new_handle(&mut self, cred: &Credentials) -> Result<FileHandle, Errno> {
        if self.reserved.is_empty() {
            match self.transmit(cred, Op::ReserveInodes { count: 8 }, false)? {
                Reply::Reserved { first, count } => {
                    self.reserved
                        .extend((0..u64::from(count)).map(|k| FileHandle {
                            ino: first.ino + k,
                            generation: first.generation + k,
                        }));
                }
                _ => return Err(Errno::EIO),
            }
        }
        self.reserved.pop_front().ok_or(Errno::EIO)
    }
}

/// A writer's crypto layer over `mem`, on group `g`'s tree `/t` (made here as the first
/// writer's mount makes it, `crypt_tree::make_tree`).
fn writer_layer(mem: &mut Memory) -> Crypt {
    let me = Identity::from_secrets([3; 32], [4; 32]);
    let g = me.group_ref(&CLUSTER, "g");
    let members = [(me.member_key(), Role::Writer)];
    let (writer, lockboxes) =
        seal_record(&me, &g, 1, &members, &mut rand_core::OsRng).expect("record");
    let record = GroupRecord {
        owner: me.owner_key(),
        name: "g".into(),
        version: 1,
        writer,
        lockboxes: lockboxes.clone(),
    };
    let signature = me
        .signing_key()
        .sign(&signed_bytes(&CLUSTER, &g.group, &record))
        .to_bytes()
        .to_vec();
    let cred = crate::own_credentials();
    let put = Op::GroupPut {
        group: g.group,
        record,
        signature,
    };
    assert_eq!(mem.transmit(&cred, put, false), Ok(Reply::Done));
    let mine = open_mine(&me, &g, &lockboxes, 1, &writer).expect("a member");
    let mut crypt = Crypt::new(me, g, mine, CLIENT, 0);
    let at = mem.new_handle(&cred).expect("a handle");
    let id = file::file_id(at.ino, at.generation);
    let h = DirHeader {
        names: crypt.keys.version(),
    };
    let header = file::seal_dir_header(&crypt.keys, &id, h, &mut rand_core::OsRng);
    crypt.seq += 1;
    let (w, _) = crypt.writer.clone().expect("a writer");
    let make = Op::Batch(vec![
        Op::MakeAt {
            time: None,
            at,
            make: Box::new(Op::Mkdir {
                dir: FileHandle::ROOT,
                name: b"t".to_vec(),
                mode: 0o755,
            }),
        },
        Op::SetGroup {
            dir: at,
            group: crypt.g.group,
        },
    ]);
    let op = sign_with_headers(
        &w,
        &crypt.g.cluster,
        &[crypt.g.group],
        crypt.keys.version(),
        crypt.client,
        crypt.seq,
        &cred,
        make,
        vec![(at, header)],
        Vec::new(),
    );
    assert!(mem.transmit(&cred, op, false).is_ok());
    crypt.top = at;
    crypt
}

fn call(crypt: &mut Crypt, mem: &mut Memory, op: Op) -> FsResult {
    let read_only = op.is_read_only();
    crypt.call(mem, &crate::own_credentials(), op, read_only)
}

fn entry(r: FsResult) -> FileHandle {
    match r {
        Ok(Reply::Entry(a)) | Ok(Reply::Made { entry: a, .. }) => a.fh,
        other => panic!("expected an entry, got {other:?}"),
    }
}

/// What a mount that starts afresh reads of `fh`: its size and contents.
fn read_afresh(mem: &mut Memory, crypt: &mut Crypt, fh: FileHandle) -> (u64, FsResult) {
    crypt.files.clear();
    crypt.sizes.clear();
    let size = match call(crypt, mem, Op::GetAttr { fh }) {
        Ok(Reply::Attr(a)) => a.size,
        other => panic!("getattr: {other:?}"),
    };
    let data = call(
        crypt,
        mem,
        Op::Read {
            fh,
            offset: 0,
            count: 4096,
        },
    );
    (size, data)
}

/// A truncation the mount believes changes nothing (its header for the file is stale: it
/// thinks the file empty) still carries the header it was built on: the replicas answer
/// `ESTALE` and the mount builds it again on theirs, instead of the replicas cutting the
/// data under the old header, which no reader could check any more (`crypt_data.rs`
/// `seal_change`; the encrypted git run's "a tree node that does not match the signed
/// root").
#[test]
fn a_truncation_on_a_stale_header_is_refused_and_built_again() {
    let mut mem = Memory::new();
    let mut crypt = writer_layer(&mut mem);
    let f = entry(call(
        &mut crypt,
        &mut mem,
        Op::Create {
            dir: FileHandle::ROOT,
            name: b"f".to_vec(),
            mode: 0o644,
            exclusive: true,
        },
    ));
    let w = Op::Write {
        fh: f,
        offset: 0,
        data: b"hello, world".to_vec(),
    };
    assert!(call(&mut crypt, &mut mem, w).is_ok());
    assert_eq!(
        read_afresh(&mut mem, &mut crypt, f),
        (
            12,
            Ok(Reply::Read {
                data: b"hello, world".to_vec(),
                eof: true
            })
        )
    );

    // The stale belief: the file as it was made, empty and without a header.
    crypt.files.insert(f.ino, FileNodes::empty());
    crypt.sizes.insert(f.ino, 0);
    mem.sent.clear();
    let cut = Op::SetAttr {
        fh: f,
        set: SetAttr {
            size: Some(0),
            ..SetAttr::default()
        },
    };
    assert!(call(&mut crypt, &mut mem, cut).is_ok());
    assert_eq!(
        mem.sent,
        vec![
            // Refused: the replicas hold another header.
            "signed setattr expecting 1".to_string(),
            // Tried again with the header and nodes read ordered, not read-only.
            "getattr".to_string(),
            "read_gather".to_string(),
            "signed setattr expecting 1".to_string(),
        ]
    );
    assert_eq!(
        read_afresh(&mut mem, &mut crypt, f),
        (
            0,
            Ok(Reply::Read {
                data: Vec::new(),
                eof: true
            })
        )
    );
}
