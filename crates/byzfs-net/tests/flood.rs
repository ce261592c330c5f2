//! A flood from one address (issue #3, "Bad input"): too many connections, and an admitted
//! client connection pouring bad-MAC, garbage and replayed frames into the primary. Each is
//! dropped and counted, the flooding session is shed (issue #29, `node/shed.rs`), memory
//! stays bounded, and a correct client from another address keeps completing requests.

use crate::common;

use byzfs_bft::message::{Message, Request};
use byzfs_bft::services::kv::KvOp;
use byzfs_bft::wire::{encode, Auth, Envelope, REPLIER_ALL};
use byzfs_bft::Principal;
use byzfs_net::cert::session_client_id;
use byzfs_net::framing::write_frame;
use byzfs_net::handshake::{self, client_proof_data, prove, Hello, Welcome};
use byzfs_net::stream::Stream;
use byzfs_net::{kdf, ClientCredential, NodeOptions};
use common::*;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpSocket, TcpStream};

/// The flooder's source address: another host, as far as the replicas can tell.
const FLOODER: &str = "127.0.0.2:0";
const PER_ADDRESS: usize = 8;

async fn connect_from(src: &str, to: &str) -> std::io::Result<TcpStream> {
    let sock = TcpSocket::new_v4()?;
    sock.bind(src.parse().unwrap())?;
    sock.connect(to.parse().unwrap()).await
}

/// Resident memory of this process (replicas, clients and flooder all live in it), in KiB.
fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[tokio::test]
async fn a_flood_from_one_address_is_dropped_counted_and_bounded() {
    let options = NodeOptions {
        connections_per_address_max: PER_ADDRESS,
        ..NodeOptions::default()
    };
    let c = TestCluster::start_with(options);
    let mut client = c.client().await;
    put(&mut client, b"before", b"1").await;
    let primary = c.nodes[0].as_ref().unwrap();
    let addr = primary.addr().to_string();
    let net = |name: &str| primary.status().net.dropped[name];
    let core = |name: &str| {
        primary
            .status()
            .core
            .dropped
            .get(name)
            .copied()
            .unwrap_or(0)
    };

    // An admitted client connection from the flooding host.
    let cred = ClientCredential::issue(&c.cluster, &c.admin, 9).unwrap();
    let session = 77;
    let id = session_client_id(9, session).unwrap();
    let keys = kdf::client_keys(&c.cluster, &cred, id).unwrap();
    let salt = kdf::salt(&c.cluster.cluster_id, c.cluster.bft.epoch);
    let shared = kdf::shared_secret(&cred.x25519, &c.cluster.replicas[0].x25519_public).unwrap();
    let hello_key = kdf::client_hello_key(&shared, &salt, 9, 0);
    let stream = connect_from(FLOODER, &addr).await.unwrap();
    let (mut flood, welcome) =
        handshake::handshake_on(Stream::Tcp(stream), &c.cluster, 0, |ch| Hello::Client {
            cert: cred.cert.clone(),
            session,
            proof: prove(&hello_key, &client_proof_data(&ch.nonce, 9, session, 0)),
        })
        .await
        .unwrap();
    assert_eq!(welcome, Welcome::Accepted);

    // 1. Connections beyond the per-address limit are refused and counted; they do not
    //    stop the correct client, which connects from 127.0.0.1.
    let mut idle = Vec::new();
    for _ in 0..3 * PER_ADDRESS {
        if let Ok(s) = connect_from(FLOODER, &addr).await {
            idle.push(s);
        }
    }
    wait_for(|| net("connection_limit") >= (2 * PER_ADDRESS) as u64).await;

    // 2. Frames: a valid signed request (replayed), the same with its MACs spoiled, garbage.
    let env = Envelope {
        sender: Principal::Client(id),
        epoch: c.cluster.bft.epoch,
        flags: 0,
        replier: REPLIER_ALL,
    };
    let request = Message::Request(Request {
        client: id,
        rid: 1,
        acked: 0,
        after: 0,
        op: KvOp::Put {
            key: b"flood".to_vec(),
            value: vec![7; 512],
        }
        .encode(),
    });
    let signing = keys.signing.clone().unwrap();
    let valid = encode(
        env,
        &request,
        Auth::SignedAuthenticator(&signing, &keys.to_replica),
    );
    // A spoiled signature: every MAC (computed over header ‖ signature) fails with it. (A
    // spoiled MAC alone is not enough: the primary then accepts the request on its signature.)
    let mut bad_mac = valid.clone();
    let sig_at = bad_mac.len() - 16 * c.cluster.n() - 64;
    bad_mac[sig_at] ^= 0x55;
    let garbage = vec![0xEE; 1500];
    let (bad_auth0, malformed0, rss0) = (core("bad_auth"), core("malformed"), rss_kib());

    let flooder = tokio::spawn(async move {
        let deadline = Instant::now() + Duration::from_secs(4);
        let mut sent = 0u64;
        while Instant::now() < deadline {
            for f in [&valid, &bad_mac, &garbage] {
                if write_frame(&mut flood, f).await.is_err() {
                    return sent;
                }
                sent += 1;
            }
            if sent.is_multiple_of(300) {
                let _ = flood.flush().await;
            }
        }
        sent
    });

    // 3. Meanwhile the correct client keeps completing requests, each within OP_TIMEOUT.
    let started = Instant::now();
    let mut done = 0;
    while started.elapsed() < Duration::from_secs(4) {
        put(&mut client, format!("during{done}").as_bytes(), b"2").await;
        done += 1;
    }
    let sent = flooder.await.unwrap();
    assert!(done >= 5, "only {done} requests completed during the flood");
    // Flood protection (`node/shed.rs`): once 256 of the session's frames in a second were
    // useless, the primary sheds it (its connection closes, its handshakes are refused), so
    // the flood ends there.
    assert!(
        sent >= 256,
        "the flood was too weak to mean anything ({sent} frames)"
    );
    wait_for(|| net("shed") >= 1).await;

    // Dropped and counted.
    wait_for(|| core("bad_auth") > bad_auth0 && core("malformed") > malformed0).await;
    // Bounded: the inbox holds at most `inbox_bytes` (256 MiB by default, of which a flood of
    // 1.5 KiB frames fills little); the frames themselves are not retained.
    let grown_mib = rss_kib().saturating_sub(rss0) / 1024;
    assert!(
        grown_mib < 128,
        "memory grew by {grown_mib} MiB during the flood"
    );
    // The replayed request ran (exactly once: the value is the request's). It reached the
    // primary only: the backups authenticated it through the primary's introduction of the
    // client (`byzfs_net::intro`), not through a handshake of their own.
    assert_eq!(
        get(&mut client, b"flood", false).await.map(|v| v.len()),
        Some(512)
    );
    drop(idle);
    put(&mut client, b"after", b"3").await;
    c.wait_converged().await;
}
