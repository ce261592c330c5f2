//! Encryption groups' records (`byzfs_fs::crypt_group`): created and changed only by their
//! owner's signature, one version at a time; anything else refused alike at every replica,
//! and nothing of a refused change stored.

mod common;

use byzfs_fs::crypt_group::{signed_bytes, GroupRecord, MAX_LOCKBOX, MAX_LOCKBOXES};
use byzfs_fs::{Errno, Op, Reply};
use common::*;
use ed25519_dalek::{Signer, SigningKey};

const G: [u8; 16] = [5; 16];

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn record(owner: &SigningKey, version: u32, writer: u8, members: usize) -> GroupRecord {
    GroupRecord {
        owner: owner.verifying_key().to_bytes(),
        version,
        writer: key(writer).verifying_key().to_bytes(),
        lockboxes: vec![vec![version as u8; 136]; members],
    }
}

fn put(fs: &mut Fs, signer: &SigningKey, record: &GroupRecord) -> Result<Reply, Errno> {
    let signature = signer.sign(&signed_bytes(&G, record)).to_bytes().to_vec();
    fs.run(Op::GroupPut {
        group: G,
        record: record.clone(),
        signature,
    })
}

fn get(fs: &mut Fs) -> Option<GroupRecord> {
    match fs.run(Op::GroupGet { group: G }) {
        Ok(Reply::Group(r)) => r,
        other => panic!("group_get: {other:?}"),
    }
}

#[test]
fn only_the_owner_changes_a_group_one_version_at_a_time() {
    let mut fs = Fs::new();
    let owner = key(1);
    let stranger = key(2);
    assert_eq!(get(&mut fs), None);
    // A new group starts at version 1, signed by the owner it names.
    let v1 = record(&owner, 1, 10, 3);
    assert_eq!(
        put(&mut fs, &owner, &record(&owner, 2, 10, 3)),
        Err(Errno::ESTALE)
    );
    assert_eq!(put(&mut fs, &stranger, &v1), Err(Errno::EACCES));
    assert_eq!(put(&mut fs, &owner, &v1), Ok(Reply::Done));
    assert_eq!(get(&mut fs), Some(v1.clone()));
    // Replaying it, or creating the group again, is stale.
    assert_eq!(put(&mut fs, &owner, &v1), Err(Errno::ESTALE));
    // A member removed: version 2, a new writer key, one lockbox fewer.
    let v2 = record(&owner, 2, 11, 2);
    assert_eq!(put(&mut fs, &stranger, &v2), Err(Errno::EACCES));
    // Someone else cannot take the group over by naming itself owner.
    assert_eq!(
        put(&mut fs, &stranger, &record(&stranger, 2, 11, 2)),
        Err(Errno::EACCES)
    );
    assert_eq!(
        put(&mut fs, &owner, &record(&owner, 3, 11, 2)),
        Err(Errno::ESTALE)
    );
    assert_eq!(put(&mut fs, &owner, &v2), Ok(Reply::Done));
    assert_eq!(get(&mut fs), Some(v2));
}

#[test]
fn malformed_changes_are_refused_and_store_nothing() {
    let mut fs = Fs::new();
    let owner = key(1);
    let mut r = record(&owner, 1, 10, MAX_LOCKBOXES + 1);
    assert_eq!(put(&mut fs, &owner, &r), Err(Errno::EINVAL), "too many");
    r.lockboxes = vec![vec![0; MAX_LOCKBOX + 1]];
    assert_eq!(put(&mut fs, &owner, &r), Err(Errno::EINVAL), "too large");
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
            group: G,
            record: v1.clone(),
            signature: vec![0; 63],
        }),
        Err(Errno::EINVAL)
    );
    // A good signature over another group's record.
    let signature = owner.sign(&signed_bytes(&[6; 16], &v1)).to_bytes().to_vec();
    assert_eq!(
        fs.run(Op::GroupPut {
            group: G,
            record: v1,
            signature,
        }),
        Err(Errno::EACCES)
    );
    assert_eq!(get(&mut fs), None);
}
