//! `byzfs bench crypt`: what each cryptographic step of an encrypted mount costs on this
//! machine (issue #28, in the spirit of Plutus's table of cryptographic costs): the mount's
//! sealing and opening of blocks, headers and names, the writer's proof and its check at
//! every replica, lockboxes, and key regression. One thread, each step repeated for about
//! `--millis` and timed as a whole.

use anyhow::Context as _;
use byzfs_crypt::file::{self, DirHeader};
use byzfs_crypt::header::{self, FileHeader, WriterKey};
use byzfs_crypt::lockbox;
use byzfs_crypt::member::{writer_cert, Identity};
use byzfs_crypt::regression::Owner;
use byzfs_crypt::{layout, tree};
use byzfs_fs::proto::proof::signed_bytes;
use byzfs_fs::proto::signed::request_digest;
use byzfs_fs::{Credentials, FileHandle, Op};
use clap::Args;
use ed25519_dalek::{Signer as _, SigningKey};
use rand_core::OsRng;
use serde::Serialize;
use std::hint::black_box;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct CryptArgs {
    /// How long to repeat each step, in milliseconds.
    #[arg(long, default_value_t = 300)]
    millis: u64,
    /// Also write one JSON row per step here: `step`, `bytes`, `us_per_op`, `mb_per_s`.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// One measured step.
#[derive(Serialize, Debug)]
struct Row {
    step: &'static str,
    /// Bytes of data the step handles (0: not a data step).
    bytes: usize,
    us_per_op: f64,
    /// `bytes` per second, in MB/s (0 when `bytes` is 0).
    mb_per_s: f64,
}

/// Repeats `f` for about `d`; µs per call.
fn time(d: Duration, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < d || n < 3 {
        f();
        n += 1;
    }
    start.elapsed().as_secs_f64() * 1e6 / n as f64
}

pub fn run(a: CryptArgs) -> anyhow::Result<ExitCode> {
    let d = Duration::from_millis(a.millis.max(1));
    let owner = Owner::new(&mut OsRng);
    let keys = owner.group_keys(3).context("group keys")?;
    let id = file::file_id(42, 7);
    let plain = vec![0x5au8; 4096];
    let sealed = file::seal_block(&keys, &id, 9, &plain, &mut OsRng);
    let me = Identity::generate(&mut OsRng);
    let group = me.group_ref(&[1; 16], "bench");
    let writer_key = SigningKey::from_bytes(&[5; 32]);
    let cert = writer_cert(&me, &group, 3, &writer_key.verifying_key().to_bytes());
    let wk = WriterKey {
        key: &writer_key,
        cert: &cert,
    };
    let fh = FileHeader {
        key_version: 3,
        version: 7,
        root: [1; 32],
        size: 123_456,
    };
    let header = header::seal(&keys, &group, &id, &fh, &wk, &mut OsRng);
    let region = vec![0x42u8; layout::REGION];
    let dir = DirHeader { names: 3 };
    let name = b"a-typical-file-name.c".to_vec();
    let sealed_name = file::seal_name(&keys, &id, dir, &name)?;
    let writer = SigningKey::from_bytes(&[7; 32]);
    let write = Op::Write {
        fh: FileHandle {
            ino: 42,
            generation: 7,
        },
        offset: 0,
        data: vec![1; 1 << 20],
    };
    let cred = Credentials::root();
    let digest = request_digest(&cred, &write, &[], &[]);
    let msg = signed_bytes(&[1; 16], &[1; 16], 3, 5, 6, &digest);
    let signature = writer.sign(&msg);
    let member = x25519_dalek::StaticSecret::random_from_rng(OsRng);
    let member_pub = x25519_dalek::PublicKey::from(&member);
    let payload = [9u8; 68];
    let boxed = lockbox::seal(&member_pub, b"bound", &payload, &mut OsRng);
    let verifying = writer.verifying_key();
    let mut rows = Vec::new();
    let mut add = |step: &'static str, bytes: usize, us: f64| {
        let mb = if bytes == 0 { 0.0 } else { bytes as f64 / us };
        rows.push(Row {
            step,
            bytes,
            us_per_op: us,
            mb_per_s: mb,
        });
    };
    add(
        "seal a 4 KiB block (mount)",
        4096,
        time(d, || {
            black_box(file::seal_block(&keys, &id, 9, &plain, &mut OsRng));
        }),
    );
    add(
        "open a 4 KiB block, tag checked",
        4096,
        time(d, || {
            black_box(file::open_block(&keys, &id, 9, &sealed.data, &sealed.entry).ok());
        }),
    );
    let mut opener = file::VouchedBlocks::new(&keys, &id);
    let mut out = vec![0; 4096];
    add(
        "open a 4 KiB block the tree vouches for (mount's reads)",
        4096,
        time(d, || {
            black_box(opener.open(&sealed.data, &sealed.entry, &mut out).ok());
        }),
    );
    add(
        "seal and sign a file header (mount, per change)",
        0,
        time(d, || {
            black_box(header::seal(&keys, &group, &id, &fh, &wk, &mut OsRng));
        }),
    );
    add(
        "check and open a file header (mount, per new header)",
        0,
        time(d, || {
            black_box(header::open(&keys, &group, &id, &header).ok());
        }),
    );
    add(
        "hash a chunk's entries (mount, per 1 MiB changed or read)",
        layout::REGION,
        time(d, || {
            black_box(tree::chunk_hash(&id, 3, &region));
        }),
    );
    add(
        "seal a name (mount)",
        name.len(),
        time(d, || {
            black_box(file::seal_name(&keys, &id, dir, &name).ok());
        }),
    );
    add(
        "open a name (mount)",
        name.len(),
        time(d, || {
            black_box(file::open_name(&keys, &id, dir, &sealed_name).ok());
        }),
    );
    add(
        "digest a 1 MiB write (mount and each replica)",
        1 << 20,
        time(d, || {
            black_box(request_digest(&cred, &write, &[], &[]));
        }),
    );
    add(
        "sign a writer proof (mount)",
        0,
        time(d, || {
            black_box(writer.sign(&msg));
        }),
    );
    add(
        "check a writer proof (each replica)",
        0,
        time(d, || {
            black_box(verifying.verify_strict(&msg, &signature).is_ok());
        }),
    );
    add(
        "seal a lockbox (owner, per member)",
        0,
        time(d, || {
            black_box(lockbox::seal(&member_pub, b"bound", &payload, &mut OsRng));
        }),
    );
    add(
        "open a lockbox (member, at mount)",
        0,
        time(d, || {
            black_box(lockbox::open(&member, b"bound", &boxed).ok());
        }),
    );
    add(
        "derive the previous key version (member)",
        0,
        time(d, || {
            black_box(keys.older(2).ok());
        }),
    );
    add(
        "derive a version from the chain head (owner)",
        0,
        time(d, || {
            black_box(owner.group_keys(3).ok());
        }),
    );
    println!("Cryptographic cost of an encrypted mount (one thread):");
    println!("{:<48} {:>12} {:>10}", "step", "µs per op", "MB/s");
    for r in &rows {
        let mb = if r.bytes >= 4096 {
            format!("{:.0}", r.mb_per_s)
        } else {
            "-".into()
        };
        println!("{:<48} {:>12.2} {:>10}", r.step, r.us_per_op, mb);
    }
    if let Some(p) = &a.json {
        let text: String = rows
            .iter()
            .map(|r| serde_json::to_string(r).map(|s| s + "\n"))
            .collect::<Result<_, _>>()?;
        std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?;
        println!("wrote {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_is_measured_and_written_as_a_json_row() {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("crypt.json");
        let code = run(CryptArgs {
            millis: 1,
            json: Some(json.clone()),
        })
        .unwrap();
        assert_eq!(code, ExitCode::SUCCESS);
        let rows: Vec<serde_json::Value> = std::fs::read_to_string(&json)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let steps: Vec<&str> = rows.iter().map(|r| r["step"].as_str().unwrap()).collect();
        assert_eq!(steps.len(), 15);
        assert_eq!(
            steps[..3],
            [
                "seal a 4 KiB block (mount)",
                "open a 4 KiB block, tag checked",
                "open a 4 KiB block the tree vouches for (mount's reads)"
            ]
        );
        assert_eq!(steps[10], "check a writer proof (each replica)");
        for r in &rows {
            assert!(r["us_per_op"].as_f64().unwrap() > 0.0, "{r}");
            let data = r["bytes"].as_u64().unwrap() > 0;
            assert_eq!(r["mb_per_s"].as_f64().unwrap() > 0.0, data, "{r}");
        }
    }
}
