//! A client key says what it may do (`byzfs_fs::proto::grant`): under `ClientPolicy::Certified`
//! every request, ordered or read-only, must carry a grant the admin signed for its
//! session's certificate, and its credentials must stay within it; `EPERM` otherwise. The
//! replicas' own clients may only report their disks and read the agreed capacity.

use byzfs_bft::Service as _;
use byzfs_fs::config::Reporters;
use byzfs_fs::policy::Certified;
use byzfs_fs::proto::grant::Ids;
use byzfs_fs::{
    decode_result, ClientPolicy, Credentials, Errno, FileHandle, FileService, FsConfig, FsResult,
    Grant, Op, Reply, Request, SignedGrant,
};
use ed25519_dalek::SigningKey;
use proptest::prelude::*;

const CLUSTER: [u8; 16] = [7; 16];
/// The replicas' own certificate ids start here.
const REPLICA_CLIENTS: u64 = 100;
/// Certificate 5's session 9.
const CLIENT: u64 = 5 << 40 | 9;
const NOW: u64 = 1_700_000_000_000_000;

fn admin() -> SigningKey {
    SigningKey::from_bytes(&[3; 32])
}

fn policy() -> ClientPolicy {
    ClientPolicy::Certified(Box::new(Certified {
        admin: admin().verifying_key(),
        cluster_id: CLUSTER,
        session_bits: 40,
        replica_clients: REPLICA_CLIENTS,
    }))
}

/// A certified service whose root anyone may write in (so that the checks here, not the
/// root's mode, decide).
fn service() -> FileService {
    FileService::in_memory(FsConfig {
        partitions: 16,
        root_mode: 0o777,
        reporters: Some(Reporters {
            first: REPLICA_CLIENTS,
            session_bits: 40,
            replicas: 4,
        }),
        client_policy: policy(),
        ..FsConfig::default()
    })
}

/// uids 1000 and 2000-2099, gids 100, not root.
fn restricted() -> Grant {
    Grant {
        uids: Ids::Ranges(vec![(1000, 1000), (2000, 2099)]),
        gids: Ids::Ranges(vec![(100, 100)]),
        root: false,
        anon_uid: 65534,
        anon_gid: 65534,
    }
}

fn signed(grant: Grant) -> SignedGrant {
    SignedGrant::sign(&admin(), &CLUSTER, 5, grant)
}

fn cred(uid: u32, gid: u32, groups: &[u32]) -> Credentials {
    Credentials {
        uid,
        gid,
        groups: groups.to_vec(),
    }
}

/// Runs `op` from `client`, ordered (`execute`) or, if it is read-only, on all three
/// read-only paths, which must agree.
fn run(
    fs: &mut FileService,
    client: u64,
    cred: Credentials,
    grant: Option<SignedGrant>,
    op: Op,
) -> FsResult {
    let bytes = Request {
        cred,
        op: op.clone(),
        grant,
    }
    .encode();
    let decode = |b: Vec<u8>| decode_result(&b).expect("a result");
    if op.is_read_only() {
        let plain = decode(fs.execute_read_only(client, &bytes));
        // Everything executed so far counts as committed.
        let committed = fs
            .execute_read_only_committed(client, &bytes, u64::MAX)
            .map(decode);
        assert_eq!(committed, Some(plain.clone()), "both read-only paths");
        let ordered = decode(fs.execute(client, &bytes, &NOW.to_le_bytes()));
        assert_eq!(ordered, plain, "ordered and read-only alike");
        plain
    } else {
        decode(fs.execute(client, &bytes, &NOW.to_le_bytes()))
    }
}

fn mkdir(name: &str) -> Op {
    Op::Mkdir {
        dir: FileHandle::ROOT,
        name: name.as_bytes().to_vec(),
        mode: 0o755,
    }
}

/// `Ok(owner uid, gid)` of what a Mkdir made, or its errno.
fn made(r: FsResult) -> Result<(u32, u32), Errno> {
    match r {
        Ok(Reply::Made { entry, .. }) => Ok((entry.uid, entry.gid)),
        Ok(other) => panic!("mkdir answered {other:?}"),
        Err(e) => Err(e),
    }
}

fn getattr() -> Op {
    Op::GetAttr {
        fh: FileHandle::ROOT,
    }
}

#[test]
fn credentials_outside_the_grant_are_refused_ordered_and_read_only() {
    let mut fs = service();
    let g = Some(signed(restricted()));
    let cases = [
        ("uid and gid granted", cred(1000, 100, &[]), Ok((1000, 100))),
        ("a uid in a range", cred(2050, 100, &[100]), Ok((2050, 100))),
        (
            "the anonymous ids",
            cred(65534, 65534, &[]),
            Ok((65534, 65534)),
        ),
        ("uid not granted", cred(1001, 100, &[]), Err(Errno::EPERM)),
        ("gid not granted", cred(1000, 101, &[]), Err(Errno::EPERM)),
        (
            "a group not granted",
            cred(1000, 100, &[101]),
            Err(Errno::EPERM),
        ),
        ("root without root", cred(0, 100, &[]), Err(Errno::EPERM)),
        ("gid 0 without root", cred(1000, 0, &[]), Err(Errno::EPERM)),
        (
            "group 0 without root",
            cred(1000, 100, &[0]),
            Err(Errno::EPERM),
        ),
    ];
    let mut got = Vec::new();
    for (i, (what, c, _)) in cases.iter().enumerate() {
        let m = made(run(
            &mut fs,
            CLIENT,
            c.clone(),
            g.clone(),
            mkdir(&format!("d{i}")),
        ));
        let read = run(&mut fs, CLIENT, c.clone(), g.clone(), getattr()).map(|_| ());
        got.push((*what, m, read));
    }
    let want: Vec<_> = cases
        .iter()
        .map(|(what, _, m)| (*what, *m, m.map(|_| ())))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn forged_altered_missing_or_foreign_grants_are_refused() {
    let mut fs = service();
    let me = cred(1000, 100, &[]);
    let mut altered = signed(restricted());
    altered.grant.root = true;
    let mut short = signed(restricted());
    short.signature.pop();
    let cases = [
        ("valid", Some(signed(restricted())), CLIENT),
        ("none", None, CLIENT),
        ("altered", Some(altered), CLIENT),
        ("short signature", Some(short), CLIENT),
        (
            "another certificate's",
            Some(SignedGrant::sign(&admin(), &CLUSTER, 6, restricted())),
            CLIENT,
        ),
        (
            "sent by another certificate",
            Some(signed(restricted())),
            6 << 40 | 9,
        ),
        (
            "another cluster's",
            Some(SignedGrant::sign(&admin(), &[8; 16], 5, restricted())),
            CLIENT,
        ),
        (
            "signed by another key",
            Some(SignedGrant::sign(
                &SigningKey::from_bytes(&[4; 32]),
                &CLUSTER,
                5,
                restricted(),
            )),
            CLIENT,
        ),
    ];
    let got: Vec<_> = cases
        .iter()
        .enumerate()
        .map(|(i, (what, g, client))| {
            let m = made(run(
                &mut fs,
                *client,
                me.clone(),
                g.clone(),
                mkdir(&format!("d{i}")),
            ));
            let read = run(&mut fs, *client, me.clone(), g.clone(), getattr()).map(|_| ());
            (*what, m, read)
        })
        .collect();
    let mut want = vec![("valid", Ok((1000, 100)), Ok(()))];
    want.extend(
        cases[1..]
            .iter()
            .map(|(what, _, _)| (*what, Err(Errno::EPERM), Err(Errno::EPERM))),
    );
    assert_eq!(got, want);
}

#[test]
fn a_replicas_own_client_may_only_report_its_disk() {
    let mut fs = service();
    let replica2 = (REPLICA_CLIENTS + 2) << 40 | 77;
    let root = Credentials::root();
    let any_root = Some(signed(Grant::trusted_host()));
    assert_eq!(
        made(run(&mut fs, replica2, root.clone(), None, mkdir("evil"))),
        Err(Errno::EPERM)
    );
    assert_eq!(
        made(run(
            &mut fs,
            replica2,
            root.clone(),
            any_root,
            mkdir("evil")
        )),
        Err(Errno::EPERM),
        "not even with a grant"
    );
    assert_eq!(
        run(
            &mut fs,
            replica2,
            root.clone(),
            None,
            Op::Lookup {
                dir: FileHandle::ROOT,
                name: b"x".to_vec()
            }
        ),
        Err(Errno::EPERM),
        "nor read the tree"
    );
    assert_eq!(
        run(
            &mut fs,
            replica2,
            root.clone(),
            None,
            Op::ReportCapacity {
                replica: 2,
                bytes: 1 << 30
            }
        ),
        Ok(Reply::Done)
    );
    assert!(matches!(
        run(&mut fs, replica2, root, None, Op::StatFs),
        Ok(Reply::StatFs(_))
    ));
}

#[test]
fn an_any_and_root_grant_works_as_before() {
    let mut fs = service();
    let g = Some(signed(Grant::trusted_host()));
    let got = [
        made(run(
            &mut fs,
            CLIENT,
            Credentials::root(),
            g.clone(),
            mkdir("r"),
        )),
        made(run(
            &mut fs,
            CLIENT,
            cred(4242, 77, &[0, 5]),
            g.clone(),
            mkdir("u"),
        )),
    ];
    assert_eq!(got, [Ok((0, 0)), Ok((4242, 77))]);
}

#[test]
fn a_service_that_names_no_policy_refuses_everything() {
    let mut fs = FileService::in_memory(FsConfig::default());
    let g = Some(signed(Grant::trusted_host()));
    assert_eq!(
        made(run(
            &mut fs,
            CLIENT,
            Credentials::root(),
            g.clone(),
            mkdir("r")
        )),
        Err(Errno::EPERM)
    );
    assert_eq!(
        run(&mut fs, CLIENT, Credentials::root(), g, getattr()).map(|_| ()),
        Err(Errno::EPERM)
    );
}

#[test]
fn squashing_maps_into_the_grant() {
    let g = restricted();
    let cases = [
        (cred(1000, 100, &[100]), cred(1000, 100, &[100])),
        (cred(0, 0, &[0, 100]), cred(65534, 65534, &[])),
        (cred(1001, 100, &[100]), cred(65534, 65534, &[])),
        (cred(2000, 5, &[5, 100, 0]), cred(2000, 65534, &[100])),
    ];
    for (from, to) in cases {
        assert_eq!(g.squash(&from), to, "{from:?}");
        assert!(g.allows(&to));
        assert_eq!(g.squash(&to), to, "idempotent");
    }
    let rooted = Grant {
        root: true,
        ..restricted()
    };
    assert_eq!(rooted.squash(&cred(0, 0, &[0])), cred(0, 0, &[0]));
}

#[test]
fn grants_with_too_many_ranges_do_not_decode() {
    let ranges = |n: u32| Ids::Ranges((0..n).map(|i| (2 * i + 1, 2 * i + 1)).collect());
    let grant = |n| Grant {
        uids: ranges(n),
        ..restricted()
    };
    assert_eq!(Grant::decode(&grant(32).encode()), Some(grant(32)));
    assert_eq!(Grant::decode(&grant(33).encode()), None);
    // A length that claims billions of ranges is refused before anything is allocated.
    let mut huge = vec![0u8];
    huge.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    assert_eq!(Grant::decode(&huge), None);
}

/// The decision as a plain reading of the rules (README "Security").
fn reference(g: &Grant, c: &Credentials) -> bool {
    let within = |ids: &Ids, id: u32| match ids {
        Ids::Any => true,
        Ids::Ranges(r) => r.iter().any(|&(lo, hi)| (lo..=hi).contains(&id)),
    };
    let uid_ok = if c.uid == 0 {
        g.root
    } else {
        c.uid == g.anon_uid || within(&g.uids, c.uid)
    };
    let gid_ok = |gid: u32| {
        if gid == 0 {
            g.root
        } else {
            gid == g.anon_gid || within(&g.gids, gid)
        }
    };
    uid_ok && gid_ok(c.gid) && c.groups.iter().all(|&x| gid_ok(x))
}

fn small_id() -> impl Strategy<Value = u32> {
    prop_oneof![0u32..8, Just(65534), any::<u32>()]
}

fn ids() -> impl Strategy<Value = Ids> {
    prop_oneof![
        Just(Ids::Any),
        prop::collection::vec((small_id(), small_id()), 0..5).prop_map(Ids::Ranges),
    ]
}

fn grant() -> impl Strategy<Value = Grant> {
    (ids(), ids(), any::<bool>(), small_id(), small_id()).prop_map(
        |(uids, gids, root, anon_uid, anon_gid)| Grant {
            uids,
            gids,
            root,
            anon_uid,
            anon_gid,
        },
    )
}

fn credentials() -> impl Strategy<Value = Credentials> {
    (
        small_id(),
        small_id(),
        prop::collection::vec(small_id(), 0..4),
    )
        .prop_map(|(uid, gid, groups)| Credentials { uid, gid, groups })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any grant and credentials: no panic, and the service's answer is the reference
    /// decision (a read, so the tree's permissions play no part: the root is 0777).
    #[test]
    fn the_decision_is_the_reference_check(g in grant(), c in credentials(), bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut fs = service();
        let r = run(&mut fs, CLIENT, c.clone(), Some(signed(g.clone())), getattr());
        prop_assert_eq!(r.is_ok(), reference(&g, &c));
        if !reference(&g, &c) {
            prop_assert_eq!(r.map(|_| ()), Err(Errno::EPERM));
        }
        // Squashed credentials are allowed unless the grant maps to root without root.
        let s = g.squash(&c);
        prop_assert!(g.allows(&s) || (!g.root && (g.anon_uid == 0 || g.anon_gid == 0)));
        // Random bytes as a grant never panic.
        let _ = Grant::decode(&bytes);
    }
}
