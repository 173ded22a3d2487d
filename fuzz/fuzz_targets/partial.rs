//! Partial sketch files (`batch --emit-sketches`, read by `merge`): decode and the whole
//! merge reject, never panic or allocate without bound. The harness appends the CRC-32C
//! the format ends in, so the fuzzer reaches the header and the sketches behind the
//! checksum (the hostile case is a crafted file with its checksum recomputed). A file that
//! decodes is then merged, twice, against a fixed config: the checks on settings, shapes,
//! input lists and overflowing counts all run.

#![no_main]
use libfuzzer_sys::fuzz_target;

const CONFIG: &str = r#"
[[stream]]
name = "s"
source = { kind = "parquet", paths = ["x"] }
mechanism = { kind = "grr", epsilon = 1.0, domain = 10 }
[[stream.test]]
name = "t"
kind = "gof"
null = "uniform"
"#;

fuzz_target!(|data: &[u8]| {
    let mut bytes = data.to_vec();
    let sum = crc32c::crc32c(&bytes);
    bytes.extend_from_slice(&sum.to_le_bytes());
    if ldpstream_jobs::sketch_file::decode(&bytes, "fuzz").is_err() {
        return;
    }
    let (Ok(config), Ok(dir)) = (
        ldpstream_config::Config::from_toml_str(CONFIG, "fuzz"),
        tempfile::tempdir(),
    ) else {
        return;
    };
    let (a, b) = (dir.path().join("a.ldpp"), dir.path().join("b.ldpp"));
    if std::fs::write(&a, &bytes).is_ok() && std::fs::write(&b, &bytes).is_ok() {
        let _ = ldpstream_jobs::sketch_file::merge_files(&config, &[a, b]);
    }
});
