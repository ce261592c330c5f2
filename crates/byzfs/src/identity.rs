//! `byzfs identity new|show`: a member's key pair for encrypted trees (issue #28,
//! docs/ENCRYPTION.md "Keys"), kept in a TOML file of mode 0600. It never leaves
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
    // Never through a symbolic link (`--force` would otherwise truncate whatever it names),
    // and never half-written: a new file beside it, renamed over it.
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => bail!(
            "{} is a symbolic link; refusing to write an identity through it",
            path.display()
        ),
        Ok(_) if !force => bail!("{} exists; pass --force to replace it", path.display()),
        Ok(m) if !m.is_file() => bail!("{} is not a regular file", path.display()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot write {}", path.display())),
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut nonce = [0u8; 8];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut nonce);
    let tmp = dir.join(format!(".byzfs-identity-{}.tmp", hex::encode(nonce)));
    let written = write_private(&tmp, text.as_bytes()).and_then(|()| {
        if force {
            // Replaces the name itself, whatever it is now (a link made meanwhile included).
            std::fs::rename(&tmp, path)
        } else {
            // Fails if the name exists by now: never replaces a file without --force.
            std::fs::hard_link(&tmp, path)
        }
    });
    let _ = std::fs::remove_file(&tmp);
    written.with_context(|| format!("cannot write {}", path.display()))?;
    if let Ok(d) = std::fs::File::open(dir) {
        // The rename lasts past a crash.
        let _ = d.sync_all();
    }
    Ok(())
}

/// A new file `path` (never an existing one or a link: `O_CREAT | O_EXCL`, and
/// `O_NOFOLLOW`) of mode 0600 holding `bytes`, synced.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)?;
    // The mode the umask left: 0600 whatever it is.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(bytes)?;
    file.sync_all()
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
    }

    /// Issue #43 item 5 (9): `--force` over a symbolic link leaves the link and what it
    /// names alone.
    #[test]
    fn force_refuses_a_symbolic_link_and_leaves_its_target_alone() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep me\n").unwrap();
        let link = dir.path().join("me.id");
        symlink(&victim, &link).unwrap();
        let id = Identity::generate(&mut rand_core::OsRng);
        let e = write_new(&link, &id, true).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{} is a symbolic link; refusing to write an identity through it",
                link.display()
            )
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me\n");
        assert_eq!(std::fs::read_link(&link).unwrap(), victim);
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["me.id", "victim"], "no file left behind");
    }

    #[test]
    fn force_replaces_a_file_whole_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("me.id");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let id = Identity::generate(&mut rand_core::OsRng);
        let e = write_new(&p, &id, false).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{} exists; pass --force to replace it", p.display())
        );
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old");
        write_new(&p, &id, true).unwrap();
        assert_eq!(mode(&p), 0o600);
        assert_eq!(load(&p).unwrap().member_key(), id.member_key());
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no file left behind");
        // A new file: 0600 too, and no replacing without --force.
        let q = dir.path().join("new.id");
        write_new(&q, &id, false).unwrap();
        assert_eq!(mode(&q), 0o600);
        assert!(write_new(&q, &id, false).is_err());
    }
}
