//! A toy synchronous driver for multi-step paths: every frame delivered at once.

use super::*;

/// Delivers every frame instantly between replicas (a toy driver), collecting client replies.
pub(super) struct Cluster {
    pub(super) cfg: Config,
    pub(super) r: Vec<Replica<Counter>>,
    pub(super) down: Vec<bool>,
    pub(super) now: Time,
    pub(super) replies: Vec<Reply>,
    /// What a disk driver would hold for each replica that stores its state.
    pub(super) disks: Vec<Option<DurableState>>,
    /// Frames of this kind are lost in transit.
    pub(super) lose: Option<crate::message::Tag>,
    /// Replicas whose driver holds their checkpoint records (a slow disk): the
    /// checkpoints waiting, for the test to record (`Replica::checkpoint_recorded`).
    pub(super) held_records: Vec<Option<Vec<Seq>>>,
}

impl Cluster {
    pub(super) fn new(cfg: Config) -> Self {
        let r: Vec<_> = (0..cfg.n() as u32).map(|i| replica(i, &cfg)).collect();
        let down = vec![false; r.len()];
        let disks = vec![None; r.len()];
        let held_records = vec![None; r.len()];
        Cluster {
            cfg,
            r,
            down,
            now: Time(0),
            replies: vec![],
            disks,
            lose: None,
            held_records,
        }
    }
    pub(super) fn pump(&mut self) {
        let mut queue: Vec<(usize, Arc<[u8]>)> = Vec::new();
        loop {
            for i in 0..self.r.len() {
                for a in drain(&mut self.r[i]) {
                    match a {
                        Action::Send { to, bytes } => queue.push((to as usize, bytes)),
                        Action::Broadcast { bytes } => (0..self.r.len())
                            .filter(|&j| j != i)
                            .for_each(|j| queue.push((j, bytes.clone()))),
                        Action::SendClient { bytes, .. } => {
                            if let Message::Reply(r) = decode(&bytes) {
                                self.replies.push(r)
                            }
                        }
                        Action::Persist(rec) => {
                            if let Some(d) = &mut self.disks[i] {
                                d.apply_persist(rec);
                            }
                        }
                        Action::Store(rec) => {
                            if let StoreRecord::Checkpoint(img) = &rec {
                                // As the driver does, before its commit (durable at once
                                // here: no work to run).
                                let work = self.r[i].persist_service(img.seq).unwrap();
                                assert!(work.is_none());
                            }
                            if let Some(d) = &mut self.disks[i] {
                                d.apply_store(&rec);
                            }
                            if let StoreRecord::Checkpoint(img) = &rec {
                                match &mut self.held_records[i] {
                                    Some(held) => held.push(img.seq),
                                    // Durable at once here.
                                    None => self.r[i].checkpoint_recorded(img.seq),
                                }
                            }
                        }
                        // Every record is durable at once here.
                        Action::Event(_) | Action::Sync => {}
                    }
                }
            }
            if queue.is_empty() {
                return;
            }
            for (to, bytes) in std::mem::take(&mut queue) {
                let lost = self.lose.is_some_and(|t| {
                    Frame::parse(&bytes, usize::MAX).is_ok_and(|f| f.header.tag == t)
                });
                if !self.down[to] && !lost {
                    self.r[to].handle_message(self.now, &bytes);
                }
            }
        }
    }
    pub(super) fn deliver_all(&mut self, bytes: &[u8]) {
        for i in 0..self.r.len() {
            if !self.down[i] {
                self.r[i].handle_message(self.now, bytes);
            }
        }
        self.pump();
    }
    pub(super) fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        loop {
            let next = self
                .r
                .iter()
                .enumerate()
                .filter(|(i, _)| !self.down[*i])
                .filter_map(|(_, r)| r.poll_timeout())
                .min();
            match next {
                Some(t) if t <= end => {
                    self.now = t;
                    for i in 0..self.r.len() {
                        if !self.down[i] && self.r[i].poll_timeout().is_some_and(|x| x <= t) {
                            self.r[i].handle_timeout(t);
                        }
                    }
                    self.pump();
                }
                _ => break,
            }
        }
        self.now = end;
    }
}
