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
    /// The client the requests come from (proofs are bound to it).
    client: u64,
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
            client: CLIENT,
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
            self.s.execute_read_only(self.client, &bytes)
        } else {
            self.sent.push(name);
            self.clock_us += 1_000_000;
            self.s
                .execute(self.client, &bytes, &self.clock_us.to_le_bytes())
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

/// File `f` made at the tree's root through `crypt`: its handle.
fn create_f(crypt: &mut Crypt, mem: &mut Memory) -> FileHandle {
    let make = Op::Create {
        dir: FileHandle::ROOT,
        name: b"f".to_vec(),
        mode: 0o644,
        exclusive: true,
    };
    entry(call(crypt, mem, make))
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
    let f = create_f(&mut crypt, &mut mem);
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

/// An encrypted read in a lane (`crypt_read_lane.rs`): one gathered read, its blocks
/// opened apart from the layer, answers what the locked path answers; a read it cannot
/// plan as one request, a header changed while it was on its way, a node or a block a
/// replica changed all leave it to the locked path.
#[test]
fn a_read_in_a_lane_answers_as_the_locked_path_or_leaves_it_to_it() {
    let mut mem = Memory::new();
    let mut crypt = writer_layer(&mut mem);
    let cred = crate::own_credentials();
    let f = create_f(&mut crypt, &mut mem);
    // Three chunks and a bit (a chunk is 1 MiB), every byte telling its place.
    let size = 3 * 1024 * 1024 + 100;
    let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    for (k, piece) in bytes.chunks(128 * 1024).enumerate() {
        let w = Op::Write {
            fh: f,
            offset: (k * 128 * 1024) as u64,
            data: piece.to_vec(),
        };
        assert!(call(&mut crypt, &mut mem, w).is_ok());
    }
    crypt.files.clear();
    crypt.sizes.clear();
    assert!(call(&mut crypt, &mut mem, Op::GetAttr { fh: f }).is_ok());
    let read = |offset: u64, count: u32| Op::Read {
        fh: f,
        offset,
        count,
    };
    let want = |offset: usize, count: usize| {
        let end = (offset + count).min(size);
        Ok(Reply::Read {
            data: bytes[offset..end].to_vec(),
            eof: end == size,
        })
    };

    // Planned, sent as one request, opened: what the locked path gives.
    for (offset, count) in [
        (0, 131_072),
        (5_000, 10),
        (2 * 1024 * 1024, 65_536),
        (3 << 20, 4096),
    ] {
        let plan = crypt.plan_read(&read(offset, count)).expect("a plan");
        mem.sent.clear();
        let r = mem.transmit(&cred, plan.op.clone(), true);
        assert_eq!(mem.sent, vec!["read_gather (read-only)".to_string()]);
        let sealed = crypt.sealed_read(plan, r).expect("its nodes fit");
        let got = sealed.open().expect("its blocks open");
        assert_eq!(
            Ok(got),
            want(offset as usize, count as usize),
            "at {offset}"
        );
        assert_eq!(
            call(&mut crypt, &mut mem, read(offset, count)),
            want(offset as usize, count as usize)
        );
    }
    // Across two chunks, past the end, nothing asked, a size not known: the locked path.
    assert!(crypt.plan_read(&read((1 << 20) - 100, 200)).is_none());
    assert!(crypt.plan_read(&read(size as u64, 10)).is_none());
    assert!(crypt.plan_read(&read(0, 0)).is_none());
    let g = FileHandle {
        ino: 999,
        generation: 1,
    };
    assert!(crypt
        .plan_read(&Op::Read {
            fh: g,
            offset: 0,
            count: 1
        })
        .is_none());

    // The header changed while the read was on its way (this mount wrote the file).
    let plan = crypt.plan_read(&read(0, 4096)).expect("a plan");
    let r = mem.transmit(&cred, plan.op.clone(), true);
    let w = Op::Write {
        fh: f,
        offset: 0,
        data: b"new".to_vec(),
    };
    assert!(call(&mut crypt, &mut mem, w).is_ok());
    assert!(crypt.sealed_read(plan, r).is_none());

    // A block's bytes changed by a replica: its leaf does not match, the open refuses.
    crypt.files.clear();
    crypt.sizes.clear();
    assert!(call(&mut crypt, &mut mem, Op::GetAttr { fh: f }).is_ok());
    let plan = crypt.plan_read(&read(8192, 4096)).expect("a plan");
    let Ok(Reply::Batch(mut replies)) = mem.transmit(&cred, plan.op.clone(), true) else {
        panic!("a gathered read");
    };
    if let Some(Reply::Read { data, .. }) = replies.last_mut() {
        data[7] ^= 1;
    }
    let sealed = crypt
        .sealed_read(plan, Ok(Reply::Batch(replies)))
        .expect("nodes fit");
    assert_eq!(sealed.open(), None);
    // A node changed: refused before any block is opened, and not kept.
    crypt.files.clear();
    crypt.sizes.clear();
    assert!(call(&mut crypt, &mut mem, Op::GetAttr { fh: f }).is_ok());
    let plan = crypt.plan_read(&read(0, 4096)).expect("a plan");
    let Ok(Reply::Batch(mut replies)) = mem.transmit(&cred, plan.op.clone(), true) else {
        panic!("a gathered read");
    };
    assert!(replies.len() > 1, "nodes asked with the data");
    if let Some(Reply::Read { data, .. }) = replies.first_mut() {
        data[0] ^= 1;
    }
    assert!(crypt.sealed_read(plan, Ok(Reply::Batch(replies))).is_none());
    assert_eq!(
        crypt.files.get(&f.ino).map(|n| n.regions.len()),
        Some(0),
        "nothing kept of a node that does not fit"
    );
}

/// A second writer's layer on `first`'s tree (the same identity: another mount of it, as
/// client `CLIENT + 1`: [`as_other`]).
fn another_writer(mem: &mut Memory, first: &Crypt) -> Crypt {
    let me = Identity::from_secrets([3; 32], [4; 32]);
    let g = me.group_ref(&CLUSTER, "g");
    let get = Op::GroupGet { group: g.group };
    let signed = match mem.transmit(&crate::own_credentials(), get, true) {
        Ok(Reply::Group(Some(s))) => s,
        other => panic!("the group: {other:?}"),
    };
    let record = crate::crypt::authenticated(&g, signed).expect("the owner's record");
    let mine =
        open_mine(&me, &g, &record.lockboxes, record.version, &record.writer).expect("a member");
    let mut other = Crypt::new(me, g, mine, CLIENT + 1, 0);
    other.top = first.top;
    other
}

/// `op` through `other`'s layer, from its own client.
fn as_other(other: &mut Crypt, mem: &mut Memory, op: Op) -> FsResult {
    mem.client = CLIENT + 1;
    let r = call(other, mem, op);
    mem.client = CLIENT;
    r
}

/// Write-back sealed to fly (`crypt_in_flight.rs`): a batch built on the nodes the one
/// before made, before that one's answer is opened; one refused because another writer replaced the
/// file's header meanwhile forgets the nodes it assumed, and sent again through the
/// locked path (as `sender.rs` `land` does) it is built on the new header: both writers'
/// bytes are there.
#[test]
fn a_batch_in_flight_on_a_replaced_header_is_refused_and_built_again() {
    let mut mem = Memory::new();
    let mut crypt = writer_layer(&mut mem);
    let mut other = another_writer(&mut mem, &crypt);
    let cred = crate::own_credentials();
    let f = create_f(&mut crypt, &mut mem);
    let write = |offset: u64, byte: u8, n: usize| Op::Write {
        fh: f,
        offset,
        data: vec![byte; n],
    };
    assert!(call(&mut crypt, &mut mem, write(0, b'a', 12_288)).is_ok());

    // Two batches in turn, the second sealed on what the first made: nothing read again.
    mem.sent.clear();
    for (at, byte) in [(0, b'b'), (100, b'c')] {
        let (c, op, kept) = crypt
            .seal_to_fly(&mut mem, &cred, write(at, byte, 10))
            .unwrap();
        let r = mem.transmit(&c, op, false);
        assert!(matches!(
            crypt.landed(&mut mem, &kept, r),
            Ok(Reply::Write { count: 10, .. })
        ));
    }
    // Each reads the block it changes in part, and expects the header the one before made.
    let each = ["read_gather (read-only)", "signed write_gather expecting 1"];
    assert_eq!(mem.sent, [each, each].concat());

    // Another writer changes the file while a batch is on its way.
    assert!(as_other(&mut other, &mut mem, Op::GetAttr { fh: f }).is_ok());
    let (c, op, kept) = crypt
        .seal_to_fly(&mut mem, &cred, write(4096, b'd', 10))
        .unwrap();
    assert!(as_other(&mut other, &mut mem, write(8192, b'e', 10)).is_ok());
    let r = mem.transmit(&c, op, false);
    assert_eq!(crypt.landed(&mut mem, &kept, r), Err(Errno::ESTALE));
    assert!(
        !crypt.files.contains_key(&f.ino),
        "the nodes it assumed are forgotten"
    );
    assert!(call(&mut crypt, &mut mem, write(4096, b'd', 10)).is_ok());

    let (size, got) = read_afresh(&mut mem, &mut crypt, f);
    assert_eq!(size, 12_288);
    let mut want = vec![b'a'; 4096];
    want[..10].fill(b'b');
    want[100..110].fill(b'c');
    assert_eq!(
        got,
        Ok(Reply::Read {
            data: want,
            eof: false
        })
    );
    let mut block = |at: u64| match call(
        &mut crypt,
        &mut mem,
        Op::Read {
            fh: f,
            offset: at,
            count: 4096,
        },
    ) {
        Ok(Reply::Read { data, .. }) => data,
        other => panic!("{other:?}"),
    };
    let mut d = vec![b'a'; 4096];
    d[..10].fill(b'd');
    assert_eq!(block(4096), d);
    let mut e = vec![b'a'; 4096];
    e[..10].fill(b'e');
    assert_eq!(block(8192), e);
}
