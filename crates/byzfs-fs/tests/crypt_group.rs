//! Encryption groups' records (`byzfs_fs::crypt_group`): created and changed only by their
//! owner's signature, one version at a time, under the id of their owner and name, on this
//! cluster; anything else refused alike at every replica, and nothing of a refused change
//! stored. The owner's signature comes back with the record.

use crate::common;

use byzfs_fs::proto::group::{
    authenticate, group_id, signed_bytes, GroupRecord, SignedGroup, MAX_LOCKBOX, MAX_LOCKBOXES,
    MAX_NAME,
};
use byzfs_fs::{Errno, FsConfig, Op, Reply};
use common::*;
use ed25519_dalek::{Signer, SigningKey};

/// The cluster `Fs::new` is (`FsConfig::default`).
const CLUSTER: [u8; 16] = [0; 16];

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// Group `team` of `owner`.
fn g(owner: &SigningKey) -> [u8; 16] {
    group_id(&owner.verifying_key().to_bytes(), "team")
}

fn record(owner: &SigningKey, version: u32, writer: u8, members: usize) -> GroupRecord {
    GroupRecord {
        owner: owner.verifying_key().to_bytes(),
        name: "team".into(),
        version,
        writer: key(writer).verifying_key().to_bytes(),
        lockboxes: vec![vec![version as u8; 136]; members],
    }
}

fn sign(signer: &SigningKey, cluster: &[u8; 16], group: &[u8; 16], r: &GroupRecord) -> Vec<u8> {
    signer
        .sign(&signed_bytes(cluster, group, r))
        .to_bytes()
        .to_vec()
}

/// `record` as group `group`, signed by `signer` for this cluster.
fn put_as(
    fs: &mut Fs,
    group: [u8; 16],
    signer: &SigningKey,
    record: &GroupRecord,
) -> Result<Reply, Errno> {
    let signature = sign(signer, &CLUSTER, &group, record);
    fs.run(Op::GroupPut {
        group,
        record: record.clone(),
        signature,
    })
}

/// `record` as the group of its owner and name, signed by `signer`.
fn put(fs: &mut Fs, signer: &SigningKey, record: &GroupRecord) -> Result<Reply, Errno> {
    let group = group_id(&record.owner, &record.name);
    put_as(fs, group, signer, record)
}

fn get(fs: &mut Fs, group: [u8; 16]) -> Option<SignedGroup> {
    match fs.run(Op::GroupGet { group }) {
        Ok(Reply::Group(r)) => r,
        other => panic!("group_get: {other:?}"),
    }
}

fn signed(r: &GroupRecord) -> SignedGroup {
    SignedGroup {
        record: r.clone(),
        signature: sign(&key(1), &CLUSTER, &g(&key(1)), r),
    }
}

#[test]
fn only_the_owner_changes_a_group_one_version_at_a_time() {
    let mut fs = Fs::new();
    let owner = key(1);
    let stranger = key(2);
    let group = g(&owner);
    assert_eq!(get(&mut fs, group), None);
    // A new group starts at version 1, signed by the owner it names.
    let v1 = record(&owner, 1, 10, 3);
    assert_eq!(
        put(&mut fs, &owner, &record(&owner, 2, 10, 3)),
        Err(Errno::ESTALE)
    );
    assert_eq!(put(&mut fs, &stranger, &v1), Err(Errno::EACCES));
    assert_eq!(put(&mut fs, &owner, &v1), Ok(Reply::Done));
    assert_eq!(get(&mut fs, group), Some(signed(&v1)));
    // Replaying it, or creating the group again, is stale.
    assert_eq!(put(&mut fs, &owner, &v1), Err(Errno::ESTALE));
    // A member removed: version 2, a new writer key, one lockbox fewer.
    let v2 = record(&owner, 2, 11, 2);
    assert_eq!(put(&mut fs, &stranger, &v2), Err(Errno::EACCES));
    // Someone else cannot take the group over by naming itself owner.
    assert_eq!(
        put_as(&mut fs, group, &stranger, &record(&stranger, 2, 11, 2)),
        Err(Errno::EACCES)
    );
    assert_eq!(
        put(&mut fs, &owner, &record(&owner, 3, 11, 2)),
        Err(Errno::ESTALE)
    );
    assert_eq!(put(&mut fs, &owner, &v2), Ok(Reply::Done));
    assert_eq!(get(&mut fs, group), Some(signed(&v2)));
}

/// Issue #43 item 5 (1): nobody makes another owner's group first. A squatter naming
/// itself owner of the victim's `team` id, signed by itself, is refused; so is the
/// victim's `default` id under the squatter's `team` record.
#[test]
fn a_group_whose_id_is_not_its_owner_and_name_is_refused() {
    let mut fs = Fs::new();
    let (victim, squatter) = (key(1), key(2));
    let victims = g(&victim);
    let theirs = record(&squatter, 1, 10, 1);
    assert_eq!(
        put_as(&mut fs, victims, &squatter, &theirs),
        Err(Errno::EACCES)
    );
    let default = group_id(&victim.verifying_key().to_bytes(), "default");
    assert_eq!(
        put_as(&mut fs, default, &squatter, &theirs),
        Err(Errno::EACCES)
    );
    // Its own name under its own key: its own group, not the victim's.
    assert_eq!(put(&mut fs, &squatter, &theirs), Ok(Reply::Done));
    assert_eq!((get(&mut fs, victims), get(&mut fs, default)), (None, None));
    // The owner's own record, with a name that is not the one its id names.
    let mut other_name = record(&victim, 1, 10, 1);
    other_name.name = "other".into();
    assert_eq!(
        put_as(&mut fs, victims, &victim, &other_name),
        Err(Errno::EACCES)
    );
    assert_eq!(
        put(&mut fs, &victim, &record(&victim, 1, 10, 1)),
        Ok(Reply::Done)
    );
    assert!(get(&mut fs, victims).is_some());
}

/// Issue #43 item 5 (2, 5): the record comes back with its owner's signature, which a
/// mount checks (`authenticate`): a record a replica changed, or signed for another
/// cluster, does not pass, and a record of another cluster is refused by the replicas.
#[test]
fn records_come_back_signed_and_name_their_cluster() {
    let mut fs = Fs::new();
    let owner = key(1);
    let group = g(&owner);
    let v1 = record(&owner, 1, 10, 2);
    // Signed for another cluster: refused here.
    let elsewhere = sign(&owner, &[7; 16], &group, &v1);
    assert_eq!(
        fs.run(Op::GroupPut {
            group,
            record: v1.clone(),
            signature: elsewhere.clone(),
        }),
        Err(Errno::EACCES)
    );
    let mut other = Fs::with_config(FsConfig {
        cluster_id: [7; 16],
        ..small_config()
    });
    assert_eq!(
        other.run(Op::GroupPut {
            group,
            record: v1.clone(),
            signature: elsewhere,
        }),
        Ok(Reply::Done)
    );
    assert_eq!(put(&mut fs, &owner, &v1), Ok(Reply::Done));
    let got = get(&mut fs, group).expect("stored");
    assert_eq!(
        authenticate(&CLUSTER, &group, &got.record, &got.signature),
        Ok(())
    );
    assert_eq!(
        authenticate(&[7; 16], &group, &got.record, &got.signature),
        Err(Errno::EACCES),
        "another cluster's"
    );
    let mut changed = got.record.clone();
    changed.lockboxes.swap(0, 1);
    changed.lockboxes[0][0] ^= 1;
    assert_eq!(
        authenticate(&CLUSTER, &group, &changed, &got.signature),
        Err(Errno::EACCES),
        "lockboxes changed"
    );
    let mut later = got.record.clone();
    later.version = 5;
    assert_eq!(
        authenticate(&CLUSTER, &group, &later, &got.signature),
        Err(Errno::EACCES),
        "version changed"
    );
    let mut hostile = got.record;
    hostile.name = "x".repeat(MAX_NAME + 1);
    assert_eq!(
        authenticate(&CLUSTER, &group, &hostile, &got.signature),
        Err(Errno::EINVAL)
    );
}

#[test]
fn the_replicas_derive_group_ids_as_members_do() {
    let owner = key(1).verifying_key().to_bytes();
    for name in ["team", "default", ""] {
        assert_eq!(
            group_id(&owner, name),
            byzfs_crypt::member::group_id(&owner, name)
        );
    }
}

#[test]
fn malformed_changes_are_refused_and_store_nothing() {
    let mut fs = Fs::new();
    let owner = key(1);
    let group = g(&owner);
    let mut r = record(&owner, 1, 10, MAX_LOCKBOXES + 1);
    assert_eq!(put(&mut fs, &owner, &r), Err(Errno::EINVAL), "too many");
    r.lockboxes = vec![vec![0; MAX_LOCKBOX + 1]];
    assert_eq!(put(&mut fs, &owner, &r), Err(Errno::EINVAL), "too large");
    r = record(&owner, 1, 10, 1);
    r.name = "n".repeat(MAX_NAME + 1);
    assert_eq!(
        put(&mut fs, &owner, &r),
        Err(Errno::EINVAL),
        "name too long"
    );
    // Not a point on the curve: not a key anyone holds.
    let off_curve = (0..=255u8)
        .map(|b| [b; 32])
        .find(|k| ed25519_dalek::VerifyingKey::from_bytes(k).is_err())
        .expect("some repeated byte is not a point");
    r = record(&owner, 1, 10, 1);
    r.writer = off_curve;
    assert_eq!(put(&mut fs, &owner, &r), Err(Errno::EINVAL), "writer key");
    // A signature of the wrong length.
    let v1 = record(&owner, 1, 10, 1);
    assert_eq!(
        fs.run(Op::GroupPut {
            group,
            record: v1.clone(),
            signature: vec![0; 63],
        }),
        Err(Errno::EINVAL)
    );
    // A good signature over another group's record.
    let signature = sign(&owner, &CLUSTER, &[6; 16], &v1);
    assert_eq!(
        fs.run(Op::GroupPut {
            group,
            record: v1,
            signature,
        }),
        Err(Errno::EACCES)
    );
    assert_eq!(get(&mut fs, group), None);
}
