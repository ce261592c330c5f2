//! Every decoder of the runtime that reads bytes from outside (issue #43): handshake
//! messages and client introductions from any peer on the network, the cluster file and key
//! files from disk. Random bytes, valid encodings with bytes changed, cut or added, and
//! nesting far deeper than any valid file: each gives a value or an error, never a panic
//! or a stack overflow.

use byzfs_net::cluster::ClusterConfig;
use byzfs_net::handshake::{Hello, Welcome};
use byzfs_net::intro::ClientIntro;
use byzfs_net::keygen::{keygen, KeygenOptions};
use byzfs_net::{ClientCert, ClientCredential, SetupError};
use proptest::prelude::*;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::OnceLock;

/// A keygen'd cluster, made once: its directory, cluster file text and a client key's text.
struct Fixture {
    dir: tempfile::TempDir,
    cluster: String,
    client_key: String,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = KeygenOptions::local(4, "127.0.0.1", 7300).expect("options");
        let g = keygen(dir.path(), &opts).expect("keygen");
        let cluster = std::fs::read_to_string(&g.config).expect("cluster file");
        let client_key = std::fs::read_to_string(&g.client_keys[0]).expect("client key");
        Fixture {
            dir,
            cluster,
            client_key,
        }
    })
}

fn cert() -> ClientCert {
    let f = fixture();
    let cluster = ClusterConfig::parse(&f.cluster, Path::new("cluster.toml")).expect("parses");
    let path = f.dir.path().join("client-1.key");
    ClientCredential::load(&path, &cluster)
        .expect("client key")
        .cert
}

/// Bytes with up to five edits: a byte changed, the tail cut, or a byte added.
fn edited(seed: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let edits = prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..6);
    edits.prop_map(move |edits| {
        let mut b = seed.clone();
        for (at, byte, how) in edits {
            match how {
                0 if !b.is_empty() => {
                    let i = at.index(b.len());
                    b[i] = byte;
                }
                1 if !b.is_empty() => b.truncate(at.index(b.len())),
                _ => b.push(byte),
            }
        }
        b
    })
}

fn hello_seed() -> Vec<u8> {
    postcard::to_allocvec(&Hello::Client {
        cert: cert(),
        session: 7,
        proof: [3; byzfs_net::handshake::PROOF_LEN],
    })
    .expect("encodes")
}

fn intro_seed() -> Vec<u8> {
    ClientIntro {
        cert: cert(),
        session: 9,
    }
    .encode()
}

/// A valid text with a TOML array nested `depth` deep in place of one value.
fn deep_toml(text: &str, depth: usize) -> String {
    let nested = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
    text.replacen(
        "view_change_timeout_ms = 5000",
        &format!("view_change_timeout_ms = {nested}"),
        1,
    )
}

#[test]
fn deep_nesting_in_files_is_an_error_not_an_overflow() {
    let f = fixture();
    assert!(f.cluster.contains("view_change_timeout_ms = 5000"));
    let text = deep_toml(&f.cluster, 100_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cluster.toml");
    std::fs::write(&path, &text).expect("write");
    // On a small stack: the parser must not recurse once per level.
    let e = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || ClusterConfig::load(&path).map(|_| ()))
        .expect("thread")
        .join()
        .expect("no overflow, no panic");
    let Err(e @ SetupError::Parse { .. }) = e else {
        panic!("a deeply nested file parsed or failed otherwise: {e:?}")
    };
    assert!(!e.to_string().contains('\n'), "one line: {e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn handshake_messages_never_panic(
        bytes in prop_oneof![prop::collection::vec(any::<u8>(), 0..300), edited(hello_seed())]
    ) {
        let _ = postcard::from_bytes::<Hello>(&bytes);
        let _ = postcard::from_bytes::<Welcome>(&bytes);
    }

    #[test]
    fn introductions_never_panic(
        bytes in prop_oneof![prop::collection::vec(any::<u8>(), 0..300), edited(intro_seed())]
    ) {
        if let Some(intro) = ClientIntro::decode(&bytes) {
            // What decodes encodes back to a frame that decodes to the same.
            prop_assert_eq!(ClientIntro::decode(&intro.encode()), Some(intro));
        }
    }

    #[test]
    fn cluster_files_never_panic(
        bytes in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..300),
            edited(fixture().cluster.clone().into_bytes()),
        ]
    ) {
        let text = String::from_utf8_lossy(&bytes);
        if let Err(e) = ClusterConfig::parse(&text, Path::new("cluster.toml")) {
            prop_assert!(!e.to_string().contains('\n'), "one line: {}", e);
        }
    }

    #[test]
    fn client_key_files_never_panic(
        bytes in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..300),
            edited(fixture().client_key.clone().into_bytes()),
        ]
    ) {
        let f = fixture();
        let cluster = ClusterConfig::parse(&f.cluster, Path::new("cluster.toml")).expect("parses");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("client.key");
        std::fs::write(&path, &bytes).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        if let Err(e) = ClientCredential::load(&path, &cluster) {
            prop_assert!(!e.to_string().contains('\n'), "one line: {}", e);
        }
    }
}
