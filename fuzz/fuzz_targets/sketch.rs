//! The versioned sketch codec: from_bytes never panics, and what it accepts round-trips.

#![no_main]
use ldpstream_engine::sketch::Sketch;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(sketch) = Sketch::from_bytes(data) {
        let bytes = sketch.to_bytes();
        let again = Sketch::from_bytes(&bytes).expect("an encoded sketch decodes");
        assert_eq!(again.to_bytes(), bytes, "the codec round-trips");
    }
});
