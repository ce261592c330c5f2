//! The file service the `fs-` families replicate (`byzfs_fs::FileService` on its in-memory
//! store), how the simulated clients are certified to use it, its workload ([`workload`]),
//! the reference model the checkers replay the agreed history through ([`model`]) and the
//! canonical tree dump they compare checkpoints with ([`tree`]).
//!
//! **Credentials.** The service runs as a replica's does, under
//! [`ClientPolicy::Certified`]: every request carries a grant the simulated admin signed for
//! its client (session bits 0, so a client's certificate id is its client id), allowing uid
//! and gid [`UID`] only. The root directory belongs to that user, and every client acts as it,
//! so permissions never decide a result and the model need not know them.

pub mod disk;
pub mod model;
pub mod tree;
pub mod workload;

use byzfs_bft::ClientId;
use byzfs_fs::policy::Certified;
use byzfs_fs::proto::grant::{Grant, Ids, SignedGrant, NOBODY};
use byzfs_fs::store::LogStore;
use byzfs_fs::{
    decode_result, ClientPolicy, Credentials, FileService, FsConfig, Op, Reply, Request,
};
use core::time::Duration;
use ed25519_dalek::SigningKey;

pub use model::{FsModel, Outcome};
pub use workload::FsWorkload;

/// The user every simulated client acts as, owner of the root directory.
pub const UID: u32 = 1000;
/// Its group.
pub const GID: u32 = 1000;
/// Permission bits of the root directory.
pub const ROOT_MODE: u32 = 0o755;
/// State partitions: few, so that state transfer moves several and each holds several files.
pub const PARTITIONS: u32 = 16;
/// The simulated cluster's id, which grants' signatures cover.
const CLUSTER: [u8; 16] = *b"byzfs-sim-fs-cl\0";
/// Client certificate ids from here on are replicas' own clients (none is simulated).
const REPLICA_CLIENTS: u64 = 1 << 40;

/// The simulated cluster admin's key (a constant: the simulation certifies, it does not
/// attack the certification).
fn admin() -> SigningKey {
    SigningKey::from_bytes(&[0x5a; 32])
}

/// The service's configuration, identical at every replica; `clock_tolerance` as the plan
/// says.
pub fn config(clock_tolerance: Duration) -> FsConfig {
    FsConfig {
        partitions: PARTITIONS,
        root_uid: UID,
        root_gid: GID,
        root_mode: ROOT_MODE,
        clock_tolerance,
        cluster_id: CLUSTER,
        client_policy: ClientPolicy::Certified(Box::new(Certified {
            admin: admin().verifying_key(),
            cluster_id: CLUSTER,
            session_bits: 0,
            replica_clients: REPLICA_CLIENTS,
        })),
        ..FsConfig::default()
    }
}

/// A fresh service for one replica.
pub fn service(clock_tolerance: Duration) -> FileService {
    FileService::in_memory(config(clock_tolerance))
}

/// The service on a persistent log store on `disk`, as a `disk`-mode replica opens it: an
/// empty disk is a fresh store, one that holds a store is reopened as it is (the replica's
/// restore then returns it to its recorded checkpoint).
/// `mutation` is switched on before the store replays what the disk holds.
pub fn disk_service(
    clock_tolerance: Duration,
    disk: &disk::SimDisk,
    mutation: Option<byzfs_fs::mutation::StoreMutation>,
) -> Result<FileService<LogStore<disk::SimDisk>>, String> {
    let mut store = LogStore::open_persistent_mutated(disk.handle(), PARTITIONS, mutation)
        .map_err(|e| format!("opening the store on the simulated disk: {e}"))?;
    store.set_segment_bytes(disk::SEGMENT_BYTES);
    FileService::with_store(store, config(clock_tolerance))
        .map_err(|e| format!("initialising the store on the simulated disk: {e}"))
}

/// The credentials every simulated client states.
pub fn credentials() -> Credentials {
    Credentials::user(UID, GID)
}

/// The grant the admin signed for `client`: [`UID`] and [`GID`] only.
pub fn grant(client: ClientId) -> SignedGrant {
    let g = Grant {
        uids: Ids::Ranges(vec![(UID, UID)]),
        gids: Ids::Ranges(vec![(GID, GID)]),
        root: false,
        anon_uid: NOBODY,
        anon_gid: NOBODY,
    };
    SignedGrant::sign(&admin(), &CLUSTER, client, g)
}

fn name(n: &[u8]) -> String {
    String::from_utf8_lossy(n).into_owned()
}

fn fh(h: &byzfs_fs::FileHandle) -> String {
    format!("#{}", h.ino)
}

/// Short human form of an encoded request for traces and messages.
pub fn describe_op(op: &[u8]) -> String {
    let Some(r) = Request::decode(op) else {
        return format!("<undecodable {}B>", op.len());
    };
    match r.op {
        Op::GetAttr { fh: f } => format!("GetAttr({})", fh(&f)),
        Op::Lookup { dir, name: n } => format!("Lookup({}/{})", fh(&dir), name(&n)),
        Op::Read {
            fh: f,
            offset,
            count,
        } => format!("Read({}, {offset}+{count})", fh(&f)),
        Op::ReadDir { dir, .. } => format!("ReadDir({})", fh(&dir)),
        Op::Create {
            dir,
            name: n,
            mode,
            exclusive,
        } => format!(
            "Create({}/{}, {mode:o}{})",
            fh(&dir),
            name(&n),
            if exclusive { ", excl" } else { "" }
        ),
        Op::Mkdir { dir, name: n, .. } => format!("Mkdir({}/{})", fh(&dir), name(&n)),
        Op::Remove { dir, name: n } => format!("Remove({}/{})", fh(&dir), name(&n)),
        Op::Rmdir { dir, name: n } => format!("Rmdir({}/{})", fh(&dir), name(&n)),
        Op::Rename {
            from_dir,
            from_name,
            to_dir,
            to_name,
        } => format!(
            "Rename({}/{} -> {}/{})",
            fh(&from_dir),
            name(&from_name),
            fh(&to_dir),
            name(&to_name)
        ),
        Op::RenameNoReplace {
            from_dir,
            from_name,
            to_dir,
            to_name,
        } => format!(
            "RenameNoReplace({}/{} -> {}/{})",
            fh(&from_dir),
            name(&from_name),
            fh(&to_dir),
            name(&to_name)
        ),
        Op::Exchange {
            a_dir,
            a_name,
            b_dir,
            b_name,
        } => format!(
            "Exchange({}/{} <-> {}/{})",
            fh(&a_dir),
            name(&a_name),
            fh(&b_dir),
            name(&b_name)
        ),
        Op::Link {
            fh: f,
            dir,
            name: n,
        } => {
            format!("Link({} as {}/{})", fh(&f), fh(&dir), name(&n))
        }
        Op::Write {
            fh: f,
            offset,
            data,
        } => format!("Write({}, {offset}+{})", fh(&f), data.len()),
        Op::SetAttr { fh: f, set } => format!(
            "SetAttr({}, size={:?} mode={:?})",
            fh(&f),
            set.size,
            set.mode.map(|m| format!("{m:o}"))
        ),
        other => format!("{other:?}"),
    }
}

/// Short human form of an encoded result for traces and messages.
pub fn describe_result(result: &[u8]) -> String {
    match decode_result(result) {
        None => format!("<undecodable {}B>", result.len()),
        Some(r) => match model::project(&r) {
            Outcome::Read(data, eof) => format!("Read({}B, eof={eof})", data.len()),
            o => format!("{o:?}"),
        },
    }
}

/// Whether `op` (an encoded request) changes nothing: the ops a client may send read-only.
pub fn is_read(op: &[u8]) -> bool {
    Request::decode(op).is_some_and(|r| r.op.is_read_only())
}

/// The handles and types a reply names (what a client learns from it).
pub fn handles_in(reply: &Reply) -> Vec<(byzfs_fs::FileHandle, byzfs_fs::FileType)> {
    match reply {
        Reply::Attr(a) | Reply::Entry(a) => vec![(a.fh, a.kind)],
        Reply::Made { entry, dir } => vec![(entry.fh, entry.kind), (dir.fh, dir.kind)],
        Reply::ReadDir { entries, .. } => entries.iter().map(|e| (e.fh, e.kind)).collect(),
        _ => Vec::new(),
    }
}
