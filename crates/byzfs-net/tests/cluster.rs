//! An in-process 4-replica cluster over real TCP serves the async client: puts and gets
//! (read-write and read-only, small and large), with a backup stopped, with new clients
//! admitted without restart; forged certificates and garbage on the wire are refused and
//! counted without disturbing anyone else.

use crate::common;

use byzfs_net::cert::session_client_id;
use byzfs_net::counters::NetDrop;
use byzfs_net::framing::{read_frame, write_frame};
use byzfs_net::handshake::{self, client_proof_data, prove, Hello, Welcome};
use byzfs_net::keygen::{keygen, KeygenOptions};
use byzfs_net::{
    kdf, AdminSecret, ByzClient, ClientCredential, ClientError, NodeOptions, ReplicaSecret,
};
use common::{get, put, wait_for, TestCluster, OP_TIMEOUT};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

#[tokio::test]
async fn kv_puts_and_gets_over_tcp() {
    let c = TestCluster::start();
    let mut client = c.client().await;
    for i in 0..24u32 {
        put(&mut client, format!("k{i}").as_bytes(), &i.to_le_bytes()).await;
    }
    for i in 0..24u32 {
        let key = format!("k{i}");
        let want = Some(i.to_le_bytes().to_vec());
        assert_eq!(get(&mut client, key.as_bytes(), true).await, want);
        assert_eq!(get(&mut client, key.as_bytes(), false).await, want);
    }
    assert_eq!(get(&mut client, b"absent", true).await, None);

    // Every replica executed everything, in view 0, and a checkpoint became stable (K = 16).
    c.wait_converged().await;
    wait_for(|| {
        c.nodes.iter().flatten().all(|n| {
            let s = n.status();
            s.last_stable >= 16 && s.core.requests_executed == 24 + 24 // puts, rw gets
        })
    })
    .await;
    for n in c.nodes.iter().flatten() {
        let s = n.status();
        assert_eq!((s.view, s.primary, s.peers_connected), (0, 0, 3), "{s:?}");
    }

    // A large operation and a large result: a 900 KiB request (sent to every replica and
    // ordered by digest) and a 900 KiB reply. No view assertion here: when a backup receives
    // the PRE-PREPARE before the request body, the core only recovers through a view change
    // (a core bug, reported with this milestone).
    let big: Vec<u8> = (0..900 * 1024u32).map(|i| i as u8).collect();
    put(&mut client, b"big", &big).await;
    assert_eq!(
        get(&mut client, b"big", true).await.as_deref(),
        Some(&big[..])
    );
    let want = Some(3u32.to_le_bytes().to_vec());
    assert_eq!(get(&mut client, b"k3", false).await, want);
    c.wait_converged().await;
    // Replica 2's own count, read before it is asked: the cluster may order more after it
    // converged (replica 0 was once seen one batch ahead here), a replica never goes back.
    let seq = c.nodes[2].as_ref().unwrap().status().last_executed;

    // The status request of the handshake protocol.
    let st = handshake::query_status(&c.cluster, 2, OP_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(st.replica, 2);
    assert!(st.last_executed >= seq);
    assert_eq!(st.durability, "memory");
    // Its peers and the client reached it over its Unix socket (all on this host).
    assert!(st.net.local_connections_accepted >= 3, "{:?}", st.net);
}

/// `next_completed` (the mount's lanes): 24 appends and gets on three keys, submitted
/// without waiting, are each collected exactly once, and each get saw exactly the appends
/// submitted before it.
#[tokio::test]
async fn next_completed_collects_every_submitted_request_once() {
    use byzfs_bft::services::kv::{KvOp, KvResult};
    let c = TestCluster::start();
    let mut client = c.client().await;
    let mut want = std::collections::BTreeMap::new();
    for i in 0..24u32 {
        let key = format!("k{}", i % 3).into_bytes();
        let op = if i % 4 == 3 {
            KvOp::Get { key }
        } else {
            KvOp::Append {
                key,
                value: format!("{i};").into_bytes(),
            }
        };
        let id = client
            .submit(op.encode(), i % 4 == 3)
            .await
            .expect("submit");
        want.insert(id, i);
    }
    let mut got = std::collections::BTreeMap::new();
    while got.len() < want.len() {
        let (id, r) = tokio::time::timeout(OP_TIMEOUT, client.next_completed())
            .await
            .expect("next_completed timed out")
            .expect("next_completed");
        assert!(want.contains_key(&id), "{id} was not submitted");
        assert!(got.insert(id, KvResult::decode(&r)).is_none(), "{id} twice");
    }
    // Each get saw the appends submitted before it, and only those (submission order).
    for (id, i) in &want {
        if i % 4 == 3 {
            let key = i % 3;
            let seen: String = (0..*i)
                .filter(|j| j % 3 == key && j % 4 != 3)
                .map(|j| format!("{j};"))
                .collect();
            let expect = (!seen.is_empty()).then(|| seen.into_bytes());
            assert_eq!(got[id], Some(KvResult::Value(expect)), "get {i}");
        }
    }
    assert!(matches!(
        client.next_completed().await,
        Err(ClientError::UnknownRequest(0))
    ));
    assert_eq!(client.outstanding(), 0);
}

/// Several requests in flight (docs/PROTOCOL.md §1.6): 40 appends and 4 reads submitted without
/// waiting run in submission order (each append's result is the whole log so far), and
/// their results are collected in any order.
#[tokio::test]
async fn a_window_of_requests_runs_in_the_order_submitted() {
    use byzfs_bft::services::kv::{KvOp, KvResult};
    let c = TestCluster::start();
    let mut client = c.client().await;
    let mut ids = Vec::new();
    let mut most_in_flight = 0;
    for i in 0..40u32 {
        let op = KvOp::Append {
            key: b"log".to_vec(),
            value: format!("{i};").into_bytes(),
        };
        let id = tokio::time::timeout(OP_TIMEOUT, client.submit(op.encode(), false))
            .await
            .expect("submit timed out")
            .expect("submit");
        ids.push((Some(i), id));
        if i % 10 == 9 {
            // A read while writes are outstanding: ordered after them.
            let get = KvOp::Get {
                key: b"log".to_vec(),
            };
            let id = client.submit(get.encode(), true).await.expect("submit");
            ids.push((None, id));
        }
        most_in_flight = most_in_flight.max(client.outstanding());
    }
    assert!(most_in_flight > 1, "one request at a time");
    let log = |upto: u32| (0..=upto).map(|j| format!("{j};")).collect::<String>();
    let mut last_append = 0;
    let mut want = Vec::new();
    for (append, _) in &ids {
        if let Some(i) = append {
            last_append = *i;
        }
        want.push(Some(KvResult::Value(Some(log(last_append).into_bytes()))));
    }
    let mut got = vec![None; ids.len()];
    for (k, (_, id)) in ids.iter().enumerate().rev() {
        let r = tokio::time::timeout(OP_TIMEOUT, client.wait(*id))
            .await
            .expect("wait timed out")
            .expect("wait");
        got[k] = KvResult::decode(&r);
    }
    assert_eq!(got, want);
    let first = ids[0].1;
    assert!(matches!(
        client.wait(first).await,
        Err(ClientError::UnknownRequest(id)) if id == first
    ));
    assert_eq!(client.outstanding(), 0);
}

#[tokio::test]
async fn links_fall_back_to_tcp_when_the_local_sockets_cannot_be_opened() {
    // A regular file where each socket should be: no replica can listen there, and
    // connecting to it fails, so every link must use TCP.
    let c = TestCluster::start_prepared(NodeOptions::default(), |cluster| {
        for r in &cluster.replicas {
            std::fs::write(r.local_socket.as_ref().unwrap(), b"in the way").unwrap();
        }
    });
    let mut client = c.client().await;
    put(&mut client, b"k", b"v").await;
    assert_eq!(get(&mut client, b"k", false).await, Some(b"v".to_vec()));
    c.wait_converged().await;
    for r in &c.cluster.replicas {
        let st = c.nodes[r.id as usize].as_ref().unwrap().status();
        assert!(st.net.connections_accepted >= 3, "{:?}", st.net);
        assert_eq!(st.net.local_connections_accepted, 0);
        // The files in the way were left alone.
        assert_eq!(
            std::fs::read(r.local_socket.as_ref().unwrap()).unwrap(),
            b"in the way"
        );
    }
}

#[tokio::test]
async fn requests_complete_with_one_backup_stopped() {
    let mut c = TestCluster::start();
    let mut client = c.client().await;
    put(&mut client, b"before", b"1").await;
    c.stop(3); // A backup: the primary of view 0 is replica 0.
    for i in 0..10u32 {
        put(&mut client, format!("after{i}").as_bytes(), b"2").await;
        assert_eq!(
            get(&mut client, format!("after{i}").as_bytes(), true).await,
            Some(b"2".to_vec())
        );
    }
    assert_eq!(
        get(&mut client, b"before", false).await,
        Some(b"1".to_vec())
    );
    // A new client still connects with 3 of 4 replicas reachable.
    let mut late = c.client().await;
    assert_eq!(get(&mut late, b"after9", false).await, Some(b"2".to_vec()));
}

#[tokio::test]
async fn new_client_joins_without_restart_and_forged_certificates_are_refused() {
    let c = TestCluster::start();
    let fresh = ClientCredential::issue(&c.cluster, &c.admin, 77).unwrap();
    let mut client = ByzClient::connect(&c.cluster, &fresh).await.unwrap();
    put(&mut client, b"new", b"client").await;
    assert_eq!(
        get(&mut client, b"new", true).await,
        Some(b"client".to_vec())
    );

    // A certificate signed by another cluster's admin.
    let other = tempfile::tempdir().unwrap();
    let g = keygen(
        other.path(),
        &KeygenOptions::local(4, "127.0.0.1", 7300).unwrap(),
    )
    .unwrap();
    let other_cluster = byzfs_net::ClusterConfig::load(&g.config).unwrap();
    let other_admin = AdminSecret::load(&g.admin_key, &other_cluster).unwrap();
    let mut forged = ClientCredential::issue(&c.cluster, &other_admin, 5).unwrap();
    match ByzClient::connect(&c.cluster, &forged).await {
        Err(ClientError::Unreachable { up: 0, details, .. }) => {
            assert!(
                details.contains("not signed by this cluster's admin key"),
                "{details}"
            )
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("forged certificate accepted"),
    }
    // A genuine certificate presented without its secret key.
    forged.cert = c.cred.cert.clone();
    match ByzClient::connect(&c.cluster, &forged).await {
        Err(ClientError::Unreachable { up: 0, details, .. }) => {
            assert!(
                details.contains("does not hold the certificate's key"),
                "{details}"
            )
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("stolen certificate accepted"),
    }
    let n1 = c.nodes[1].as_ref().unwrap();
    wait_for(|| n1.status().net.dropped["bad_handshake"] >= 2).await;
}

/// A replica's own client (`byzfs_net::cert::REPLICA_CLIENT_FIRST`, its disk reports) is
/// certified by that replica's key: admitted as such, and no one else can take its id.
#[tokio::test]
async fn a_replicas_own_client_is_certified_by_that_replica_only() {
    use byzfs_net::cert::{replica_client_id, ClientCert, REPLICA_CLIENT_FIRST};
    let c = TestCluster::start();
    let keys = |i: u32| {
        let path = byzfs_net::keygen::replica_key_path(c.dir.path(), i);
        ReplicaSecret::load(&path, &c.cluster, i).unwrap()
    };
    let own = ClientCredential::for_replica(&c.cluster, &keys(2)).unwrap();
    assert_eq!(own.cert.client, replica_client_id(2).unwrap());
    let mut client = ByzClient::connect(&c.cluster, &own).await.unwrap();
    put(&mut client, b"own", b"2").await;
    assert_eq!(get(&mut client, b"own", true).await, Some(b"2".to_vec()));

    // The admin cannot issue these ids, and a certificate for one signed by the admin or
    // by another replica is refused.
    assert!(ClientCredential::issue(&c.cluster, &c.admin, REPLICA_CLIENT_FIRST).is_err());
    let mut forged = ClientCredential::for_replica(&c.cluster, &keys(1)).unwrap();
    for signer in [&c.admin.ed25519, &keys(1).ed25519] {
        forged.cert = ClientCert::issue(
            signer,
            c.cluster.cluster_id,
            replica_client_id(2).unwrap(),
            forged.cert.x25519_public_key.0,
            forged.cert.ed25519_public_key.0,
        );
        match ByzClient::connect(&c.cluster, &forged).await {
            Err(ClientError::Unreachable { up: 0, details, .. }) => {
                assert!(details.contains("not signed by"), "{details}")
            }
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("a certificate for replica 2's client signed by someone else"),
        }
    }
}

#[tokio::test]
async fn garbage_is_dropped_and_counted_without_affecting_other_peers() {
    let c = TestCluster::start();
    let mut client = c.client().await;
    put(&mut client, b"a", b"1").await;
    let target = 1u32;
    let node = c.nodes[target as usize].as_ref().unwrap();
    let addr = node.addr();
    let counters = |name: &str| node.status().net.dropped[name];
    let malformed = || {
        node.status()
            .core
            .dropped
            .get("malformed")
            .copied()
            .unwrap_or(0)
    };

    // 1. Garbage instead of a hello.
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let _challenge = read_frame(&mut s, 1 << 16).await.unwrap();
    write_frame(&mut s, b"\x00garbage hello").await.unwrap();
    s.flush().await.unwrap();
    let mut buf = [0u8; 1];
    let _ = tokio::time::timeout(OP_TIMEOUT, s.read(&mut buf)).await;
    // 2. An oversized hello.
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let _challenge = read_frame(&mut s, 1 << 16).await.unwrap();
    s.write_all(&u32::MAX.to_le_bytes()).await.unwrap();
    let _ = tokio::time::timeout(OP_TIMEOUT, s.read(&mut buf)).await;
    wait_for(|| counters("bad_handshake") >= 2).await;

    // 3. An authenticated client connection sending garbage frames, then an oversized one.
    let cred = ClientCredential::issue(&c.cluster, &c.admin, 9).unwrap();
    let session = 1234;
    let salt = kdf::salt(&c.cluster.cluster_id, c.cluster.bft.epoch);
    let shared = kdf::shared_secret(&cred.x25519, &c.cluster.replicas[1].x25519_public).unwrap();
    let key = kdf::client_hello_key(&shared, &salt, 9, target);
    let make = |ch: &handshake::Challenge| Hello::Client {
        cert: cred.cert.clone(),
        session,
        proof: prove(&key, &client_proof_data(&ch.nonce, 9, session, target)),
    };
    let (mut s, welcome) = handshake::dial(&c.cluster, target, make, OP_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(welcome, Welcome::Accepted);
    assert!(session_client_id(9, session).is_some());
    let before = malformed();
    write_frame(&mut s, &[0xAB; 200]).await.unwrap();
    write_frame(&mut s, b"").await.unwrap();
    let mut header_only = vec![0u8; 64];
    header_only[..3].copy_from_slice(b"BZ\x01");
    write_frame(&mut s, &header_only).await.unwrap();
    s.flush().await.unwrap();
    wait_for(|| malformed() >= before + 3).await;
    // The connection survives garbage that is correctly framed …
    write_frame(&mut s, &[1, 2, 3]).await.unwrap();
    s.flush().await.unwrap();
    wait_for(|| malformed() >= before + 4).await;
    // … but not a length above message_bytes_max: counted, and the connection is closed.
    let oversized = (c.cluster.bft.message_bytes_max as u32) + 1;
    s.write_all(&oversized.to_le_bytes()).await.unwrap();
    s.flush().await.unwrap();
    let eof = tokio::time::timeout(OP_TIMEOUT, s.read(&mut buf))
        .await
        .unwrap();
    assert!(matches!(eof, Ok(0) | Err(_)), "connection should be closed");
    wait_for(|| counters("oversized") == 1).await;

    // Nobody else noticed: the real client carries on and every replica keeps up.
    for i in 0..5u32 {
        put(&mut client, format!("b{i}").as_bytes(), b"2").await;
    }
    assert_eq!(get(&mut client, b"a", true).await, Some(b"1".to_vec()));
    c.wait_converged().await;
    assert_eq!(NetDrop::Oversized.name(), "oversized");
}

#[tokio::test]
async fn view_change_when_the_primary_stops() {
    // Exercises the runtime's timers: the backups' view-change timeout (1 s here) and the
    // client's retransmissions drive the cluster to view 1.
    let mut c = TestCluster::start();
    let mut client = c.client().await;
    put(&mut client, b"x", b"1").await;
    c.stop(0);
    put(&mut client, b"y", b"2").await;
    assert_eq!(get(&mut client, b"x", false).await, Some(b"1".to_vec()));
    c.wait_converged().await;
    // Status snapshots trail the replicas by up to the status interval: poll.
    wait_for(|| {
        c.nodes.iter().flatten().all(|n| {
            let s = n.status();
            s.view >= 1 && s.has_new_view && s.primary != 0 && s.core.views_installed >= 1
        })
    })
    .await;
}

/// Each replica link is two connections (`link_lane.rs`): a proof opens only the lane it
/// names, and a new connection supersedes only the older one of its own lane.
#[tokio::test]
async fn a_replica_links_lanes_are_opened_and_superseded_apart() {
    use byzfs_net::handshake::replica_proof_data;
    use byzfs_net::link_lane::LinkLane;
    let c = TestCluster::start();
    let mut client = c.client().await;
    put(&mut client, b"a", b"1").await;
    let (from, to) = (0u32, 1u32);
    let path = byzfs_net::keygen::replica_key_path(c.dir.path(), from);
    let secret = ReplicaSecret::load(&path, &c.cluster, from).unwrap();
    let shared = kdf::shared_secret(
        &secret.x25519,
        &c.cluster.replicas[to as usize].x25519_public,
    )
    .unwrap();
    let salt = kdf::salt(&c.cluster.cluster_id, c.cluster.bft.epoch);
    let key = kdf::replica_hello_key(&shared, &salt, from, to);
    // The control lane's proof does not open the bulk lane.
    let wrong = |ch: &handshake::Challenge| Hello::ReplicaBulk {
        from,
        proof: prove(
            &key,
            &replica_proof_data(&ch.nonce, from, to, LinkLane::Control),
        ),
    };
    let (_, welcome) = handshake::dial(&c.cluster, to, wrong, OP_TIMEOUT)
        .await
        .unwrap();
    assert!(
        matches!(&welcome, Welcome::Rejected { reason } if reason.contains("bad handshake proof")),
        "{welcome:?}"
    );
    // Its own proof does; replica 0 then reconnects its bulk lane, which closes ours.
    let right = |ch: &handshake::Challenge| {
        Hello::replica(
            LinkLane::Bulk,
            from,
            prove(
                &key,
                &replica_proof_data(&ch.nonce, from, to, LinkLane::Bulk),
            ),
        )
    };
    let (mut s, welcome) = handshake::dial(&c.cluster, to, right, OP_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(welcome, Welcome::Accepted);
    // Replica 0's link carries on (its control connection was never closed; its bulk one
    // comes back at its next frame or reconnect).
    for i in 0..5u32 {
        put(&mut client, format!("k{i}").as_bytes(), b"2").await;
    }
    assert_eq!(get(&mut client, b"a", true).await, Some(b"1".to_vec()));
    c.wait_converged().await;
    // Ours is superseded once replica 0's bulk connection is back.
    let mut buf = [0u8; 1];
    let eof = tokio::time::timeout(OP_TIMEOUT, s.read(&mut buf))
        .await
        .expect("a superseded connection is closed");
    assert!(matches!(eof, Ok(0) | Err(_)), "{eof:?}");
}
