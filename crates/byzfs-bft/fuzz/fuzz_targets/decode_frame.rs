//! Raw bytes from the network: header checks, length checks, digest, body, authentication.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| byzfs_bft_fuzz::decode_frame(data));
