//! A request's bytes at a replica's file service: classified, executed read-only and
//! ordered. Nothing may panic or overflow, and the answer must decode.
#![no_main]

use byzfs_bft::Service;
use byzfs_fs::{decode_result, FileService, FsConfig};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut fs = FileService::in_memory(FsConfig {
        partitions: 16,
        ..FsConfig::default()
    });
    let client = 1 << 40 | 1;
    let _ = fs.is_read_only(data);
    assert!(decode_result(&fs.execute_read_only(client, data)).is_some());
    let now = 1_700_000_000_000_000u64.to_le_bytes();
    assert!(decode_result(&fs.execute(client, data, &now)).is_some());
});
