//! A reply's bytes at a mount: decoding never panics or overflows its stack.
#![no_main]

use byzfs_fs::decode_result;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = decode_result(data);
});
