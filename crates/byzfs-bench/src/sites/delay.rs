//! The delay stage: the wide area's one-way delay, added in user space.
//!
//! The kernel here has `tbf` but not `netem`, so the harness shapes each site's rate with
//! `tbf` and delays packets itself. The hub namespace routes every packet arriving from a
//! site into a TUN device (`ip rule iif … lookup`); this stage reads each packet, holds it
//! for the delay between its source and destination sites, and writes it back into the TUN,
//! whence the hub's main table routes it to the destination site. Packets between one pair
//! of sites keep their order (one delay per pair, released in deadline order).

use super::netns::{join, Netns};
use super::profile::Profile;
use anyhow::Context as _;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The TUN device's name in the hub namespace.
pub const DEVICE: &str = "delay";

/// A packet waiting for its release.
struct Held {
    due: Instant,
    order: u64,
    packet: Vec<u8>,
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        (self.due, self.order) == (o.due, o.order)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    /// Earliest first (`BinaryHeap` is a max-heap).
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (o.due, o.order).cmp(&(self.due, self.order))
    }
}

#[derive(Default)]
struct Queue {
    held: BinaryHeap<Held>,
    stop: bool,
}

/// The running stage; dropping it stops its threads.
pub struct DelayStage {
    queue: Arc<(Mutex<Queue>, Condvar)>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// `TUNSETIFF` (linux/if_tun.h).
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

/// Creates the TUN device [`DEVICE`] in `hub` and returns it open.
fn open_tun(hub: &Netns) -> anyhow::Result<File> {
    let handle = hub.handle()?;
    std::thread::spawn(move || -> anyhow::Result<File> {
        join(&handle).context("cannot join the hub namespace")?;
        let tun = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/net/tun")
            .context("cannot open /dev/net/tun (the site harness needs the tun driver)")?;
        // struct ifreq: the name, then the flags (IFF_TUN | IFF_NO_PI: bare IP packets).
        let mut req = [0u8; 40];
        req[..DEVICE.len()].copy_from_slice(DEVICE.as_bytes());
        let flags: u16 = (libc::IFF_TUN | libc::IFF_NO_PI) as u16;
        req[16..18].copy_from_slice(&flags.to_ne_bytes());
        // SAFETY: TUNSETIFF reads and writes a `struct ifreq` (40 bytes) at the pointer.
        if unsafe { libc::ioctl(tun.as_raw_fd(), TUNSETIFF, req.as_mut_ptr()) } != 0 {
            return Err(std::io::Error::last_os_error()).context("TUNSETIFF");
        }
        Ok(tun)
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the thread creating the TUN device panicked"))?
}

/// The site of an address of the harness (`10.N.SITE.HOST`), if it is one.
fn site_of(addr: &[u8]) -> Option<usize> {
    Some(usize::from(*addr.get(2)?))
}

impl DelayStage {
    /// Creates the TUN device in `hub` and starts delaying what is routed into it.
    pub fn start(hub: &Netns, profile: &Profile) -> anyhow::Result<DelayStage> {
        let tun = open_tun(hub)?;
        // Its own descriptor for the writer (a plain dup of the same device queue).
        // SAFETY: `dup` of an open descriptor; the new one is owned by the `File`.
        let fd = unsafe { libc::dup(tun.as_raw_fd()) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error()).context("dup of the TUN device");
        }
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        let mut out = unsafe { File::from_raw_fd(fd) };
        let queue: Arc<(Mutex<Queue>, Condvar)> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let sites = profile.sites();
        let delays: Vec<Vec<Duration>> = (0..sites)
            .map(|a| (0..sites).map(|b| profile.delay(a, b)).collect())
            .collect();

        let reader = {
            let (queue, stop) = (queue.clone(), stop.clone());
            let mut tun = tun;
            std::thread::Builder::new()
                .name("sites-delay-in".into())
                .spawn(move || {
                    let mut buf = vec![0u8; 65536];
                    let mut order = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let mut pfd = libc::pollfd {
                            fd: tun.as_raw_fd(),
                            events: libc::POLLIN,
                            revents: 0,
                        };
                        // SAFETY: one valid pollfd.
                        if unsafe { libc::poll(&mut pfd, 1, 100) } <= 0 {
                            continue;
                        }
                        let Ok(n) = tun.read(&mut buf) else { break };
                        let packet = &buf[..n];
                        // IPv4 only (the harness assigns no IPv6 addresses); others pass at once.
                        let pair = (packet.len() >= 20 && packet[0] >> 4 == 4)
                            .then(|| site_of(&packet[12..16]).zip(site_of(&packet[16..20])))
                            .flatten();
                        let delay = pair
                            .and_then(|(a, b)| delays.get(a).and_then(|d| d.get(b)).copied())
                            .unwrap_or_default();
                        order += 1;
                        let (lock, cv) = &*queue;
                        if let Ok(mut q) = lock.lock() {
                            q.held.push(Held {
                                due: Instant::now() + delay,
                                order,
                                packet: packet.to_vec(),
                            });
                            cv.notify_one();
                        }
                    }
                })
                .context("cannot start the delay stage")?
        };
        let writer = {
            let queue = queue.clone();
            std::thread::Builder::new()
                .name("sites-delay-out".into())
                .spawn(move || {
                    let (lock, cv) = &*queue;
                    let Ok(mut q) = lock.lock() else { return };
                    loop {
                        if q.stop {
                            return;
                        }
                        let now = Instant::now();
                        match q.held.peek().map(|h| h.due) {
                            Some(due) if due <= now => {
                                if let Some(h) = q.held.pop() {
                                    drop(q);
                                    // A packet the kernel refuses (its route went away while
                                    // the harness stops) is dropped, as a router would.
                                    let _ = out.write(&h.packet);
                                    let Ok(g) = lock.lock() else { return };
                                    q = g;
                                }
                            }
                            Some(due) => {
                                let Ok((g, _)) = cv.wait_timeout(q, due - now) else {
                                    return;
                                };
                                q = g;
                            }
                            None => {
                                let Ok(g) = cv.wait(q) else { return };
                                q = g;
                            }
                        }
                    }
                })
                .context("cannot start the delay stage")?
        };
        Ok(DelayStage {
            queue,
            stop,
            threads: vec![reader, writer],
        })
    }
}

impl Drop for DelayStage {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let (lock, cv) = &*self.queue;
        if let Ok(mut q) = lock.lock() {
            q.stop = true;
        }
        cv.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_packets_leave_in_deadline_order_then_arrival_order() {
        let t = Instant::now();
        let mut h = BinaryHeap::new();
        for (ms, order) in [(20, 1), (0, 2), (20, 3), (5, 4)] {
            h.push(Held {
                due: t + Duration::from_millis(ms),
                order,
                packet: vec![],
            });
        }
        let out: Vec<u64> = std::iter::from_fn(|| h.pop().map(|x| x.order)).collect();
        assert_eq!(out, vec![2, 4, 1, 3]);
        assert_eq!(site_of(&[10, 70, 3, 10]), Some(3));
    }
}
