//! The file service replicated by the real `byzfs-bft` replicas and client (f = 1, n = 4),
//! with a toy driver that delivers every frame at once: ordered operations (with the agreed
//! timestamp proposed and checked through the service), read-only operations on the
//! read-only path, and identical replica states at the end.

use byzfs_bft::{Action, Client, ClientAction, Config, Replica, Service, TestKeys, Time};
use byzfs_fs::{
    decode_result, Credentials, FileHandle, FileService, FsConfig, FsResult, Op, Reply, Request,
};
use std::sync::Arc;

struct Cluster {
    replicas: Vec<Replica<FileService>>,
    client: Client,
    now: Time,
}

impl Cluster {
    fn new() -> Cluster {
        let config = Config::new(1);
        let keys = TestKeys::new(42, config.n());
        let cfg = FsConfig {
            partitions: 64,
            ..FsConfig::trusted()
        };
        let now = Time::from_micros(1_700_000_000_000_000);
        let replicas = (0..4)
            .map(|i| {
                Replica::new(
                    config.clone(),
                    keys.replica(i, [7]),
                    FileService::in_memory(cfg.clone()),
                    i as u64,
                    now,
                )
            })
            .collect();
        let client = Client::new(config, keys.client(7), 1);
        Cluster {
            replicas,
            client,
            now,
        }
    }

    /// Invokes `op`, with the read-only flag the service itself would give it, and runs the
    /// cluster until the client has its result and no message is in flight.
    fn call(&mut self, op: Op) -> FsResult {
        let bytes = Request::new(Credentials::root(), op).encode();
        let read_only = self.replicas[0].service().is_read_only(&bytes);
        self.now = self.now.plus(core::time::Duration::from_millis(1));
        self.client
            .invoke(self.now, bytes, read_only)
            .expect("no request outstanding");
        let mut in_flight: Vec<(u32, Arc<[u8]>)> = Vec::new();
        let mut result = None;
        for _ in 0..100 {
            while let Some(a) = self.client.poll_action() {
                match a {
                    ClientAction::Send { to, bytes } => in_flight.push((to, bytes)),
                    ClientAction::Broadcast { bytes } => {
                        (0..4).for_each(|i| in_flight.push((i, bytes.clone())))
                    }
                    ClientAction::Completed { result: r, .. } => {
                        result = Some(decode_result(&r).expect("result decodes"));
                    }
                    ClientAction::Reissued { .. } => {}
                }
            }
            if in_flight.is_empty() {
                if let Some(r) = result {
                    return r;
                }
            }
            for (to, bytes) in std::mem::take(&mut in_flight) {
                self.replicas[to as usize].handle_message(self.now, &bytes);
            }
            for i in 0..4 {
                while let Some(a) = self.replicas[i].poll_action() {
                    match a {
                        Action::Send { to, bytes } => in_flight.push((to, bytes)),
                        Action::Broadcast { bytes } => (0..4u32)
                            .filter(|&j| j != i as u32)
                            .for_each(|j| in_flight.push((j, bytes.clone()))),
                        Action::SendClient { bytes, .. } => {
                            self.client.handle_message(self.now, &bytes)
                        }
                        Action::Persist(_) | Action::Store(_) | Action::Event(_) | Action::Sync => {
                        }
                    }
                }
            }
        }
        panic!("the cluster did not complete the request (read-only: {read_only})");
    }
}

#[test]
fn four_replicas_run_the_file_service() {
    let mut c = Cluster::new();
    let f = match c.call(Op::Create {
        dir: FileHandle::ROOT,
        name: b"hello".to_vec(),
        mode: 0o644,
        exclusive: true,
    }) {
        Ok(Reply::Made { entry: a, .. }) => a,
        other => panic!("{other:?}"),
    };
    // mtime comes from the agreed timestamp: within the clock tolerance of the driver's now.
    let mtime_us = f.mtime.secs as u64 * 1_000_000 + u64::from(f.mtime.nsecs / 1000);
    assert!(mtime_us.abs_diff(c.now.as_micros()) <= 1_000_000);
    let w = c.call(Op::Write {
        fh: f.fh,
        offset: 0,
        data: b"replicated".to_vec(),
    });
    assert!(matches!(w, Ok(Reply::Write { count: 10, .. })));
    assert_eq!(
        c.call(Op::Read {
            fh: f.fh,
            offset: 0,
            count: 100
        }),
        Ok(Reply::Read {
            data: b"replicated".to_vec(),
            eof: true
        })
    );
    assert_eq!(
        c.call(Op::Mkdir {
            dir: FileHandle::ROOT,
            name: b"hello".to_vec(),
            mode: 0o755
        }),
        Err(byzfs_fs::Errno::EEXIST)
    );
    let Ok(Reply::ReadDir { entries, eof }) = c.call(Op::ReadDir {
        dir: FileHandle::ROOT,
        cookie: 0,
        max_entries: 10,
    }) else {
        panic!()
    };
    assert!(eof);
    assert_eq!(entries.len(), 3);
    let d0 = c.replicas[0].service().current_partition_digests();
    for r in &c.replicas[1..] {
        assert_eq!(r.service().current_partition_digests(), d0);
    }
}
