//! The decoder against hand-written JSON and binary messages.
use super::*;
use arrow_array::{Array, FixedSizeBinaryArray, StringArray, UInt32Array};
use ldpstream_config::Config;

fn stream(mechanism: &str, group_by: &str) -> (StreamConfig, Mechanism) {
    let text = format!(
        "[[stream]]\nname = \"s\"\nsource = {{ kind = \"kafka\", brokers = \"b:1\", topics = [\"t\"], group_id = \"g\" }}\nmechanism = {mechanism}\ncolumns = {{ group_by = [{group_by}] }}\n"
    );
    let c = Config::from_toml_str(&text, "t").unwrap();
    let s = c.streams[0].clone();
    let m = Mechanism::from_config(&s.mechanism).unwrap();
    (s, m)
}

/// A producer's long group value is refused under its own reason, in both formats,
/// and leaves no row behind; a value at the bound is taken.
#[test]
fn group_values_over_the_bound_are_refused() {
    let (mut s, m) = stream("{ kind = \"grr\", epsilon = 1.0, domain = 4 }", "\"g\"");
    s.max_group_value_bytes = 4;
    let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
    let mut bin = MessageDecoder::new(&s, &m, MessageFormat::Binary);
    for (g, ok) in [
        ("abcd", true),
        ("abcde", false),
        ("\u{e9}\u{e9}\u{e9}", false),
    ] {
        let j = format!(r#"{{"report": 1, "g": "{g}"}}"#);
        for got in [
            json.push(j.as_bytes()),
            bin.push(&encode_binary_u32(None, 1, &[g])),
        ] {
            match got {
                Ok(Decoded::Report) if ok => {}
                Err(e) if !ok => {
                    assert_eq!(e.reason, GROUP_VALUE_TOO_LONG);
                    assert!(
                        e.detail.contains(&format!("is {} bytes", g.len()))
                            && e.detail.contains("max_group_value_bytes = 4"),
                        "{e}"
                    );
                }
                other => panic!("{g:?}: {other:?}"),
            }
        }
    }
    assert_eq!(json.rows(), 1);
    assert_eq!(bin.rows(), 1);
    assert_eq!(
        json.push(b"not json").map_err(|e| e.reason),
        Err(BAD_MESSAGE)
    );
}

/// Two client versions in one topic: the new one stamps the stream's fingerprint, the
/// old one (ε = 2) another, a third stamps nothing. Only the old one is refused, under
/// `mechanism_mismatch`, in both formats.
#[test]
fn a_report_stamped_with_another_mechanism_is_refused() {
    let (s, m) = stream("{ kind = \"grr\", epsilon = 1.0, domain = 4 }", "");
    let (_, old) = stream("{ kind = \"grr\", epsilon = 2.0, domain = 4 }", "");
    let (ours, theirs) = (m.fingerprint().unwrap(), old.fingerprint().unwrap());
    assert_ne!(ours, theirs);
    let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
    let mut bin = MessageDecoder::new(&s, &m, MessageFormat::Binary);
    let stamped_binary = |f: u32| {
        let mut b = vec![2u8];
        b.extend_from_slice(&f.to_le_bytes());
        b.extend_from_slice(&encode_binary_u32(Some(7), 3, &[])[1..]);
        b
    };
    let reason = |r: Result<Decoded, BadMessage>| r.map_err(|e| e.reason);
    for f in [ours, theirs] {
        let expected = if f == ours {
            Ok(Decoded::Report)
        } else {
            Err(MECHANISM_MISMATCH)
        };
        let j = format!(r#"{{"report": 3, "fingerprint": "{f:08x}"}}"#);
        assert_eq!(reason(json.push(j.as_bytes())), expected);
        assert_eq!(reason(bin.push(&stamped_binary(f))), expected);
    }
    assert_eq!(reason(json.push(br#"{"report": 3}"#)), Ok(Decoded::Report));
    assert_eq!(
        reason(bin.push(&encode_binary_u32(None, 3, &[]))),
        Ok(Decoded::Report)
    );
    assert_eq!(
        reason(json.push(br#"{"report": 3, "fingerprint": "xyz"}"#)),
        Err(BAD_MESSAGE)
    );
    assert_eq!(reason(bin.push(&[2, 1, 2])), Err(BAD_MESSAGE));
    let e = json
        .push(format!(r#"{{"report": 3, "fingerprint": "{theirs:08x}"}}"#).as_bytes())
        .unwrap_err();
    assert!(
        e.detail.contains(&format!("{theirs:08x}")) && e.detail.contains(&format!("{ours:08x}")),
        "{e}"
    );
    assert_eq!(json.finish().unwrap().num_rows(), 2);
    assert_eq!(bin.finish().unwrap().num_rows(), 2);
}

#[test]
fn json_and_binary_decode_to_the_same_rows() {
    let (s, m) = stream("{ kind = \"grr\", epsilon = 1.0, domain = 4 }", "\"g\"");
    let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
    let mut bin = MessageDecoder::new(&s, &m, MessageFormat::Binary);
    for (i, (x, g)) in [(3u32, "a"), (0, "b"), (7, "a")].iter().enumerate() {
        let ts = 1_000 + i as i64;
        let j = format!(r#"{{"report": {x}, "ts": {ts}, "g": "{g}"}}"#);
        // Beyond the domain: appended (the fold rejects and counts it) and flagged,
        // so that the source can dead-letter it.
        let expected = if *x < 4 {
            Decoded::Report
        } else {
            Decoded::Invalid(RejectReason::OutOfDomain)
        };
        assert_eq!(json.push(j.as_bytes()), Ok(expected.clone()));
        assert_eq!(
            bin.push(&encode_binary_u32(Some(ts), *x, &[g])),
            Ok(expected)
        );
    }
    assert!(json.push(br#"{"report": -1}"#).is_err());
    assert!(json.push(b"not json").is_err());
    assert!(bin.push(&[1, 2, 3]).is_err());
    assert_eq!(json.push(br#"{"end": true}"#), Ok(Decoded::EndMarker));
    assert_eq!(bin.push(&BINARY_END_MARKER), Ok(Decoded::EndMarker));
    let a = json.finish().unwrap();
    let b = bin.finish().unwrap();
    assert_eq!(a, b);
    assert_eq!(a.num_rows(), 3);
    let r = a.column_by_name("report").unwrap();
    let r = r.as_any().downcast_ref::<UInt32Array>().unwrap();
    assert_eq!(r.values().to_vec(), vec![3, 0, 7]);
    let g = a.column_by_name("g").unwrap();
    assert_eq!(
        g.as_any().downcast_ref::<StringArray>().unwrap().value(1),
        "b"
    );
    // The builders restart empty.
    assert_eq!(json.finish().unwrap().num_rows(), 0);
}

#[test]
fn reports_the_fold_will_reject_are_flagged_with_the_reason() {
    let (s, m) = stream("{ kind = \"bitflip\", epsilon = 1.0, domain = 10 }", "");
    let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
    // Bit 10 lies beyond d = 10.
    assert_eq!(
        json.push(br#"{"report": "0004"}"#),
        Ok(Decoded::Invalid(RejectReason::PaddingBitsSet))
    );
    // OUE shares bit flip's packed reports, and their padding rule, in both formats.
    let (s, m) = stream("{ kind = \"oue\", epsilon = 1.0, domain = 10 }", "");
    let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
    assert_eq!(
        json.push(br#"{"report": "0008"}"#),
        Ok(Decoded::Invalid(RejectReason::PaddingBitsSet))
    );
    assert_eq!(json.push(br#"{"report": "ff03"}"#), Ok(Decoded::Report));
    let mut oue_bin = MessageDecoder::new(&s, &m, MessageFormat::Binary);
    let message = |last: u8| [&[1u8][..], &i64::MIN.to_le_bytes(), &[0xff, last]].concat();
    assert_eq!(
        oue_bin.push(&message(0x04)),
        Ok(Decoded::Invalid(RejectReason::PaddingBitsSet))
    );
    assert_eq!(oue_bin.push(&message(0x03)), Ok(Decoded::Report));
    let (s, m) = stream("{ kind = \"gauss\", rho = 0.5, domain = 2 }", "");
    let mut bin = MessageDecoder::new(&s, &m, MessageFormat::Binary);
    let mut b = vec![1u8];
    b.extend_from_slice(&i64::MIN.to_le_bytes());
    b.extend_from_slice(&f32::NAN.to_le_bytes());
    b.extend_from_slice(&1.0f32.to_le_bytes());
    assert_eq!(bin.push(&b), Ok(Decoded::Invalid(RejectReason::NonFinite)));
    let (s, m) = stream("{ kind = \"hadamard\", epsilon = 1.0, domain = 6 }", "");
    let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
    assert_eq!(
        json.push(br#"{"row": 1, "report": 0}"#),
        Ok(Decoded::Invalid(RejectReason::NotPlusMinusOne))
    );
    assert_eq!(
        json.push(br#"{"row": 4000, "report": 1}"#),
        Ok(Decoded::Invalid(RejectReason::RowOutOfRange))
    );
    // All of them were appended, for the fold to count.
    assert_eq!(json.rows(), 2);
    assert_eq!(bin.rows(), 1);
}

/// OLH: `seed` beside a u32 bucket in JSON, u32 seed + u32 bucket in binary; both
/// decode to the same batch, and each bad report is flagged with its reason.
#[test]
fn olh_reports_decode_and_are_flagged() {
    let (s, m) = stream(
        "{ kind = \"olh\", epsilon = 1.0, domain = 25, g = 4, pool_size = 8 }",
        "",
    );
    let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
    let mut bin = MessageDecoder::new(&s, &m, MessageFormat::Binary);
    let message = |seed: u32, y: u32| {
        [
            &[1u8][..],
            &i64::MIN.to_le_bytes(),
            &seed.to_le_bytes(),
            &y.to_le_bytes(),
        ]
        .concat()
    };
    for (seed, y, verdict) in [
        (7, 3, Decoded::Report),
        (8, 0, Decoded::Invalid(RejectReason::SeedOutOfPool)),
        (0, 4, Decoded::Invalid(RejectReason::BucketOutOfRange)),
    ] {
        let text = format!(r#"{{"seed": {seed}, "report": {y}}}"#);
        assert_eq!(json.push(text.as_bytes()), Ok(verdict.clone()), "{text}");
        assert_eq!(bin.push(&message(seed, y)), Ok(verdict));
    }
    assert!(json.push(br#"{"report": 1}"#).is_err(), "no seed");
    assert!(json.push(br#"{"seed": -1, "report": 1}"#).is_err());
    assert!(bin.push(&message(1, 1)[..16]).is_err(), "short");
    let (a, b) = (json.finish().unwrap(), bin.finish().unwrap());
    assert_eq!(a, b);
    let seeds = a.column_by_name("seed").unwrap();
    let seeds = seeds.as_any().downcast_ref::<UInt32Array>().unwrap();
    assert_eq!(seeds.values().to_vec(), vec![7, 8, 0]);
    let r = a.column_by_name("report").unwrap();
    let r = r.as_any().downcast_ref::<UInt32Array>().unwrap();
    assert_eq!(r.values().to_vec(), vec![3, 0, 4]);
}

#[test]
fn bitflip_reports_are_hex() {
    let (s, m) = stream("{ kind = \"bitflip\", epsilon = 1.0, domain = 10 }", "");
    let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
    assert_eq!(json.push(br#"{"report": "0a01"}"#), Ok(Decoded::Report));
    assert!(json.push(br#"{"report": "0a"}"#).is_err());
    assert!(json.push(br#"{"report": "zz01"}"#).is_err());
    let batch = json.finish().unwrap();
    let r = batch.column_by_name("report").unwrap();
    let r = r.as_any().downcast_ref::<FixedSizeBinaryArray>().unwrap();
    assert_eq!(r.value(0), &[0x0a, 0x01]);
    assert!(batch.column_by_name("ts").unwrap().is_null(0));
}

#[test]
fn indexed_reports_decode_from_json_and_binary() {
    for (mechanism, index) in [
        ("{ kind = \"hadamard\", epsilon = 1.0, domain = 6 }", "row"),
        (
            "{ kind = \"cohort\", epsilon = 1.0, domain = 4, cohorts = 32, seed = 3 }",
            "cohort",
        ),
    ] {
        let (s, m) = stream(mechanism, "");
        let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
        let mut bin = MessageDecoder::new(&s, &m, MessageFormat::Binary);
        for (i, sign) in [(5u32, 1i8), (0, -1), (7, 1)] {
            let j = format!(r#"{{"{index}": {i}, "report": {sign}, "ts": 1000}}"#);
            assert_eq!(json.push(j.as_bytes()), Ok(Decoded::Report), "{j}");
            let mut b = vec![1u8];
            b.extend_from_slice(&1000i64.to_le_bytes());
            b.extend_from_slice(&i.to_le_bytes());
            b.push(sign as u8);
            assert_eq!(bin.push(&b), Ok(Decoded::Report));
        }
        // The index is required and must be a u32; the sign must fit an i8.
        assert!(json.push(br#"{"report": 1}"#).is_err());
        let bad_index = format!(r#"{{"{index}": -1, "report": 1}}"#);
        assert!(json.push(bad_index.as_bytes()).is_err());
        let bad_sign = format!(r#"{{"{index}": 1, "report": 300}}"#);
        assert!(json.push(bad_sign.as_bytes()).is_err());
        let a = json.finish().unwrap();
        assert_eq!(a, bin.finish().unwrap());
        let idx = a.column_by_name(index).unwrap();
        let idx = idx.as_any().downcast_ref::<UInt32Array>().unwrap();
        assert_eq!(idx.values().to_vec(), vec![5, 0, 7]);
        let r = a.column_by_name("report").unwrap();
        let r = r.as_any().downcast_ref::<arrow_array::Int8Array>().unwrap();
        assert_eq!(r.values().to_vec(), vec![1, -1, 1]);
    }
}

#[test]
fn noise_vectors_decode_from_json_and_binary() {
    for kind in ["gauss", "laplace"] {
        let privacy = if kind == "gauss" {
            "rho = 0.5"
        } else {
            "epsilon = 1.0"
        };
        let (s, m) = stream(
            &format!("{{ kind = \"{kind}\", {privacy}, domain = 3 }}"),
            "",
        );
        let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
        let mut bin = MessageDecoder::new(&s, &m, MessageFormat::Binary);
        // Values exact in f32, so the binary (f32) and JSON (f64) paths agree.
        let v = [0.5f32, -1.25, 2.0];
        assert_eq!(
            json.push(br#"{"report": [0.5, -1.25, 2.0], "ts": 7}"#),
            Ok(Decoded::Report)
        );
        let mut b = vec![1u8];
        b.extend_from_slice(&7i64.to_le_bytes());
        for x in v {
            b.extend_from_slice(&x.to_le_bytes());
        }
        assert_eq!(bin.push(&b), Ok(Decoded::Report));
        assert!(json.push(br#"{"report": [0.5, 1.0]}"#).is_err());
        assert!(json.push(br#"{"report": [0.5, "x", 1.0]}"#).is_err());
        assert!(bin.push(&b[..b.len() - 1]).is_err());
        let a = json.finish().unwrap();
        assert_eq!(a, bin.finish().unwrap());
        assert_eq!(a.num_rows(), 1);
        let r = a.column_by_name("report").unwrap();
        let r = r
            .as_any()
            .downcast_ref::<arrow_array::FixedSizeListArray>()
            .unwrap();
        let vals = r.value(0);
        let vals = vals
            .as_any()
            .downcast_ref::<arrow_array::Float64Array>()
            .unwrap();
        assert_eq!(vals.values().to_vec(), vec![0.5, -1.25, 2.0]);
    }
}

/// Subset reports in both formats: valid ones decode to the same list rows; a wrong
/// size, an item out of range and a repeated item are appended and flagged under their
/// reasons (the fold agrees and counts them); a list that is not one is a bad message
/// and leaves no row.
#[test]
fn subset_reports_decode_in_both_formats() {
    let (s, m) = stream(
        "{ kind = \"subset\", epsilon = 1.0, domain = 6, k = 2 }",
        "\"g\"",
    );
    let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
    let mut bin = MessageDecoder::new(&s, &m, MessageFormat::Binary);
    let cases: [(&[u32], Option<RejectReason>); 5] = [
        (&[0, 5], None),
        (&[4, 1], None),
        (&[1, 2, 3], Some(RejectReason::SubsetWrongSize)),
        (&[1, 6], Some(RejectReason::OutOfDomain)),
        (&[3, 3], Some(RejectReason::SubsetDuplicate)),
    ];
    for (items, reason) in cases {
        let expected = Ok(reason.map_or(Decoded::Report, Decoded::Invalid));
        let list = items
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let j = format!(r#"{{"report": [{list}], "ts": 5, "g": "a"}}"#);
        assert_eq!(json.push(j.as_bytes()), expected, "{items:?}");
        let b = encode_binary_subset(Some(5), items, &["a"]).unwrap();
        assert_eq!(bin.push(&b), expected, "{items:?}");
    }
    for bad_json in [
        r#"{"report": 3, "g": "a"}"#,
        r#"{"report": [1, -2], "g": "a"}"#,
        r#"{"report": "0a", "g": "a"}"#,
    ] {
        let e = json.push(bad_json.as_bytes()).unwrap_err();
        assert_eq!(e.reason, BAD_MESSAGE);
        assert!(e.detail.contains("array of u32"), "{e}");
    }
    // A count promising more items than the message holds, and one with bytes left over.
    let mut short = encode_binary_subset(None, &[1, 2], &["a"]).unwrap();
    short[9] = 3;
    assert_eq!(bin.push(&short).map_err(|e| e.reason), Err(BAD_MESSAGE));
    assert_eq!(bin.push(&[1, 0, 0]).map_err(|e| e.reason), Err(BAD_MESSAGE));
    assert_eq!(encode_binary_subset(None, &[0; 70_000], &[]), None);
    let (a, b) = (json.finish().unwrap(), bin.finish().unwrap());
    assert_eq!(a, b);
    assert_eq!(a.num_rows(), 5);
    let mut sketch = m.new_sketch();
    ldpstream_engine::kernels::fold_batch(&m, &mut sketch, a.column(0).as_ref(), None).unwrap();
    assert_eq!(sketch.n(), 2);
    let r = sketch.rejected();
    for reason in [
        RejectReason::SubsetWrongSize,
        RejectReason::OutOfDomain,
        RejectReason::SubsetDuplicate,
    ] {
        assert_eq!(r.get(reason), 1, "{reason:?}");
    }
}
