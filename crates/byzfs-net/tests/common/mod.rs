//! A 4-replica KV cluster over real TCP on loopback, each replica on its own thread with its
//! own `current_thread` runtime.

#![allow(dead_code)]

use byzfs_bft::services::kv::{KvOp, KvResult, KvService};
use byzfs_bft::Config;
use byzfs_net::cluster::ClusterConfig;
use byzfs_net::keygen::{keygen, KeygenOptions};
use byzfs_net::{AdminSecret, ByzClient, ClientCredential, NodeHandle, ReplicaNode, ReplicaSecret};
use std::time::Duration;

/// Deadline of any single client operation in tests.
pub const OP_TIMEOUT: Duration = Duration::from_secs(20);

pub struct TestCluster {
    pub dir: tempfile::TempDir,
    pub cluster: ClusterConfig,
    pub nodes: Vec<Option<NodeHandle>>,
    pub cred: ClientCredential,
    pub admin: AdminSecret,
}

pub fn protocol() -> Config {
    let mut c = Config::new(1);
    c.checkpoint_interval = 16;
    c.log_window = 32;
    c.view_change_timeout = Duration::from_millis(1000);
    c
}

impl TestCluster {
    /// Binds four listeners on ports chosen by the OS, generates keys for those addresses,
    /// and starts the replicas.
    pub fn start() -> TestCluster {
        TestCluster::start_with(byzfs_net::NodeOptions::default())
    }

    /// Like [`TestCluster::start`], with the runtime's `options`.
    pub fn start_with(options: byzfs_net::NodeOptions) -> TestCluster {
        TestCluster::start_prepared(options, |_| {})
    }

    /// Like [`TestCluster::start_with`]; `prepare` runs on the loaded configuration after
    /// the keys are generated and before any replica starts.
    pub fn start_prepared(
        options: byzfs_net::NodeOptions,
        prepare: impl FnOnce(&ClusterConfig),
    ) -> TestCluster {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
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
            protocol: protocol(),
            // Peers and the test clients use the Unix sockets; tests that dial the TCP
            // address themselves (flood.rs) still can.
            local_sockets: true,
            fs: None,
        };
        let g = keygen(dir.path(), &opts).unwrap();
        let cluster = ClusterConfig::load(&g.config).unwrap();
        prepare(&cluster);
        // Every replica binds its sockets before any starts, as separate processes do
        // before they restore their state: the first links find the Unix sockets there.
        let bound: Vec<_> = listeners
            .into_iter()
            .enumerate()
            .map(|(i, l)| {
                let secret = ReplicaSecret::load(&g.replica_keys[i], &cluster, i as u32).unwrap();
                let mut node = ReplicaNode::new(cluster.clone(), secret, KvService::new())
                    .unwrap()
                    .with_options(options.clone())
                    .with_listener(l);
                node.bind().unwrap();
                node
            })
            .collect();
        let nodes = bound
            .into_iter()
            .map(|node| Some(NodeHandle::spawn(node).unwrap()))
            .collect();
        let cred = ClientCredential::load(&g.client_keys[0], &cluster).unwrap();
        let admin = AdminSecret::load(&g.admin_key, &cluster).unwrap();
        TestCluster {
            dir,
            cluster,
            nodes,
            cred,
            admin,
        }
    }

    pub async fn client(&self) -> ByzClient {
        tokio::time::timeout(OP_TIMEOUT, ByzClient::connect(&self.cluster, &self.cred))
            .await
            .expect("connect timed out")
            .expect("connect")
    }

    pub fn stop(&mut self, i: usize) {
        if let Some(n) = self.nodes[i].take() {
            n.stop().unwrap();
        }
    }
}

pub async fn put(c: &mut ByzClient, k: &[u8], v: &[u8]) {
    let op = KvOp::Put {
        key: k.to_vec(),
        value: v.to_vec(),
    };
    let r = tokio::time::timeout(OP_TIMEOUT, c.invoke(op.encode(), false))
        .await
        .expect("put timed out")
        .expect("put");
    assert_eq!(KvResult::decode(&r), Some(KvResult::Ok));
}

pub async fn get(c: &mut ByzClient, k: &[u8], read_only: bool) -> Option<Vec<u8>> {
    let op = KvOp::Get { key: k.to_vec() };
    let r = tokio::time::timeout(OP_TIMEOUT, c.invoke(op.encode(), read_only))
        .await
        .expect("get timed out")
        .expect("get");
    match KvResult::decode(&r) {
        Some(KvResult::Value(v)) => v,
        other => panic!("unexpected get result {other:?}"),
    }
}

/// Polls `cond` until it holds (panics after [`OP_TIMEOUT`]).
pub async fn wait_for(mut cond: impl FnMut() -> bool) {
    tokio::time::timeout(OP_TIMEOUT, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("condition not reached in time");
}

impl TestCluster {
    /// Waits until every running replica reports the same, positive `last_executed` and all
    /// its peer links up.
    pub async fn wait_converged(&self) {
        wait_for(|| {
            let s: Vec<_> = self.nodes.iter().flatten().map(|n| n.status()).collect();
            let up = s.len() as u32 - 1;
            s.iter().all(|x| {
                x.last_executed == s[0].last_executed
                    && x.last_executed > 0
                    && x.peers_connected >= up
            })
        })
        .await
    }
}
