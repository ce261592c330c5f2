//! The requests a replica holds (client frames waiting to be proposed, forwarded, timed or
//! executed, and big bodies its batches name), with a count per client so that one client
//! cannot fill the store (issue #29): a faulty client may send requests that follow one it
//! never sends, each within its own claimed `acked` window, which never run and so are never
//! forgotten. A client gets at most [`STORED_PER_WINDOW`] windows of stored requests that
//! cannot run here yet: not run (ids above its last executed one; executed ones wait for
//! the next stable checkpoint's clean-up) and following one that has not run either. A
//! request that can run is always taken (it runs and is forgotten), and so is a body a
//! logged batch names. A correct client has at most one window outstanding; the second
//! leaves room for a replica that lags behind the others in executing them.

use super::StoredRequest;
use crate::crypto::Digest;
use crate::ids::{ClientId, RequestId};
use std::collections::{BTreeMap, BTreeSet};

/// A client may have this many `client_window`s of requests stored at a replica.
pub(crate) const STORED_PER_WINDOW: usize = 2;

/// The stored requests, by digest, and indexed by client and id.
#[derive(Clone, Debug, Default)]
pub(crate) struct RequestStore {
    by_digest: BTreeMap<Digest, StoredRequest>,
    by_client: BTreeSet<(ClientId, RequestId, Digest)>,
}

impl RequestStore {
    pub fn get(&self, d: &Digest) -> Option<&StoredRequest> {
        self.by_digest.get(d)
    }

    /// For changing a request's flags (its digest, and so its client, stay).
    pub fn get_mut(&mut self, d: &Digest) -> Option<&mut StoredRequest> {
        self.by_digest.get_mut(d)
    }

    pub fn contains_key(&self, d: &Digest) -> bool {
        self.by_digest.contains_key(d)
    }

    pub fn values(&self) -> impl Iterator<Item = &StoredRequest> {
        self.by_digest.values()
    }

    pub fn len(&self) -> usize {
        self.by_digest.len()
    }

    /// The stored requests of client `c` with ids above `last`, in id order.
    pub fn after(&self, c: ClientId, last: RequestId) -> impl Iterator<Item = &StoredRequest> {
        self.by_client
            .range((c, last.saturating_add(1), Digest::ZERO)..)
            .take_while(move |(cc, _, _)| *cc == c)
            .filter_map(|(_, _, d)| self.by_digest.get(d))
    }

    pub fn insert(&mut self, d: Digest, r: StoredRequest) {
        self.by_client.insert((r.client, r.rid, d));
        if let Some(old) = self.by_digest.insert(d, r) {
            let new = self.by_digest.get(&d).map(|n| (n.client, n.rid));
            if new != Some((old.client, old.rid)) {
                self.by_client.remove(&(old.client, old.rid, d));
            }
        }
    }

    pub fn remove(&mut self, d: &Digest) -> Option<StoredRequest> {
        let r = self.by_digest.remove(d)?;
        self.by_client.remove(&(r.client, r.rid, *d));
        Some(r)
    }

    pub fn retain(&mut self, mut keep: impl FnMut(&Digest, &StoredRequest) -> bool) {
        let by_client = &mut self.by_client;
        self.by_digest.retain(|d, r| {
            let k = keep(d, r);
            if !k {
                by_client.remove(&(r.client, r.rid, *d));
            }
            k
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn req(client: ClientId, rid: u64) -> (Digest, StoredRequest) {
        let mut d = [0u8; 32];
        d[..8].copy_from_slice(&client.to_le_bytes());
        d[8..16].copy_from_slice(&rid.to_le_bytes());
        let r = StoredRequest {
            frame: Arc::from(&[][..]),
            client,
            rid,
            after: 0,
            digest: Digest(d),
            big: false,
            sig_checked: true,
            relayed: false,
        };
        (Digest(d), r)
    }

    #[test]
    fn counts_follow_every_way_in_and_out() {
        let mut s = RequestStore::default();
        for rid in 1..=5 {
            let (d, r) = req(7, rid);
            s.insert(d, r);
        }
        let (d, r) = req(8, 1);
        s.insert(d, r.clone());
        s.insert(d, r);
        let count = |s: &RequestStore, c, last| s.after(c, last).count();
        assert_eq!((count(&s, 7, 0), count(&s, 8, 0), s.len()), (5, 1, 6));
        assert_eq!(count(&s, 7, 3), 2, "ids 4 and 5 have not run");
        s.remove(&req(7, 1).0);
        s.retain(|_, r| r.rid != 2 && r.client != 8);
        assert_eq!((count(&s, 7, 0), count(&s, 8, 0), s.len()), (3, 0, 3));
        assert_eq!(s.by_client.len(), 3, "the index follows");
    }
}
