//! Bad input at the service's byte interface: random bytes, and valid requests with bytes
//! changed, cut or added (so the decoder is driven deep into every operation's fields, lock
//! requests and waits included). Every replica must give the same answer and keep the same
//! state, and none may panic.

use crate::common;

use byzfs_bft::Service;
use byzfs_fs::proto::lock::{LockKind, LockReq};
use byzfs_fs::{decode_result, Credentials, FileHandle, Op, Request, SetAttr};
use common::*;
use proptest::prelude::*;

/// Valid requests on the file of [`setup`].
fn seeds() -> Vec<Vec<u8>> {
    let (_, f) = setup();
    let lock = LockReq {
        fh: f,
        owner: 7,
        kind: Some(LockKind::Write),
        start: 0,
        end: 9,
        pid: 1,
    };
    [
        Op::GetAttr { fh: f },
        Op::Write {
            fh: f,
            offset: 3,
            data: b"data".to_vec(),
        },
        Op::Create {
            dir: ROOT,
            name: b"new".to_vec(),
            mode: 0o644,
            exclusive: true,
        },
        Op::Rename {
            from_dir: ROOT,
            from_name: b"f".to_vec(),
            to_dir: ROOT,
            to_name: b"g".to_vec(),
        },
        Op::SetAttr {
            fh: f,
            set: SetAttr {
                size: Some(1),
                ..Default::default()
            },
        },
        Op::SetLk(lock),
        Op::LockDelegate(lock),
        Op::SetLkWait(lock),
        Op::CancelWait { fh: f, owner: 7 },
        Op::ReleaseLocks { fh: f, owner: 7 },
        Op::RenewLease,
        Op::SweepOrphans { after: 0 },
        Op::SweepDir {
            dir: FileHandle::ROOT,
            after: u64::MAX,
        },
    ]
    .into_iter()
    .map(|op| Request::new(Credentials::root(), op).encode())
    .collect()
}

/// A file system with a file `f` (its handle), a directory `d` and a file a dead client
/// left hidden in the orphan directory; the same every time.
fn setup() -> (Fs, FileHandle) {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f").fh;
    fs.mkdir(ROOT, "d");
    let orphans = fs.mkdir(ROOT, ".byzfs-orphans").fh;
    let hidden = String::from_utf8(byzfs_fs::orphan::hidden_name(9, "tmp-1")).unwrap();
    fs.create(orphans, &hidden);
    (fs, f)
}

/// One input: a seed with edits, or random bytes.
fn input() -> impl Strategy<Value = Vec<u8>> {
    edited(seeds)
}

/// What the replicas answer the seeds (what a mount decodes: `byzfs-fuse` `cluster.rs`).
fn answers() -> Vec<Vec<u8>> {
    static ANSWERS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    ANSWERS
        .get_or_init(|| {
            seeds()
                .iter()
                .map(|b| setup().0.s.execute(3, b, &(T0 + 50_000_000).to_le_bytes()))
                .collect()
        })
        .clone()
}

/// One of `valid()`'s byte strings with bytes changed, cut or added, or random bytes.
fn edited(valid: fn() -> Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let edits = prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..6);
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        (any::<prop::sample::Index>(), edits).prop_map(move |(which, edits)| {
            let all = valid();
            let mut b = all[which.index(all.len())].clone();
            for (at, byte, how) in edits {
                match how {
                    0 if !b.is_empty() => {
                        let i = at.index(b.len());
                        b[i] = byte;
                    }
                    1 if !b.is_empty() => b.truncate(at.index(b.len())),
                    _ => b.push(byte),
                }
            }
            b
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn replicas_agree_on_any_bytes(bytes in input(), client in 1u64..4) {
        let ((mut a, _), (mut b, _)) = (setup(), setup());
        let nondet = (T0 + 50_000_000).to_le_bytes();
        let ra = a.s.execute(client, &bytes, &nondet);
        let rb = b.s.execute(client, &bytes, &nondet);
        prop_assert_eq!(&ra, &rb);
        prop_assert!(decode_result(&ra).is_some(), "an answer every client can decode");
        let ro_a = a.s.execute_read_only(client, &bytes);
        prop_assert_eq!(ro_a, b.s.execute_read_only(client, &bytes));
        prop_assert_eq!(a.s.current_partition_digests(), b.s.current_partition_digests());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// A result as the mount receives it, changed, cut or lengthened (a corrupt frame, or
    /// replies a quorum of liars could agree on): decoded or refused, never a panic, and
    /// what decodes encodes back to bytes that decode to the same result.
    #[test]
    fn results_from_the_wire_decode_or_are_refused(bytes in edited(answers)) {
        if let Some(r) = decode_result(&bytes) {
            prop_assert_eq!(decode_result(&byzfs_fs::encode_result(&r)), Some(r));
        }
    }
}

/// The seeds name real files, so their edits start from requests that do something.
#[test]
fn seeds_are_valid_requests() {
    for (i, bytes) in seeds().into_iter().enumerate() {
        let (mut fs, _) = setup();
        let r = decode_result(&fs.s.execute(3, &bytes, &(T0 + 50_000_000).to_le_bytes()));
        assert!(matches!(r, Some(Ok(_))), "seed {i}: {r:?}");
    }
}
