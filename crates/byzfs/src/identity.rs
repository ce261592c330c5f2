//! `byzfs identity new|show`: a member's key pair for encrypted trees (issue #28,
//! docs/ARCHITECTURE.md "Encryption", "Keys"), kept in a TOML file of mode 0600. It never leaves
//! the member's machine: groups name members by the public `member_key`, and the replicas
//! store only lockboxes sealed to it.

use anyhow::{bail, Context as _};
use byzfs_crypt::member::Identity;
use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct IdentityArgs {
    #[command(subcommand)]
    op: IdentityCommand,
}

#[derive(Subcommand, Debug)]
enum IdentityCommand {
    /// Make a new identity and write it to FILE (mode 0600).
    New {
        /// Where to write it.
        file: PathBuf,
        /// Replace an existing file (the old identity's lockboxes stay sealed to it).
        #[arg(long)]
        force: bool,
    },
    /// Print an identity's public keys: `member_key` is what a group owner adds.
    Show {
        /// The identity file.
        file: PathBuf,
    },
}

/// The file's fields: hex, 32 bytes each.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct IdentityFile {
    /// Public: what a group's owner adds (`byzfs group add GROUP --member KEY`).
    member_key: String,
    /// Public: the key the groups this identity owns name as their owner.
    owner_key: String,
    /// Secret: opens lockboxes.
    x25519_secret: String,
    /// Secret: signs the records of the groups this identity owns.
    ed25519_secret: String,
}

fn key32(field: &str, hex_text: &str, path: &Path) -> anyhow::Result<[u8; 32]> {
    let bytes = hex::decode(hex_text.trim())
        .ok()
        .and_then(|b| <[u8; 32]>::try_from(b).ok());
    bytes.with_context(|| {
        format!(
            "{}: `{field}` is not 64 hex digits; the file is damaged (make another with `byzfs identity new`)",
            path.display()
        )
    })
}

/// Loads an identity, refusing a file others can read and one whose public keys do not
/// match its secrets.
pub fn load(path: &Path) -> anyhow::Result<Identity> {
    let meta = std::fs::metadata(path)
        .with_context(|| format!("cannot read identity {}", path.display()))?;
    if meta.permissions().mode() & 0o077 != 0 {
        bail!(
            "{} can be read by other users; run `chmod 600 {}`",
            path.display(),
            path.display()
        );
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read identity {}", path.display()))?;
    let f: IdentityFile = toml::from_str(&text).with_context(|| {
        format!(
            "{} is not an identity file (make one with `byzfs identity new`)",
            path.display()
        )
    })?;
    let id = Identity::from_secrets(
        key32("x25519_secret", &f.x25519_secret, path)?,
        key32("ed25519_secret", &f.ed25519_secret, path)?,
    );
    if key32("member_key", &f.member_key, path)? != id.member_key()
        || key32("owner_key", &f.owner_key, path)? != id.owner_key()
    {
        bail!(
            "{}: the public keys do not match the secret ones; the file is damaged",
            path.display()
        );
    }
    Ok(id)
}

pub fn write_new(path: &Path, id: &Identity, force: bool) -> anyhow::Result<()> {
    let (x, e) = id.secrets();
    let f = IdentityFile {
        member_key: hex::encode(id.member_key()),
        owner_key: hex::encode(id.owner_key()),
        x25519_secret: hex::encode(x),
        ed25519_secret: hex::encode(e),
    };
    let text = format!(
        "# A ByzFS identity (byzfs identity new). Secret: whoever reads it opens every\n\
         # lockbox sealed to it. Give others only member_key (or owner_key).\n{}",
        toml::to_string(&f)?
    );
    if path.exists() && !force {
        bail!("{} exists; pass --force to replace it", path.display());
    }
    let mut opts = OpenOptions::new();
    opts.write(true).mode(0o600);
    if force {
        opts.create(true).truncate(true);
    } else {
        opts.create_new(true);
    }
    let mut file = opts
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    // An existing file keeps its mode on truncation: make it 0600 either way.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    Ok(())
}

pub fn run(a: IdentityArgs) -> anyhow::Result<ExitCode> {
    match a.op {
        IdentityCommand::New { file, force } => {
            let id = Identity::generate(&mut rand_core::OsRng);
            write_new(&file, &id, force)?;
            println!("wrote {}", file.display());
            println!("member_key {}", hex::encode(id.member_key()));
        }
        IdentityCommand::Show { file } => {
            let id = load(&file)?;
            println!("member_key {}", hex::encode(id.member_key()));
            println!("owner_key  {}", hex::encode(id.owner_key()));
        }
    }
    Ok(ExitCode::SUCCESS)
}
