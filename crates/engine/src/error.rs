use thiserror::Error;

/// Errors raised by the engine. None of them come from I/O.
#[derive(Debug, Error)]
pub enum EngineError {
    /// A parameter the caller passed is outside what the mechanism or test accepts.
    #[error("invalid parameter {name} = {value}: {allowed}")]
    InvalidParameter {
        name: &'static str,
        value: String,
        allowed: &'static str,
    },
    /// A value handed to a client-side randomizer is not a category of its domain.
    #[error("input value {value} is outside the domain [0, {domain})")]
    InputOutOfDomain { value: u64, domain: u64 },
    /// Sketches with different shapes cannot be merged.
    #[error("cannot merge a sketch of {found} categories into one of {expected}")]
    ShapeMismatch { expected: usize, found: usize },
    /// A report column of an Arrow type the mechanism cannot fold.
    #[error("report column has Arrow type {found}, expected {expected}")]
    WrongArrayType { expected: String, found: String },
    /// Bytes that do not decode to a sketch.
    #[error("corrupt sketch encoding: {0}")]
    Corrupt(String),
    /// The serialized sketch was written by a newer or unknown format version.
    #[error("unsupported sketch format version {found} (this build reads version {supported})")]
    UnsupportedVersion { found: u8, supported: u8 },
    /// A probability vector or similar input whose length is not the domain size.
    #[error("{name} has {found} entries; the domain has {expected}")]
    WrongLength {
        name: &'static str,
        expected: usize,
        found: usize,
    },
    /// The planner cannot find a sample size that reaches the requested power.
    #[error("{mechanism} never reaches power {target}: {reason}")]
    PowerUnreachable {
        mechanism: &'static str,
        target: f64,
        reason: &'static str,
    },
    /// A privacy audit of a mechanism whose output law is too large to enumerate.
    #[error(
        "cannot audit {mechanism} at domain {domain}: its output law has {entries} entries; {limit}"
    )]
    AuditTooLarge {
        mechanism: &'static str,
        domain: u64,
        entries: u64,
        limit: String,
    },
    /// The plotting backend failed while rendering a chart into memory.
    #[error("cannot render the plot: {0}")]
    Plot(String),
    /// The operating system's random number generator failed to seed a randomizer.
    #[error("the operating system's random number generator failed: {0}")]
    NoEntropy(String),
}

impl EngineError {
    /// Appends the underlying library's message to an invalid-parameter error.
    pub(crate) fn with_detail(self, detail: impl std::fmt::Display) -> Self {
        match self {
            EngineError::InvalidParameter {
                name,
                value,
                allowed,
            } => EngineError::InvalidParameter {
                name,
                value: format!("{value} ({detail})"),
                allowed,
            },
            other => other,
        }
    }

    pub(crate) fn invalid(name: &'static str, value: impl ToString, allowed: &'static str) -> Self {
        EngineError::InvalidParameter {
            name,
            value: value.to_string(),
            allowed,
        }
    }
}
