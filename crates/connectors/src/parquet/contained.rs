//! Panics inside the parquet crate's decoders, turned into the file's error.
//!
//! Some decoders of the parquet crate still index decoded values without a bounds check
//! (a dictionary key past the end of a FIXED_LEN_BYTE_ARRAY dictionary panics in
//! parquet 60.1), so a crafted or damaged file could take the whole process down. Every
//! decode of file data runs inside [`contain`]: a panic there becomes
//! [`ConnectorError::Corrupt`] naming the file, and the half-used reader is dropped.

use crate::error::ConnectorError;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Once;

thread_local! {
    static CONTAINING: Cell<bool> = const { Cell::new(false) };
}

/// Keeps the panic hook quiet for panics that [`contain`] turns into errors, so the user
/// sees one error naming the file, not a "panicked at" line from inside a dependency. Other
/// panics are reported by the hook that was installed before. Call once, after logging is
/// set up; later calls do nothing.
pub fn quiet_contained_panics() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !CONTAINING.with(Cell::get) {
                previous(info);
            }
        }));
    });
}

/// Runs `decode` (reading `what` of the file at `path`); a panic in it is the file's error.
pub fn contain<T>(
    path: &Path,
    what: impl FnOnce() -> String,
    decode: impl FnOnce() -> Result<T, ConnectorError>,
) -> Result<T, ConnectorError> {
    let outer = CONTAINING.with(|c| c.replace(true));
    let result = catch_unwind(AssertUnwindSafe(decode));
    CONTAINING.with(|c| c.set(outer));
    result.unwrap_or_else(|panic| {
        let detail = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("no message");
        Err(ConnectorError::Corrupt {
            path: path.display().to_string(),
            message: format!("{} could not be decoded ({detail})", what()),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_the_files_error_and_the_flag_is_restored() {
        quiet_contained_panics();
        let r: Result<u8, _> = contain(
            Path::new("f.parquet"),
            || "row group 3".into(),
            || {
                let v: Vec<u8> = Vec::new();
                let i = v.len() + 2;
                Ok(v[i])
            },
        );
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("f.parquet")
                && e.contains("row group 3")
                && e.contains("index out of bounds"),
            "{e}"
        );
        assert!(!CONTAINING.with(Cell::get));
        assert_eq!(contain(Path::new("f"), String::new, || Ok(7)).unwrap(), 7);
    }
}
