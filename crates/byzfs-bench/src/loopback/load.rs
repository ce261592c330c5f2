//! Load generation: closed-loop clients in the benchmark process (one tokio
//! `current_thread` runtime), each invoking the null operation back to back and recording
//! every latency in its own HDR histogram and every completion in 100 ms buckets.

use super::stats::Recorder;
use crate::procs::{Servers, System};
use anyhow::Context as _;
use byzfs_net::client::UnreplicatedClient;
use byzfs_net::{ByzClient, ClientCredential, ClusterConfig};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::LocalSet;

/// One operation may take this long (a view change takes seconds) before the run fails.
const OP_TIMEOUT: Duration = Duration::from_secs(60);

/// A null operation: sizes in bytes and the read-only bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NullOp {
    pub arg_bytes: usize,
    pub result_bytes: u32,
    pub read_only: bool,
}

impl NullOp {
    pub fn bytes(&self) -> Vec<u8> {
        byzfs_bft::services::null::op(self.read_only, self.arg_bytes, self.result_bytes)
    }
}

/// A client of either system.
pub enum AnyClient {
    Byz(Box<ByzClient>),
    Unreplicated(Box<UnreplicatedClient>),
}

impl AnyClient {
    pub async fn connect_to(
        system: System,
        c: &ClusterConfig,
        cred: &ClientCredential,
    ) -> anyhow::Result<AnyClient> {
        Ok(match system {
            System::Byzfs => AnyClient::Byz(Box::new(ByzClient::connect(c, cred).await?)),
            System::Unreplicated => AnyClient::Unreplicated(Box::new(
                UnreplicatedClient::connect(c, cred, false).await?,
            )),
            System::UnreplicatedMac => {
                AnyClient::Unreplicated(Box::new(UnreplicatedClient::connect(c, cred, true).await?))
            }
        })
    }

    pub async fn invoke(&mut self, op: &NullOp) -> anyhow::Result<()> {
        let bytes = op.bytes();
        let f = async {
            match self {
                AnyClient::Byz(c) => c.invoke(bytes, op.read_only).await,
                AnyClient::Unreplicated(c) => c.invoke(bytes, op.read_only).await,
            }
        };
        let result = tokio::time::timeout(OP_TIMEOUT, f)
            .await
            .with_context(|| format!("an operation took more than {} s", OP_TIMEOUT.as_secs()))??;
        anyhow::ensure!(
            result.len() == op.result_bytes as usize,
            "the service returned {} bytes instead of {}",
            result.len(),
            op.result_bytes
        );
        Ok(())
    }
}

/// Connects `count` clients, a few at a time (so hundreds of handshakes do not all time
/// out together on a busy machine).
pub async fn connect_all(servers: &Servers, count: usize) -> anyhow::Result<Vec<AnyClient>> {
    let mut out = Vec::with_capacity(count);
    let local = LocalSet::new();
    local
        .run_until(async {
            while out.len() < count {
                let group = (count - out.len()).min(16);
                let handles: Vec<_> = (0..group)
                    .map(|_| {
                        let (system, cluster, cred) = (
                            servers.system,
                            servers.cluster.clone(),
                            servers.credential.clone(),
                        );
                        tokio::task::spawn_local(async move {
                            AnyClient::connect_to(system, &cluster, &cred).await
                        })
                    })
                    .collect();
                for h in handles {
                    out.push(h.await.context("a connecting task panicked")??);
                }
            }
            anyhow::Ok(())
        })
        .await?;
    Ok(out)
}

/// When to stop a run.
#[derive(Clone, Copy, Debug)]
pub enum Length {
    /// Each client completes `warmup_ops` unmeasured, then `ops` measured operations.
    Ops { warmup_ops: u64, ops: u64 },
    /// Load for `warmup`, then measure for `secs`.
    Time { warmup: Duration, secs: Duration },
}

/// Shared progress counter (measured operations completed), for the progress bar.
pub type Progress = Arc<AtomicU64>;

/// Runs `clients` closed-loop, each client its own task on a `LocalSet`, until `length` is
/// over; returns the clients and the measurements.
pub async fn run(
    clients: Vec<AnyClient>,
    op: NullOp,
    length: Length,
    progress: Progress,
) -> anyhow::Result<(Vec<AnyClient>, Recorder)> {
    let start = Instant::now();
    let window = match length {
        Length::Ops { .. } => None,
        Length::Time { warmup, secs } => Some((start + warmup, start + warmup + secs)),
    };
    let recorder = Rc::new(RefCell::new(Recorder::new(start)?));
    let local = LocalSet::new();
    let clients = local
        .run_until(async {
            let handles: Vec<_> = clients
                .into_iter()
                .map(|mut c| {
                    let recorder = recorder.clone();
                    let progress = progress.clone();
                    tokio::task::spawn_local(async move {
                        let r = client_loop(&mut c, op, length, window, &recorder, &progress).await;
                        (c, r)
                    })
                })
                .collect();
            let mut back = Vec::with_capacity(handles.len());
            let mut first_err = None;
            for h in handles {
                let (c, r) = h.await.context("a load task panicked")?;
                if let Err(e) = r {
                    first_err.get_or_insert(e);
                }
                back.push(c);
            }
            match first_err {
                Some(e) => Err(e),
                None => Ok(back),
            }
        })
        .await?;
    let mut rec = Rc::try_unwrap(recorder)
        .map_err(|_| anyhow::anyhow!("load tasks outlived the run"))?
        .into_inner();
    rec.finish(Instant::now(), window);
    Ok((clients, rec))
}

async fn client_loop(
    c: &mut AnyClient,
    op: NullOp,
    length: Length,
    window: Option<(Instant, Instant)>,
    recorder: &RefCell<Recorder>,
    progress: &Progress,
) -> anyhow::Result<()> {
    let mut i = 0u64;
    loop {
        let t0 = Instant::now();
        let measured_op = match (length, window) {
            (Length::Ops { warmup_ops, ops }, _) => {
                if i >= warmup_ops + ops {
                    return Ok(());
                }
                i >= warmup_ops
            }
            (Length::Time { .. }, Some((from, until))) => {
                if t0 >= until {
                    return Ok(());
                }
                t0 >= from
            }
            (Length::Time { .. }, None) => return Ok(()),
        };
        c.invoke(&op).await?;
        let t1 = Instant::now();
        // In a timed run, an operation that ends after the window is not counted.
        let measured = measured_op && window.is_none_or(|(_, until)| t1 <= until);
        recorder.borrow_mut().completed(t1, t1 - t0, measured);
        if measured {
            progress.fetch_add(1, Ordering::Relaxed);
        }
        i += 1;
    }
}
