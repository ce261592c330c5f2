//! The unreplicated baseline over real TCP: it answers the null service with and without
//! MACs, and with MACs it drops requests that are not authenticated.

use byzfs_bft::services::null::{op, NullService};
use byzfs_bft::Config;
use byzfs_net::client::UnreplicatedClient;
use byzfs_net::cluster::ClusterConfig;
use byzfs_net::keygen::{keygen, KeygenOptions};
use byzfs_net::node::UnreplicatedNode;
use byzfs_net::{ClientCredential, ReplicaSecret};
use std::time::Duration;

/// Starts an unreplicated server on its own thread and runtime; returns what a client needs
/// and the stop handle.
fn start(
    macs: bool,
) -> (
    tempfile::TempDir,
    ClusterConfig,
    ClientCredential,
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<()>,
) {
    let listeners: Vec<_> = (0..4)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let opts = KeygenOptions {
        addresses: listeners
            .iter()
            .map(|l| l.local_addr().unwrap().to_string())
            .collect(),
        clients: vec![1],
        client_grant: None,
        protocol: Config::new(1),
        local_sockets: true,
        fs: None,
    };
    let g = keygen(dir.path(), &opts).unwrap();
    let cluster = ClusterConfig::load(&g.config).unwrap();
    let cred = ClientCredential::load(&g.client_keys[0], &cluster).unwrap();
    let secret = ReplicaSecret::load(&g.replica_keys[0], &cluster, 0).unwrap();
    let listener = listeners.into_iter().next().unwrap();
    let node = UnreplicatedNode::new(cluster.clone(), secret, NullService::default(), macs)
        .unwrap()
        .with_listener(listener);
    let (stop, thread) = spawn(node);
    (dir, cluster, cred, stop, thread)
}

/// Runs `node` on its own thread and runtime until the returned sender fires.
fn spawn<S: byzfs_bft::Service + Send + 'static>(
    node: UnreplicatedNode<S>,
) -> (
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<()>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(node.run(async {
            let _ = stopped.await;
        }))
        .unwrap();
    });
    (stop, thread)
}

#[tokio::test]
async fn answers_with_and_without_macs() {
    for macs in [true, false] {
        let (_dir, cluster, cred, stop, thread) = start(macs);
        let mut c = UnreplicatedClient::connect(&cluster, &cred, macs)
            .await
            .unwrap();
        for (ro, arg, result) in [(false, 0, 0), (true, 0, 4096), (false, 4096, 0)] {
            let r =
                tokio::time::timeout(Duration::from_secs(10), c.invoke(op(ro, arg, result), ro))
                    .await
                    .expect("timed out")
                    .unwrap();
            assert_eq!(r.len(), result as usize, "macs={macs} ro={ro}");
        }
        drop(c);
        stop.send(()).unwrap();
        thread.join().unwrap();
    }
}

#[tokio::test]
async fn with_macs_unauthenticated_requests_are_dropped() {
    let (_dir, cluster, cred, stop, thread) = start(true);
    let mut plain = UnreplicatedClient::connect(&cluster, &cred, false)
        .await
        .unwrap();
    let r = tokio::time::timeout(
        Duration::from_millis(500),
        plain.invoke(op(false, 0, 0), false),
    )
    .await;
    assert!(r.is_err(), "an unauthenticated request was answered: {r:?}");
    drop(plain);
    stop.send(()).unwrap();
    thread.join().unwrap();
}

/// `disk` durability: every answered write survives a restart of the server, through several
/// stored checkpoints and the log after the last one (the reply cache's restoration is
/// tested in `oplog.rs`).
#[test]
fn disk_mode_keeps_every_answered_write_across_restarts() {
    use byzfs_bft::services::kv::{KvOp, KvResult, KvService};
    use byzfs_net::storage::DiskDurability;

    let port_probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = port_probe.local_addr().unwrap().to_string();
    drop(port_probe);
    let dir = tempfile::tempdir().unwrap();
    let mut protocol = Config::new(1);
    protocol.checkpoint_interval = 8;
    protocol.log_window = 16;
    let opts = KeygenOptions {
        addresses: (0..4)
            .map(|i| {
                if i == 0 {
                    addr.clone()
                } else {
                    format!("127.0.0.1:{}", 1 + i)
                }
            })
            .collect(),
        clients: vec![1],
        client_grant: None,
        protocol,
        // Over TCP: the other test runs NO-REP over its Unix socket.
        local_sockets: false,
        fs: None,
    };
    let g = keygen(dir.path(), &opts).unwrap();
    let cluster = ClusterConfig::load(&g.config).unwrap();
    let cred = ClientCredential::load(&g.client_keys[0], &cluster).unwrap();
    let data = dir.path().join("data");

    // One server lifetime: runs `work` against it, then stops it.
    let serve = |work: &dyn Fn(&ClusterConfig, &ClientCredential)| {
        let secret = ReplicaSecret::load(&g.replica_keys[0], &cluster, 0).unwrap();
        let disk = DiskDurability::open(&data, "unreplicated test").unwrap();
        let mut node = UnreplicatedNode::new(cluster.clone(), secret, KvService::new(), true)
            .unwrap()
            .with_durability(Box::new(disk));
        node.bind().unwrap(); // Listening before the client connects.
        let (stop, thread) = spawn(node);
        work(&cluster, &cred);
        stop.send(()).unwrap();
        thread.join().unwrap();
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let call = |c: &mut UnreplicatedClient, op: KvOp, ro: bool| -> KvResult {
        let bytes = op.encode();
        let r = rt
            .block_on(async {
                tokio::time::timeout(Duration::from_secs(10), c.invoke(bytes, ro)).await
            })
            .expect("timed out")
            .unwrap();
        KvResult::decode(&r).unwrap()
    };
    let connect = |cluster: &ClusterConfig, cred: &ClientCredential| {
        rt.block_on(UnreplicatedClient::connect(cluster, cred, true))
            .unwrap()
    };
    let expected =
        |n: usize| -> Vec<u8> { (0..n).flat_map(|i| format!("{i};").into_bytes()).collect() };
    let append = |i: usize| KvOp::Append {
        key: b"log".to_vec(),
        value: format!("{i};").into_bytes(),
    };
    let get = || KvOp::Get {
        key: b"log".to_vec(),
    };

    // 45 appends: 5 checkpoints of 8, and 5 operations in the log after the last.
    serve(&|cluster, cred| {
        let mut c = connect(cluster, cred);
        for i in 0..45 {
            call(&mut c, append(i), false);
        }
        assert_eq!(
            call(&mut c, get(), true),
            KvResult::Value(Some(expected(45)))
        );
    });
    serve(&|cluster, cred| {
        let mut c = connect(cluster, cred);
        assert_eq!(
            call(&mut c, get(), true),
            KvResult::Value(Some(expected(45))),
            "after a restart"
        );
        for i in 45..50 {
            call(&mut c, append(i), false);
        }
    });
    serve(&|cluster, cred| {
        let mut c = connect(cluster, cred);
        assert_eq!(
            call(&mut c, get(), true),
            KvResult::Value(Some(expected(50))),
            "after a second restart"
        );
    });
}
