//! Where an encrypted mount starts (`crypt.rs`): the member's keys from its lockbox, the
//! last writer-proof sequence number it used, and the group's tree at the cluster's root —
//! made and joined to the group, with its header, by the first writer that mounts it.

use crate::crypt::{tree_name, Crypt, Encryption};
use crate::fsclient::FsClient;
use anyhow::{anyhow, bail, Context as _};
use byzfs_crypt::file::{self, DirHeader};
use byzfs_crypt::member::open_mine;
use byzfs_crypt::CryptError;
use byzfs_fs::crypt_write::sign_with_headers;
use byzfs_fs::{decode_result, Credentials, Errno, FileHandle, FileType, FsResult, Op, Reply};
use std::collections::{BTreeMap, HashMap};

/// One operation, sent as it is.
fn call(
    rt: &tokio::runtime::Runtime,
    client: &mut FsClient,
    cred: &Credentials,
    op: Op,
) -> anyhow::Result<FsResult> {
    let read_only = op.is_read_only();
    let name = op.name();
    let bytes = client.request(cred, op);
    let out = rt
        .block_on(client.invoke(bytes, read_only))
        .with_context(|| format!("{name} at the cluster"))?;
    decode_result(&out).ok_or_else(|| {
        anyhow!("a reply that does not decode; are the replicas running --service fs?")
    })
}

/// The layer of an encrypted mount of `enc` by client `client_id`, as `cred`.
pub(crate) fn start(
    rt: &tokio::runtime::Runtime,
    client: &mut FsClient,
    enc: &Encryption,
    client_id: u64,
    cred: &Credentials,
) -> anyhow::Result<Crypt> {
    // Writer proofs bind the credentials the requests carry: mapped into the grant first.
    let cred = &client.granted(cred);
    let g = hex::encode(enc.group);
    let record = match call(rt, client, cred, Op::GroupGet { group: enc.group })? {
        Ok(Reply::Group(Some(r))) => r,
        Ok(Reply::Group(None)) => bail!("no group {g} (create it with `byzfs group create`)"),
        other => bail!("reading group {g}: {other:?}"),
    };
    let mine = match open_mine(&enc.identity, &record.lockboxes, record.version, &record.writer) {
        Ok(k) => k,
        Err(CryptError::NotMember) => bail!(
            "this identity is not a member of group {g} (its owner adds it: `byzfs group add {g} --member KEY`)"
        ),
        Err(e) => bail!("this identity's lockbox in group {g} does not open: {e}"),
    };
    let seq = match call(rt, client, cred, Op::WriterSeq)? {
        Ok(Reply::WriterSeq(n)) => n,
        other => bail!("reading the writer sequence: {other:?}"),
    };
    let mut crypt = Crypt {
        identity: enc.identity.clone(),
        group: enc.group,
        keys: mine.keys,
        writer: mine.writer,
        owner: record.owner,
        top: FileHandle::ROOT,
        client: client_id,
        seq,
        sizes: HashMap::new(),
        files: HashMap::new(),
        pending: HashMap::new(),
        expect: Vec::new(),
        dirs: HashMap::new(),
        overlay: BTreeMap::new(),
        orphans: None,
    };
    let name = tree_name(&enc.group);
    let lookup = |client: &mut FsClient| {
        call(
            rt,
            client,
            cred,
            Op::Lookup {
                dir: FileHandle::ROOT,
                name: name.clone(),
            },
        )
    };
    let mut found = lookup(client)?;
    if found == Err(Errno::ENOENT) {
        if crypt.writer.is_none() {
            bail!("group {g} has no tree yet: a writer of the group must mount it first");
        }
        let made = call(
            rt,
            client,
            cred,
            Op::Mkdir {
                dir: FileHandle::ROOT,
                name: name.clone(),
                mode: 0o755,
            },
        )?;
        if !matches!(made, Ok(_) | Err(Errno::EEXIST)) {
            bail!(
                "cannot make the group's tree /{}: {made:?}",
                String::from_utf8_lossy(&name)
            );
        }
        found = lookup(client)?;
    }
    let top = match found {
        Ok(Reply::Entry(a)) if a.kind == FileType::Directory => a,
        Ok(Reply::Entry(_)) => bail!("/{} is not a directory", String::from_utf8_lossy(&name)),
        other => bail!("looking up the group's tree: {other:?}"),
    };
    match call(rt, client, cred, Op::FileGroup { fh: top.fh })? {
        Ok(Reply::FileGroup(Some(x))) if x == enc.group => {}
        Ok(Reply::FileGroup(Some(x))) => bail!(
            "/{} belongs to group {}, not {g}",
            String::from_utf8_lossy(&name),
            hex::encode(x)
        ),
        Ok(Reply::FileGroup(None)) => {
            // Made above (or by a writer that stopped half-way): join it, with its header.
            let Some((w, _)) = &crypt.writer else {
                bail!(
                    "group {g}'s tree is not joined to the group yet: a writer must mount it first"
                );
            };
            let h = DirHeader {
                names: crypt.keys.version(),
            };
            let id = file::file_id(top.fh.ino, top.fh.generation);
            let header = file::seal_dir_header(&crypt.keys, &id, h, &mut rand_core::OsRng);
            crypt.seq += 1;
            let op = sign_with_headers(
                w,
                &[enc.group],
                crypt.keys.version(),
                client_id,
                crypt.seq,
                cred,
                Op::SetGroup {
                    dir: top.fh,
                    group: enc.group,
                },
                vec![(top.fh, header)],
                Vec::new(),
            );
            match call(rt, client, cred, op)? {
                Ok(_) => {}
                Err(Errno::ENOTEMPTY) => bail!(
                    "/{} holds plain files; move them away or pick another group",
                    String::from_utf8_lossy(&name)
                ),
                Err(e) => bail!("cannot join the tree to group {g}: {e:?}"),
            }
        }
        other => bail!("reading the tree's group: {other:?}"),
    }
    crypt.top = top.fh;
    Ok(crypt)
}
