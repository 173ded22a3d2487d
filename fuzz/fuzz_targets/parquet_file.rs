//! A whole Parquet file through the path `batch` and serve's replay take: the footer and
//! schema check (`inspect`), then the fold of every row group (Arrow path, and the
//! dictionary-key path for `grr`/`raw`). First byte picks the stream; the rest is the file.

#![no_main]
use ldpstream_connectors::parquet::inspect;
use ldpstream_connectors::{ParallelFiles, RowGroupInput};
use ldpstream_engine::kernels::fold_key_counts;
use ldpstream_engine::sketch::Sketch;
use ldpstream_engine::stream::{fold_paned_batch, PanedDelta, ReportLayout};
use ldpstream_engine::window::pane_start;
use libfuzzer_sys::fuzz_target;
use std::io::Write;
use std::sync::OnceLock;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    static LAYOUTS: OnceLock<Vec<ReportLayout>> = OnceLock::new();
    let layouts = LAYOUTS.get_or_init(|| {
        // As the binary does: a panic inside the parquet crate's decoders is contained and
        // becomes the file's error (libfuzzer's aborting hook still sees every other panic).
        ldpstream_connectors::parquet::contained::quiet_contained_panics();
        common::streams(r#"{ kind = "parquet", paths = ["x.parquet"] }"#)
            .iter()
            .map(|(stream, mechanism)| ReportLayout::of(stream, mechanism))
            .collect()
    });
    let Some((&selector, file)) = data.split_first() else {
        return;
    };
    let layout = &layouts[usize::from(selector) % layouts.len()];
    let mut tmp = tempfile::NamedTempFile::new().expect("temp file");
    tmp.write_all(file).expect("write temp file");
    let path = tmp.path().to_path_buf();
    let Ok(files) = inspect(&[path], layout) else {
        return;
    };
    // The fold `batch` gives each row group's inputs.
    let _ = ParallelFiles::new(&files, layout).fold(
        PanedDelta::default,
        |delta, input| {
            match input {
                RowGroupInput::Batch { batch, origin, ts } => {
                    let pane_of = |t: i64| Some(pane_start(t, 60_000));
                    fold_paned_batch(batch, layout, origin, ts, &pane_of, delta)?;
                }
                RowGroupInput::KeyCounts(counts) => {
                    let mut sketch = layout.mechanism.new_sketch();
                    if let Sketch::Counts(s) = &mut sketch {
                        fold_key_counts(&counts.dictionary, &counts.key_counts, counts.nulls, s);
                    }
                    delta.untimed.insert(Vec::new(), sketch);
                }
            }
            Ok(())
        },
        |mut a, b| {
            a.merge(b)?;
            Ok(a)
        },
        &|_| {},
    );
});
