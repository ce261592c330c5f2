//! Per-request authentication costs (docs/PROTOCOL.md §0 item 3): Ed25519 signing and strict
//! verification, and a keyed-BLAKE3 MAC over a 128-byte header ‖ signature. A measurement, not
//! a test (timings belong in benchmarks, and the core's `src/` reads no clock):
//!
//! ```sh
//! cargo run --release -p byzfs-bft --example crypto_cost
//! ```

use byzfs_bft::crypto::{sign, verify_signature, MacKey, SIG_LEN};
use ed25519_dalek::SigningKey;
use std::time::Instant;

// A wall-clock measurement outside the core (clippy.toml bans clocks in the crate).
#[allow(clippy::disallowed_methods)]
fn main() {
    let sk = SigningKey::from_bytes(&[7; 32]);
    let vk = sk.verifying_key();
    let k = MacKey::from_bytes([9; 32]);
    let header = [0x5au8; 64];
    let mut signed = [0u8; 128];
    signed[..64].copy_from_slice(&header);
    const N: u32 = 20_000;

    let t = Instant::now();
    let mut sig = [0u8; SIG_LEN];
    for i in 0..N {
        let mut h = header;
        h[0] = i as u8;
        sig = sign(&sk, &h);
    }
    let sign_us = t.elapsed().as_secs_f64() * 1e6 / f64::from(N);

    let mut h = header;
    h[0] = (N - 1) as u8;
    let t = Instant::now();
    let mut ok = 0;
    for _ in 0..N {
        ok += u32::from(verify_signature(&vk, &h, &sig));
    }
    let verify_us = t.elapsed().as_secs_f64() * 1e6 / f64::from(N);
    assert_eq!(ok, N, "every signature verifies");

    let t = Instant::now();
    let mut acc = 0u8;
    for i in 0..N * 10 {
        signed[0] = i as u8;
        acc ^= k.mac(&signed)[0];
    }
    let mac_us = t.elapsed().as_secs_f64() * 1e6 / f64::from(N * 10);
    println!(
        "ed25519 sign {sign_us:.1} µs, verify_strict {verify_us:.1} µs, \
         keyed-BLAKE3 MAC over 128 B {mac_us:.3} µs (acc {acc})"
    );
}
