//! `ldpstream merge`: adds up the partial sketch files of `batch --emit-sketches` and runs
//! the tests once, as one `batch` over all their input would.

use anyhow::Result;
use ldpstream_connectors::parquet::resolve_inputs;
use ldpstream_jobs::evaluate::test_streams_into;
use ldpstream_jobs::ledger::file::input_fingerprint;
use ldpstream_jobs::sketch_file::merge_files;

use super::batch::{release, ReleaseArgs};

#[derive(clap::Args)]
pub struct MergeArgs {
    /// The TOML config the sketch files were written under (see docs/configuration.md).
    #[arg(long)]
    config: std::path::PathBuf,
    /// Sketch file or glob (`DIR/*.ldpp`); repeatable.
    #[arg(long = "input", required = true)]
    inputs: Vec<String>,
    #[command(flatten)]
    release: ReleaseArgs,
}

pub fn run(args: MergeArgs) -> Result<()> {
    super::clean_up_on_signal();
    let config = super::load_config(&args.config)?;
    let files = resolve_inputs(&args.inputs)?;
    let mut merged = merge_files(&config, &files)?;
    eprintln!("merged {} sketch file(s)", files.len());
    // The ledger identity is that of one batch over all the files that were folded.
    let fingerprints: Vec<String> = config
        .streams
        .iter()
        .map(|s| {
            let inputs = merged
                .get(&s.name)
                .map(|(i, _)| i.clone())
                .unwrap_or_default();
            input_fingerprint(s, &inputs)
        })
        .collect();
    release(&args.release, &config, |release, sink| {
        Ok(test_streams_into(
            &config,
            &fingerprints,
            release,
            sink,
            |stream, _| {
                Ok(merged
                    .remove(&stream.name)
                    .map(|(_, sketches)| sketches)
                    .unwrap_or_default())
            },
        )?)
    })
}
