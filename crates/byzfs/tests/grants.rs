//! A client key says what it may do (issue #43 item 4), on real processes: a key issued
//! with `byzfs client-key --uids 1000 --gids 1000` gets `EPERM` from the replicas for a
//! request as root or as another user, and works as uid 1000; the mount's client maps a
//! caller outside the grant to the anonymous user; a replica's own client cannot change the
//! tree, while its disk reports still go through.

use crate::common;

use byzfs_fs::{decode_result, Credentials, Errno, FileHandle, FsResult, Op, Reply, Request};
use byzfs_fuse::fsclient::{signed_grant, FsClient};
use byzfs_net::{ByzClient, ClientCredential, ReplicaSecret};
use common::*;
use std::process::Command;
use std::time::{Duration, Instant};

/// Sends `op` as `cred` exactly (no mapping into a grant), carrying `grant`.
fn raw(
    rt: &tokio::runtime::Runtime,
    client: &mut ByzClient,
    grant: Option<byzfs_fs::SignedGrant>,
    cred: Credentials,
    op: Op,
) -> FsResult {
    let ro = op.is_read_only();
    let req = Request { cred, op, grant };
    let out = rt.block_on(client.invoke(req.encode(), ro)).unwrap();
    decode_result(&out).unwrap()
}

fn mkdir(name: &str) -> Op {
    Op::Mkdir {
        dir: FileHandle::ROOT,
        name: name.as_bytes().to_vec(),
        mode: 0o755,
    }
}

/// `(uid, gid)` of what a mkdir made, or its errno.
fn owner(r: FsResult) -> Result<(u32, u32), Errno> {
    match r {
        Ok(Reply::Made { entry, .. }) => Ok((entry.uid, entry.gid)),
        other => other.map(|r| panic!("mkdir answered {r:?}")),
    }
}

fn user(uid: u32, gid: u32) -> Credentials {
    Credentials::user(uid, gid)
}

#[test]
fn a_restricted_client_key_and_a_replicas_own_client_get_eperm() {
    let _serial = serial();
    let procs = Procs::with("memory", "fs", vec![Vec::new(); 4]);
    let rt = rt();

    // The cluster's own client (any user, root too) opens the root to everyone.
    let own = procs.credential();
    let mut admin_client = rt
        .block_on(ByzClient::connect(&procs.cluster, &own))
        .unwrap();
    let open = Op::SetAttr {
        fh: FileHandle::ROOT,
        set: byzfs_fs::SetAttr {
            mode: Some(0o777),
            ..Default::default()
        },
    };
    let own_grant = Some(signed_grant(&own).unwrap());
    assert!(raw(&rt, &mut admin_client, own_grant, Credentials::root(), open).is_ok());

    // A key for uid 1000 only.
    let key = procs.dir.path().join("client-7.key");
    let out = Command::new(BIN)
        .arg("client-key")
        .arg("--config")
        .arg(procs.config())
        .args(["--id", "7", "--uids", "1000", "--gids", "1000", "--out"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "wrote {} (mode 0600): client 7 (uids 1000, gids 1000, not root, anonymous 65534:65534)\n",
            key.display()
        )
    );
    let cred = ClientCredential::load(&key, &procs.cluster).unwrap();
    let grant = Some(signed_grant(&cred).unwrap());
    let mut client = rt
        .block_on(ByzClient::connect(&procs.cluster, &cred))
        .unwrap();
    let lookup = Op::Lookup {
        dir: FileHandle::ROOT,
        name: b"as-1000".to_vec(),
    };
    let got = [
        owner(raw(
            &rt,
            &mut client,
            grant.clone(),
            Credentials::root(),
            mkdir("as-root"),
        )),
        owner(raw(
            &rt,
            &mut client,
            grant.clone(),
            user(1001, 1000),
            mkdir("as-1001"),
        )),
        owner(raw(
            &rt,
            &mut client,
            grant.clone(),
            user(1000, 0),
            mkdir("gid-0"),
        )),
        owner(raw(
            &rt,
            &mut client,
            None,
            user(1000, 1000),
            mkdir("no-grant"),
        )),
        owner(raw(
            &rt,
            &mut client,
            grant.clone(),
            user(1000, 1000),
            mkdir("as-1000"),
        )),
    ];
    assert_eq!(
        got,
        [
            Err(Errno::EPERM),
            Err(Errno::EPERM),
            Err(Errno::EPERM),
            Err(Errno::EPERM),
            Ok((1000, 1000))
        ]
    );
    // Reads are checked too.
    let reads = [
        raw(
            &rt,
            &mut client,
            grant.clone(),
            user(1001, 1000),
            lookup.clone(),
        )
        .map(|_| ()),
        raw(&rt, &mut client, grant.clone(), user(1000, 1000), lookup).map(|_| ()),
    ];
    assert_eq!(reads, [Err(Errno::EPERM), Ok(())]);

    // The mount's client maps root to the anonymous user instead of being refused.
    let mut mount_client = rt
        .block_on(FsClient::connect(&procs.cluster, &cred, false))
        .unwrap();
    let bytes = mount_client.request(&Credentials::root(), mkdir("squashed"));
    let out = rt.block_on(mount_client.invoke(bytes, false)).unwrap();
    assert_eq!(owner(decode_result(&out).unwrap()), Ok((65534, 65534)));

    // Replica 2's own client, certified by its key: no mkdir at the root, even as root.
    let secret =
        ReplicaSecret::load(&procs.dir.path().join("replica-2.key"), &procs.cluster, 2).unwrap();
    let replica_cred = ClientCredential::for_replica(&procs.cluster, &secret).unwrap();
    let mut replica_client = rt
        .block_on(ByzClient::connect(&procs.cluster, &replica_cred))
        .unwrap();
    let r = raw(
        &rt,
        &mut replica_client,
        None,
        Credentials::root(),
        mkdir("by-replica-2"),
    );
    assert_eq!(owner(r), Err(Errno::EPERM));
    // Its disk reports still go through (`capacity_report.rs` logs once the cluster took
    // one and answered the agreed capacity).
    let start = Instant::now();
    while !procs.log(2).contains("reported this disk's capacity") {
        assert!(
            start.elapsed() < TIMEOUT,
            "replica 2 never reported its disk:\n{}",
            tail(&procs.log(2))
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn client_key_refuses_unsafe_or_incomplete_grants_before_touching_keys() {
    let cases = [
        (
            vec!["--uids", "1000"],
            "error: say which users and groups client 7 may act as: --uids 1000,2000-2099 --gids 1000 (or any, or none for only the anonymous user 65534:65534); add --root only for a host trusted with root\n",
        ),
        (
            vec!["--uids", "0,1000", "--gids", "1000"],
            "error: uid 0 is root's; add --root to let this client act as root, or leave 0 out\n",
        ),
    ];
    for (flags, want) in cases {
        let out = Command::new(BIN)
            .args([
                "client-key",
                "--config",
                "/nonexistent/cluster.toml",
                "--id",
                "7",
            ])
            .args(&flags)
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stderr), want, "{flags:?}");
    }
}
