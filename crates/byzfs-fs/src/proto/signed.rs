//! A signed operation ([`Op::Signed`]): `op` with a writer's proof for each encryption group
//! whose files it changes ([`sign`], what a writer's mount sends), bound to the request by
//! [`request_digest`]; and which operations the writer check looks at ([`checked`]).

use super::codec::encode;
use super::cred::Credentials;
use super::handle::FileHandle;
use super::op::Op;
use super::proof::{signed_bytes, WriterProof};
use ed25519_dalek::{Signer, SigningKey};

/// The digest a proof binds: the request's credentials, operation, headers and expected
/// headers (what [`Op::Signed`] carries besides its proofs).
pub fn request_digest(
    cred: &Credentials,
    op: &Op,
    headers: &[(FileHandle, Vec<u8>)],
    expect: &[(FileHandle, Vec<u8>)],
) -> [u8; 32] {
    let mut h = blake3::Hasher::new_derive_key("byzfs 2026-11 writer proof request digest");
    h.update(&encode(cred));
    h.update(&encode(op));
    h.update(&encode(&headers));
    h.update(&encode(&expect));
    *h.finalize().as_bytes()
}

/// `op` as client `client` of cluster `cluster` sends it with credentials `cred` and
/// sequence number `seq`, signed with writer key `writer` (version `version`) for each of
/// `groups`, setting no header ([`sign_with_headers`]).
///
/// ```
/// use byzfs_fs::proto::signed::sign;
/// use byzfs_fs::{Credentials, FileHandle, Op};
/// let writer = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
/// let op = Op::GetAttr { fh: FileHandle::ROOT };
/// match sign(&writer, &[0; 16], &[[1; 16]], 3, 42, 5, &Credentials::root(), op.clone()) {
///     Op::Signed { seq, proofs, op: inner, .. } => {
///         assert_eq!((seq, proofs.len(), proofs[0].version, *inner), (5, 1, 3, op));
///     }
///     other => panic!("{other:?}"),
/// }
/// ```
#[allow(clippy::too_many_arguments)]
pub fn sign(
    writer: &SigningKey,
    cluster: &[u8; 16],
    groups: &[[u8; 16]],
    version: u32,
    client: u64,
    seq: u64,
    cred: &Credentials,
    op: Op,
) -> Op {
    sign_with_headers(
        writer,
        cluster,
        groups,
        version,
        client,
        seq,
        cred,
        op,
        Vec::new(),
        Vec::new(),
    )
}

/// As [`sign`], setting the sealed headers of `headers`' files after `op` ran, if the
/// files' headers are those of `expect` before.
#[allow(clippy::too_many_arguments)]
pub fn sign_with_headers(
    writer: &SigningKey,
    cluster: &[u8; 16],
    groups: &[[u8; 16]],
    version: u32,
    client: u64,
    seq: u64,
    cred: &Credentials,
    op: Op,
    headers: Vec<(FileHandle, Vec<u8>)>,
    expect: Vec<(FileHandle, Vec<u8>)>,
) -> Op {
    let digest = request_digest(cred, &op, &headers, &expect);
    let proofs = groups
        .iter()
        .map(|g| WriterProof {
            group: *g,
            version,
            signature: writer
                .sign(&signed_bytes(cluster, g, version, client, seq, &digest))
                .to_bytes()
                .to_vec(),
        })
        .collect();
    Op::Signed {
        seq,
        proofs,
        op: Box::new(op),
        headers,
        expect,
    }
}

/// Whether the writer check looks at what `op` writes (module documentation): a client
/// signs these when they may change a group's files.
pub fn checked(op: &Op) -> bool {
    !unchecked(op)
}

/// Whether `op` is outside the writer check (module documentation).
pub(crate) fn unchecked(op: &Op) -> bool {
    op.is_lock()
        || op.is_read_only()
        || matches!(
            op,
            Op::SweepOrphans { .. }
                | Op::SweepDir { .. }
                | Op::Reclaim { .. }
                | Op::ReportCapacity { .. }
                | Op::ReserveInodes { .. }
                | Op::ReturnDir { .. }
                | Op::ReturnFile { .. }
                | Op::GroupPut { .. }
        )
}
