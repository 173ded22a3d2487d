//! The batch fold's progress as a bar on stderr, drawn only when stderr is a terminal.

use std::sync::OnceLock;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ldpstream_jobs::batch_job::Progress;

/// One bar per fold: `start` makes it with the fold's row count.
#[derive(Default)]
pub struct Bar(OnceLock<ProgressBar>);

impl Progress for Bar {
    fn start(&self, total_rows: u64) {
        let bar = ProgressBar::with_draw_target(Some(total_rows), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(
            "{elapsed_precise} [{wide_bar}] {human_pos}/{human_len} rows, {per_sec}, ETA {eta}",
        ) {
            bar.set_style(style);
        }
        // A second fold in the same command (several streams) starts a fresh bar.
        if let Some(old) = self.0.get() {
            old.set_length(total_rows);
            old.reset();
        } else {
            let _ = self.0.set(bar);
        }
    }

    fn advance(&self, rows: u64) {
        if let Some(bar) = self.0.get() {
            bar.inc(rows);
        }
    }

    fn finish(&self) {
        if let Some(bar) = self.0.get() {
            bar.finish_and_clear();
        }
    }
}
