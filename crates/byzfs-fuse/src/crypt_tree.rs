//! Where an encrypted mount starts (`crypt.rs`): the group's record, checked against the
//! owner the mount expects; the member's keys from its lockbox; the last writer-proof
//! sequence number it used; and the group's tree at the cluster's root — made, joined to
//! the group and given its header in one request by the first writer that mounts it.
//!
//! A `/g-<id>` that is not in group `id` (made by someone else first: the replicas let a
//! directory join a group only in the request that makes it, `byzfs_fs::crypt_file`) is
//! refused: nothing of the group is ever written into a directory of another group or of
//! none.

use crate::crypt::{authenticated, tree_name, Crypt, Encryption};
use crate::wire::Wire;
use anyhow::{anyhow, bail};
use byzfs_crypt::file::{self, DirHeader};
use byzfs_crypt::member::{open_mine, GroupRef};
use byzfs_crypt::CryptError;
use byzfs_fs::proto::signed::sign_with_headers;
use byzfs_fs::{decode_result, Credentials, Errno, FileHandle, FileType, FsResult, Op, Reply};

/// One operation, sent as it is.
fn call(wire: &Wire, cred: &Credentials, op: Op) -> anyhow::Result<FsResult> {
    let read_only = op.is_read_only();
    let name = op.name();
    let out = wire
        .wait(
            wire.call(wire.request(cred, op), read_only.into()),
            None,
            name,
        )
        .unwrap_or_else(|| Err("no answer".into()))
        .map_err(|e| anyhow!("{name} at the cluster: {e}"))?;
    decode_result(&out).ok_or_else(|| {
        anyhow!("a reply that does not decode; are the replicas running --service fs?")
    })
}

/// The layer of an encrypted mount of `enc` on cluster `cluster` by client `client_id`, as
/// `cred`.
pub(crate) fn start(
    wire: &Wire,
    enc: &Encryption,
    cluster: &[u8; 16],
    client_id: u64,
    cred: &Credentials,
) -> anyhow::Result<Crypt> {
    // Writer proofs bind the credentials the requests carry: mapped into the grant first.
    let cred = &wire.granted(cred);
    let g = hex::encode(enc.group);
    let group = GroupRef {
        cluster: *cluster,
        group: enc.group,
        owner: enc.owner,
    };
    let signed = match call(wire, cred, Op::GroupGet { group: enc.group })? {
        Ok(Reply::Group(Some(r))) => r,
        Ok(Reply::Group(None)) => bail!("no group {g} (create it with `byzfs group create`)"),
        other => bail!("reading group {g}: {other:?}"),
    };
    let record = authenticated(&group, signed).map_err(|why| anyhow!("group {g}: {why}"))?;
    let mine = match open_mine(
        &enc.identity,
        &group,
        &record.lockboxes,
        record.version,
        &record.writer,
    ) {
        Ok(k) => k,
        Err(CryptError::NotMember) => bail!(
            "this identity is not a member of group {g} (its owner adds it: `byzfs group add {g} --member KEY`)"
        ),
        Err(e) => bail!("this identity's lockbox in group {g} does not open: {e}"),
    };
    let seq = match call(wire, cred, Op::WriterSeq)? {
        Ok(Reply::WriterSeq(n)) => n,
        other => bail!("reading the writer sequence: {other:?}"),
    };
    let mut crypt = Crypt::new(enc.identity.clone(), group, mine, client_id, seq);
    let name = tree_name(&enc.group);
    let shown = String::from_utf8_lossy(&name).into_owned();
    let lookup = || {
        call(
            wire,
            cred,
            Op::Lookup {
                dir: FileHandle::ROOT,
                name: name.clone(),
            },
        )
    };
    let mut found = lookup()?;
    if found == Err(Errno::ENOENT) {
        make_tree(wire, &mut crypt, cred, &name)?;
        found = lookup()?;
    }
    let top = match found {
        Ok(Reply::Entry(a)) if a.kind == FileType::Directory => a,
        Ok(Reply::Entry(_)) => bail!("/{shown} is not a directory"),
        other => bail!("looking up the group's tree: {other:?}"),
    };
    match call(wire, cred, Op::FileGroup { fh: top.fh })? {
        Ok(Reply::FileGroup(Some(x))) if x == enc.group => {}
        Ok(Reply::FileGroup(x)) => bail!(
            "/{shown} is not group {g}'s tree (it is in {}): someone else made it first; \
             refusing to mount it. Its maker can remove it, or use a group of another name",
            x.map_or_else(
                || "no group".to_string(),
                |x| format!("group {}", hex::encode(x))
            )
        ),
        other => bail!("reading the tree's group: {other:?}"),
    }
    crypt.top = top.fh;
    Ok(crypt)
}

/// Makes the group's tree `/name`, joined to the group and with its header, in one
/// request (a writer only); another writer making it meanwhile is no error.
fn make_tree(
    wire: &Wire,
    crypt: &mut Crypt,
    cred: &Credentials,
    name: &[u8],
) -> anyhow::Result<()> {
    let g = hex::encode(crypt.g.group);
    let Some((w, _)) = &crypt.writer else {
        bail!("group {g} has no tree yet: a writer of the group must mount it first");
    };
    let at = match call(wire, cred, Op::ReserveInodes { count: 1 })? {
        Ok(Reply::Reserved { first, .. }) => first,
        other => bail!("reserving the tree's handle: {other:?}"),
    };
    let h = DirHeader {
        names: crypt.keys.version(),
    };
    let id = file::file_id(at.ino, at.generation);
    let header = file::seal_dir_header(&crypt.keys, &id, h, &mut rand_core::OsRng);
    crypt.seq += 1;
    let make = Op::Batch(vec![
        Op::MakeAt {
            time: None,
            at,
            make: Box::new(Op::Mkdir {
                dir: FileHandle::ROOT,
                name: name.to_vec(),
                mode: 0o755,
            }),
        },
        Op::SetGroup {
            dir: at,
            group: crypt.g.group,
        },
    ]);
    let op = sign_with_headers(
        w,
        &crypt.g.cluster,
        &[crypt.g.group],
        crypt.keys.version(),
        crypt.client,
        crypt.seq,
        cred,
        make,
        vec![(at, header)],
        Vec::new(),
    );
    match call(wire, cred, op)? {
        Ok(_) | Err(Errno::EEXIST) => Ok(()),
        Err(e) => bail!(
            "cannot make the group's tree /{}: {e:?}",
            String::from_utf8_lossy(name)
        ),
    }
}
