//! The privacy-ledger file `batch`, `merge` and `serve` share: load never panics on any
//! bytes (a damaged or tampered file is an error naming it, never an empty ledger).

#![no_main]
use ldpstream_jobs::ledger::file::LedgerBook;
use libfuzzer_sys::fuzz_target;
use std::io::Write;

fuzz_target!(|data: &[u8]| {
    let mut tmp = tempfile::NamedTempFile::new().expect("temp file");
    tmp.write_all(data).expect("write temp file");
    let _ = LedgerBook::load(tmp.path());
});
