//! Faulty clients for `bench attack` (Aardvark's client attacks, docs/PROTOCOL.md §5.3): each is
//! admitted with the benchmark's credential under a session of its own and speaks the wire
//! protocol directly, building requests a correct client never would.

use anyhow::Context as _;
use byzfs_bft::crypto::MAC_LEN;
use byzfs_bft::message::{Message, Request};
use byzfs_bft::wire::{encode, Auth, Envelope, Frame, REPLIER_ALL};
use byzfs_bft::{ClientId, Principal, ReplicaId};
use byzfs_net::cert::session_client_id;
use byzfs_net::framing::{read_frame, write_frame};
use byzfs_net::handshake::{self, client_proof_data, prove, Hello, Welcome};
use byzfs_net::stream::{ReadHalf, WriteHalf};
use byzfs_net::{kdf, ClientCredential, ClusterConfig};
use ed25519_dalek::SigningKey;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncWriteExt as _, BufWriter};

/// What a faulty client does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAttack {
    /// Floods every replica as fast as TCP takes it: a replayed valid request, the same
    /// with its signature spoiled (so every MAC fails), and garbage.
    Flood,
    /// Requests whose MACs are good for the primary only (the others spoiled; the
    /// signature good), to the primary, one at a time: Aardvark's "Big MAC" attack, which
    /// stalls PBFT's batches.
    PartialMacs,
    /// Fresh requests with every MAC good over a bad signature, to every replica, as fast
    /// as TCP takes them: each costs every replica a signature check.
    BadSignatures,
}

/// A connection to one replica.
struct Link {
    to: ReplicaId,
    rd: ReadHalf,
    wr: BufWriter<WriteHalf>,
}

/// One faulty client.
pub struct FaultyClient {
    id: ClientId,
    keys: byzfs_bft::ClientKeys,
    /// A key that is not this client's: its signatures are bad.
    wrong: SigningKey,
    epoch: u32,
    n: usize,
    links: Vec<Link>,
}

impl FaultyClient {
    /// Session `session` of `cred`'s client, connected to the replicas `to`.
    pub async fn connect(
        cluster: &ClusterConfig,
        cred: &ClientCredential,
        session: u64,
        to: &[ReplicaId],
    ) -> anyhow::Result<FaultyClient> {
        let cert_id = cred.cert.client;
        let id = session_client_id(cert_id, session).context("session out of range")?;
        let keys = kdf::client_keys(cluster, cred, id)?;
        let salt = kdf::salt(&cluster.cluster_id, cluster.bft.epoch);
        let mut links = Vec::new();
        for &j in to {
            let r = &cluster.replicas[j as usize];
            let shared = kdf::shared_secret(&cred.x25519, &r.x25519_public)
                .context("a low-order replica key")?;
            let hello_key = kdf::client_hello_key(&shared, &salt, cert_id, j);
            let cert = cred.cert.clone();
            let (stream, welcome) = handshake::dial(
                cluster,
                j,
                |ch| Hello::Client {
                    cert,
                    session,
                    proof: prove(
                        &hello_key,
                        &client_proof_data(&ch.nonce, cert_id, session, j),
                    ),
                },
                Duration::from_secs(5),
            )
            .await
            .with_context(|| format!("a faulty client cannot reach replica {j}"))?;
            anyhow::ensure!(
                welcome == Welcome::Accepted,
                "replica {j} refused the faulty client: {welcome:?}"
            );
            let (rd, wr) = stream.into_split();
            links.push(Link {
                to: j,
                rd,
                wr: BufWriter::with_capacity(64 * 1024, wr),
            });
        }
        Ok(FaultyClient {
            id,
            keys,
            wrong: SigningKey::from_bytes(&[0x5A; 32]),
            epoch: cluster.bft.epoch,
            n: cluster.n(),
            links,
        })
    }

    /// A null 0/0 write `rid` (acknowledging every earlier one): signed with its own key
    /// or, if `bad_signature`, with another's; the MACs of the replicas in `spoil` (bit `j`
    /// = replica `j`) broken.
    fn request(&self, rid: u64, bad_signature: bool, spoil: u32) -> anyhow::Result<Vec<u8>> {
        let env = Envelope {
            sender: Principal::Client(self.id),
            epoch: self.epoch,
            flags: 0,
            replier: REPLIER_ALL,
        };
        let msg = Message::Request(Request {
            client: self.id,
            rid,
            acked: rid - 1,
            after: 0,
            op: byzfs_bft::services::null::op(false, 0, 0),
        });
        let own = self
            .keys
            .signing
            .as_ref()
            .context("a MAC-only credential")?;
        let key = if bad_signature { &self.wrong } else { own };
        let mut bytes = encode(
            env,
            &msg,
            Auth::SignedAuthenticator(key, &self.keys.to_replica),
        );
        let start = bytes.len() - self.n * MAC_LEN;
        for j in 0..self.n {
            if spoil & (1 << j) != 0 {
                bytes[start + j * MAC_LEN] ^= 0xA5;
            }
        }
        Ok(bytes)
    }

    /// Runs `attack` until `stop`; counts the frames sent in `sent`.
    pub async fn run(
        mut self,
        attack: ClientAttack,
        stop: Arc<AtomicBool>,
        sent: Arc<AtomicU64>,
    ) -> anyhow::Result<()> {
        match attack {
            ClientAttack::Flood => {
                let valid = self.request(1, false, 0)?;
                let mut spoiled = valid.clone();
                // The signature sits before the MACs; every MAC covers it.
                let sig_at = spoiled.len() - self.n * MAC_LEN - 64;
                spoiled[sig_at] ^= 0x55;
                let garbage = vec![0xEE; 1500];
                self.flood(&stop, &sent, |_| {
                    [valid.clone(), spoiled.clone(), garbage.clone()].to_vec()
                })
                .await
            }
            ClientAttack::BadSignatures => {
                let mut rid = 0u64;
                let this = &self;
                let frames = |_: u64| {
                    rid += 1;
                    this.request(rid, true, 0)
                        .map(|r| vec![r])
                        .unwrap_or_default()
                };
                // `flood` needs `&mut self` for the links: build the frames first.
                let batch: Vec<Vec<u8>> = (0..4096).flat_map(frames).collect();
                self.flood(&stop, &sent, |i| {
                    vec![batch[i as usize % batch.len()].clone()]
                })
                .await
            }
            ClientAttack::PartialMacs => {
                // Good for the primary (replica 0) only.
                let spoil = !1u32 & ((1u32 << self.n) - 1);
                let mut rid = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    rid += 1;
                    let req = self.request(rid, false, spoil)?;
                    let Some(link) = self.links.first_mut() else {
                        return Ok(());
                    };
                    write_frame(&mut link.wr, &req).await?;
                    link.wr.flush().await?;
                    sent.fetch_add(1, Ordering::Relaxed);
                    // Closed loop: wait for the primary's reply (or give up after a while
                    // and send the next).
                    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
                    loop {
                        let got =
                            tokio::time::timeout_at(deadline, read_frame(&mut link.rd, 1 << 24))
                                .await;
                        match got {
                            Ok(Ok(f)) => {
                                let replied = Frame::parse(&f, 1 << 24)
                                    .ok()
                                    .and_then(|fr| fr.decode().ok())
                                    .is_some_and(
                                        |m| matches!(m, Message::Reply(r) if r.rid == rid),
                                    );
                                if replied {
                                    break;
                                }
                            }
                            Ok(Err(_)) => return Ok(()),
                            Err(_) => break,
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// Writes `frames(i)` to every link, round after round, until `stop`; replies are read
    /// and thrown away so the replicas' queues to it do not fill.
    async fn flood(
        &mut self,
        stop: &AtomicBool,
        sent: &AtomicU64,
        mut frames: impl FnMut(u64) -> Vec<Vec<u8>>,
    ) -> anyhow::Result<()> {
        let mut drains = Vec::new();
        let mut writers = Vec::new();
        for l in std::mem::take(&mut self.links) {
            let Link { to, mut rd, wr } = l;
            drains.push(tokio::spawn(async move {
                while read_frame(&mut rd, 1 << 24).await.is_ok() {}
                to
            }));
            writers.push(wr);
        }
        let mut i = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let batch = frames(i);
            i += 1;
            for w in writers.iter_mut() {
                for f in &batch {
                    if write_frame(w, f).await.is_err() {
                        return Ok(());
                    }
                    sent.fetch_add(1, Ordering::Relaxed);
                }
                if i.is_multiple_of(64) && w.flush().await.is_err() {
                    return Ok(());
                }
            }
        }
        for d in drains {
            d.abort();
        }
        Ok(())
    }
}
