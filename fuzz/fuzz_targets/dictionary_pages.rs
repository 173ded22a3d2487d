//! The hand-written RLE/bit-packed hybrid decoder and the dictionary-page walk on arbitrary
//! page bytes. First byte: bit 0 optional (definition levels), bits 1–5 the bit width;
//! then a u16 dictionary length, a u32 value count, and the page bytes.

#![no_main]
use bytes::Bytes;
use ldpstream_connectors::parquet::dictionary::count_chunk;
use ldpstream_connectors::parquet::rle_hybrid::{count_defined, KeyCounter};
use libfuzzer_sys::fuzz_target;
use parquet::basic::Encoding;
use parquet::column::page::Page;

fuzz_target!(|data: &[u8]| {
    if data.len() < 7 {
        return;
    }
    let optional = data[0] & 1 == 1;
    let bit_width = (data[0] >> 1) % 33;
    let dictionary_len = usize::from(u16::from_le_bytes([data[1], data[2]]));
    let n = u32::from_le_bytes([data[3], data[4], data[5], data[6]]) % 1_000_000;
    let body = &data[7..];

    let mut counter = KeyCounter::new(dictionary_len);
    if counter.count(body, bit_width, n as usize).is_ok() {
        let _ = counter.finish();
    }
    let _ = count_defined(body, n as usize);

    // A dictionary page of `dictionary_len` values, then the body as one data page whose
    // first byte is the key bit width (the page layout of RLE_DICTIONARY).
    let dictionary: Vec<u8> = (0..dictionary_len as u32).flat_map(u32::to_le_bytes).collect();
    let pages = vec![
        Ok(Page::DictionaryPage {
            buf: Bytes::from(dictionary),
            num_values: dictionary_len as u32,
            encoding: Encoding::PLAIN,
            is_sorted: false,
        }),
        Ok(Page::DataPage {
            buf: Bytes::copy_from_slice(body),
            num_values: n,
            encoding: Encoding::RLE_DICTIONARY,
            def_level_encoding: Encoding::RLE,
            rep_level_encoding: Encoding::RLE,
            statistics: None,
        }),
    ];
    let _ = count_chunk(pages.into_iter(), optional, u64::from(n));
});
