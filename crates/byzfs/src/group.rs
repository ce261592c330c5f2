//! `byzfs group create|add|remove|list`: encryption groups (issue #28,
//! docs/ENCRYPTION.md). A group's record — its owner, name, key version,
//! writer public key and one lockbox per member — is replicated state
//! (`byzfs_fs::crypt_group`); this command builds each new version from the owner's
//! identity and the cluster's id alone (`byzfs_crypt::member`) and sends it signed, and
//! checks the owner's signature on every record it reads. Every change is a new key version with a
//! new writer key, so a removed writer is refused from its next write on, and a removed
//! member cannot open what is written afterwards.

use anyhow::{anyhow, bail, Context as _};
use byzfs_crypt::member::{self, Identity, Role};
use byzfs_fs::proto::group::{authenticate, signed_bytes, GroupRecord};
use byzfs_fs::{decode_result, Credentials, Errno, Op, Reply};
use byzfs_fuse::fsclient::FsClient;
use byzfs_net::cluster::ClusterConfig;
use byzfs_net::ClientCredential;
use clap::{Args, Subcommand};
use ed25519_dalek::Signer as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct GroupArgs {
    /// The cluster file.
    #[arg(long)]
    config: PathBuf,
    /// The client credential (default: client-1.key beside the config).
    #[arg(long)]
    key: Option<PathBuf>,
    /// Your identity (`byzfs identity new`).
    #[arg(long)]
    identity: PathBuf,
    /// Give up after this long.
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    #[command(subcommand)]
    op: GroupCommand,
}

#[derive(Subcommand, Debug)]
enum GroupCommand {
    /// Make a group you own, with you as its first writer; prints its id.
    Create {
        /// Its name (the id derives from your identity and the name).
        name: String,
    },
    /// Add a member (or change a member's role). You must own the group.
    Add {
        /// A group you own, by name, or any group by its 32-hex-digit id.
        group: String,
        /// The member's `member_key` (`byzfs identity show`).
        #[arg(long)]
        member: String,
        /// May write (default: read only).
        #[arg(long)]
        writer: bool,
    },
    /// Remove a member: a new key version it cannot open. You must own the group.
    Remove {
        /// A group you own, by name, or any group by its id.
        group: String,
        /// The member's `member_key`.
        #[arg(long)]
        member: String,
    },
    /// Show a group's version, owner and members, and what your identity may do.
    List {
        /// A group you own, by name, or any group by its id.
        group: String,
    },
}

/// A group argument: 32 hex digits are an id; anything else a name you own.
pub fn group_of(arg: &str, me: &Identity) -> [u8; 16] {
    match hex::decode(arg)
        .ok()
        .and_then(|b| <[u8; 16]>::try_from(b).ok())
    {
        Some(id) if arg.len() == 32 => id,
        _ => me.group_id(arg),
    }
}

/// The group a mount's `--group` names and the owner it must have: `--owner` (64 hex
/// digits) if given, else `me`; a name is that owner's group of that name.
pub fn expected(
    group: &str,
    owner: Option<&str>,
    me: &Identity,
) -> anyhow::Result<([u8; 16], [u8; 32])> {
    let owner = match owner {
        Some(k) => hex::decode(k.trim())
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .ok_or_else(|| {
                anyhow!("--owner must be an owner_key: 64 hex digits (`byzfs identity show FILE`)")
            })?,
        None => me.owner_key(),
    };
    let id = hex::decode(group)
        .ok()
        .and_then(|b| <[u8; 16]>::try_from(b).ok());
    Ok(match id {
        Some(id) if group.len() == 32 => (id, owner),
        _ => (byzfs_fs::proto::group::group_id(&owner, group), owner),
    })
}

fn member_key(arg: &str) -> anyhow::Result<[u8; 32]> {
    hex::decode(arg.trim())
        .ok()
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .ok_or_else(|| {
            anyhow!("--member must be a member_key: 64 hex digits (`byzfs identity show FILE`)")
        })
}

/// The cluster, through one client.
struct Cluster {
    client: FsClient,
    /// Its id (`cluster.toml`), which records' signatures and every key name.
    id: [u8; 16],
}

impl Cluster {
    async fn call(&mut self, op: Op) -> anyhow::Result<Result<Reply, Errno>> {
        let read_only = op.is_read_only();
        // Group records are authorised by their owner's signature, not by credentials:
        // root, mapped into the client's grant as any caller.
        let bytes = self.client.request(&Credentials::root(), op);
        let out = self.client.invoke(bytes, read_only).await?;
        decode_result(&out).ok_or_else(|| {
            anyhow!("the cluster's reply does not decode; are the replicas running --service fs?")
        })
    }

    /// The record of `group`, checked against the signature of the owner it names (the
    /// caller checks that owner is the one it expects).
    async fn get(&mut self, group: [u8; 16]) -> anyhow::Result<Option<GroupRecord>> {
        let signed = match self.call(Op::GroupGet { group }).await? {
            Ok(Reply::Group(r)) => r,
            other => bail!("reading the group: unexpected reply {other:?}"),
        };
        let Some(s) = signed else { return Ok(None) };
        if let Err(e) = authenticate(&self.id, &group, &s.record, &s.signature) {
            bail!(
                "the cluster served a record of group {} its owner did not sign ({e:?})",
                hex::encode(group)
            );
        }
        Ok(Some(s.record))
    }

    /// Sends version `version` of `me`'s group `name` with `members`, signed by `me`.
    async fn put(
        &mut self,
        me: &Identity,
        name: &str,
        version: u32,
        members: &[([u8; 32], Role)],
    ) -> anyhow::Result<()> {
        let g = me.group_ref(&self.id, name);
        let (writer, lockboxes) =
            member::seal_record(me, &g, version, members, &mut rand_core::OsRng)?;
        let record = GroupRecord {
            owner: me.owner_key(),
            name: name.to_string(),
            version,
            writer,
            lockboxes,
        };
        let group = g.group;
        let signature = me
            .signing_key()
            .sign(&signed_bytes(&self.id, &group, &record))
            .to_bytes()
            .to_vec();
        match self
            .call(Op::GroupPut {
                group,
                record,
                signature,
            })
            .await?
        {
            Ok(_) => Ok(()),
            Err(Errno::ESTALE) => bail!(
                "the group changed meanwhile (another version {version} was stored); run the command again"
            ),
            Err(Errno::EACCES) => bail!("refused: the group is owned by another identity"),
            Err(e) => bail!("refused by the cluster: {e:?}"),
        }
    }
}

/// Makes `me`'s group `name` unless it exists (`byzfs up --encrypt`); its id.
pub async fn ensure(
    cluster: &ClusterConfig,
    cred: &ClientCredential,
    me: &Identity,
    name: &str,
) -> anyhow::Result<[u8; 16]> {
    let mut c = Cluster {
        client: FsClient::connect(cluster, cred, false).await?,
        id: cluster.cluster_id,
    };
    let group = me.group_id(name);
    if c.get(group).await?.is_none() {
        c.put(me, name, 1, &[(me.member_key(), Role::Writer)])
            .await?;
    }
    Ok(group)
}

/// The record of `group` as its owner `me` changes it.
fn owned(record: Option<GroupRecord>, me: &Identity, arg: &str) -> anyhow::Result<GroupRecord> {
    let r =
        record.ok_or_else(|| anyhow!("no group {arg} (create it with `byzfs group create`)"))?;
    if r.owner != me.owner_key() {
        bail!(
            "group {arg} is owned by {}, not by this identity",
            hex::encode(r.owner)
        );
    }
    Ok(r)
}

pub fn run(a: GroupArgs) -> anyhow::Result<ExitCode> {
    crate::logging::init("warn");
    let me = crate::identity::load(&a.identity)?;
    let (cluster, cred) = crate::kv::cluster_and_credential(&a.config, a.key.as_deref())?;
    let timeout = Duration::from_millis(a.timeout_ms);
    byzfs_net::signals::runtime()?.block_on(async {
        let work = async {
            let mut c = Cluster {
                client: FsClient::connect(&cluster, &cred, false).await?,
                id: cluster.cluster_id,
            };
            command(&mut c, &me, a.op).await
        };
        tokio::time::timeout(timeout, work).await.map_err(|_| {
            anyhow!(
                "no reply within {} ms; is the cluster up? (byzfs status --config {})",
                a.timeout_ms,
                a.config.display()
            )
        })?
    })
}

async fn command(c: &mut Cluster, me: &Identity, op: GroupCommand) -> anyhow::Result<ExitCode> {
    match op {
        GroupCommand::Create { name } => {
            let max = byzfs_fs::proto::group::MAX_NAME;
            if name.len() > max {
                bail!("a group's name is at most {max} bytes");
            }
            let group = me.group_id(&name);
            if c.get(group).await?.is_some() {
                bail!(
                    "you already have a group named {name} ({})",
                    hex::encode(group)
                );
            }
            c.put(me, &name, 1, &[(me.member_key(), Role::Writer)])
                .await
                .context("create")?;
            println!("group {name} {}", hex::encode(group));
        }
        GroupCommand::Add {
            group: arg,
            member: m,
            writer,
        } => {
            let group = group_of(&arg, me);
            let r = owned(c.get(group).await?, me, &arg)?;
            let m = member_key(&m)?;
            let role = if writer { Role::Writer } else { Role::Reader };
            let mut members = member::members_of(&r.lockboxes);
            members.retain(|(k, _)| *k != m);
            members.push((m, role));
            let version = r
                .version
                .checked_add(1)
                .context("the group has no key version left")?;
            c.put(me, &r.name, version, &members).await.context("add")?;
            println!(
                "group {} version {version}: {} members",
                hex::encode(group),
                members.len()
            );
        }
        GroupCommand::Remove {
            group: arg,
            member: m,
        } => {
            let group = group_of(&arg, me);
            let r = owned(c.get(group).await?, me, &arg)?;
            let m = member_key(&m)?;
            let mut members = member::members_of(&r.lockboxes);
            let before = members.len();
            members.retain(|(k, _)| *k != m);
            if members.len() == before {
                bail!("{} is not a member of group {arg}", hex::encode(m));
            }
            let version = r
                .version
                .checked_add(1)
                .context("the group has no key version left")?;
            c.put(me, &r.name, version, &members)
                .await
                .context("remove")?;
            println!(
                "group {} version {version}: {} members",
                hex::encode(group),
                members.len()
            );
        }
        GroupCommand::List { group: arg } => {
            let group = group_of(&arg, me);
            let r = c
                .get(group)
                .await?
                .ok_or_else(|| anyhow!("no group {arg}"))?;
            println!("group    {}", hex::encode(group));
            println!("name     {}", r.name);
            println!("version  {}", r.version);
            println!("owner    {}", hex::encode(r.owner));
            println!("writer   {}", hex::encode(r.writer));
            println!("{:<64}  role", "member");
            for (k, role) in member::members_of(&r.lockboxes) {
                let you = if k == me.member_key() { " (you)" } else { "" };
                let role = match role {
                    Role::Reader => "reader",
                    Role::Writer => "writer",
                };
                println!("{}  {role}{you}", hex::encode(k));
            }
            let g = member::GroupRef {
                cluster: c.id,
                group,
                owner: r.owner,
            };
            match member::open_mine(me, &g, &r.lockboxes, r.version, &r.writer) {
                Ok(k) if k.writer.is_some() => {
                    println!("you: writer, key version {} opens", r.version)
                }
                Ok(_) => println!("you: reader, key version {} opens", r.version),
                Err(byzfs_crypt::CryptError::NotMember) => println!("you: not a member"),
                Err(e) => bail!("your lockbox does not open: {e}"),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
