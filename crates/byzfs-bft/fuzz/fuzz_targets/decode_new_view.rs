//! The NewView body decoder behind a valid header.
#![no_main]

use byzfs_bft::message::Tag;

libfuzzer_sys::fuzz_target!(|data: &[u8]| byzfs_bft_fuzz::decode_body(Tag::NewView, data));
