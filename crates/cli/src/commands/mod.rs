//! One file per subcommand; this module holds what several of them share: the mechanism
//! flags, distribution parsing, and the usage error that exits with code 2.

pub mod audit;
mod audit_reports;
pub mod batch;
pub mod check;
pub mod merge;
pub mod plan;
mod plan_longitudinal;
mod plan_variance;
pub mod serve;
pub mod simulate;

use std::path::Path;

use anyhow::{anyhow, Result};
use clap::ValueEnum;
use ldpstream_config::{Config, MechanismConfig};
use ldpstream_engine::mechanism::Mechanism;

#[derive(Clone, Copy, ValueEnum)]
pub enum MechanismKind {
    /// Generalized randomized response.
    Grr,
    /// Bit flipping (symmetric unary encoding).
    Bitflip,
    /// Optimized unary encoding (p = 1/2, q = 1/(e^ε+1)).
    Oue,
    /// k-subset selection (--k, default ⌈d/(e^ε+1)⌉).
    Subset,
    /// One-hot plus Gaussian noise (--rho).
    Gauss,
    /// One-hot plus Laplace noise.
    Laplace,
    /// Hadamard response.
    Hadamard,
    /// Seeded random ±1 cohorts (--cohorts, --cohort-seed).
    Cohort,
    /// Optimized local hashing with a fixed seed pool (--olh-g, --pool-size, --pool-seed).
    Olh,
    /// A column-stochastic channel (--matrix).
    Matrix,
    /// No randomization (curator model).
    Raw,
    /// L-GRR: GenRR memoized at --epsilon-perm, GenRR per report at --epsilon-1.
    Lgrr,
    /// L-OSUE: OUE memoized at --epsilon-perm, bits flipped per report (OUE at --epsilon-1).
    Losue,
    /// L-SUE (RAPPOR): bit flip memoized at --epsilon-perm, per report at --epsilon-1.
    Lsue,
}

/// The mechanism flags shared by `simulate` and `audit`.
#[derive(clap::Args)]
pub struct MechanismArgs {
    #[arg(long, value_enum)]
    mechanism: MechanismKind,
    /// Local privacy parameter ε (> 0); not used by gauss, matrix or raw.
    #[arg(long)]
    epsilon: Option<f64>,
    /// zCDP parameter ρ (> 0) of gauss.
    #[arg(long)]
    rho: Option<f64>,
    /// Number of categories d (>= 2); matrix takes it from --matrix.
    #[arg(long)]
    domain: Option<u32>,
    /// Number of cohorts of the cohort mechanism (>= domain).
    #[arg(long, default_value_t = 64)]
    cohorts: u32,
    /// Public seed of the cohort family.
    #[arg(long, default_value_t = 0)]
    cohort_seed: u64,
    /// Subset size of the subset mechanism (1 <= k < domain; default ⌈d/(e^ε+1)⌉).
    #[arg(long)]
    k: Option<u32>,
    /// OLH's bucket count g (default round(e^ε) + 1).
    #[arg(long)]
    olh_g: Option<u32>,
    /// OLH's number of hash seeds in the pool (default 1024).
    #[arg(long)]
    pool_size: Option<u32>,
    /// OLH's public pool seed.
    #[arg(long, default_value_t = 0)]
    pool_seed: u64,
    /// The channel of the matrix mechanism: rows (signals) separated by ';', entries
    /// (one per type) by ','. Every column sums to 1.
    #[arg(long)]
    matrix: Option<String>,
    /// lgrr, losue, lsue: ε∞ of the memoized response (spent once per distinct value).
    #[arg(long)]
    epsilon_perm: Option<f64>,
    /// lgrr, losue, lsue: ε1 of one report (< --epsilon-perm).
    #[arg(long = "epsilon-1")]
    epsilon_1: Option<f64>,
    /// lgrr, losue, lsue: a device reports at most once per period, e.g. "1d".
    #[arg(long, default_value = "1d", value_parser = parse_duration)]
    period: ldpstream_config::DurationMs,
}

fn parse_duration(text: &str) -> std::result::Result<ldpstream_config::DurationMs, String> {
    ldpstream_config::DurationMs::parse(text)
}

impl MechanismArgs {
    pub fn config(&self) -> Result<MechanismConfig> {
        let epsilon = || {
            self.epsilon
                .ok_or_else(|| usage("--epsilon is required for this mechanism"))
        };
        let domain = || {
            self.domain
                .ok_or_else(|| usage("--domain is required for this mechanism"))
        };
        let longitudinal = matches!(
            self.mechanism,
            MechanismKind::Lgrr | MechanismKind::Losue | MechanismKind::Lsue
        );
        if !longitudinal && (self.epsilon_perm.is_some() || self.epsilon_1.is_some()) {
            return Err(usage(
                "--epsilon-perm and --epsilon-1 are for lgrr, losue and lsue; this mechanism \
                 takes --epsilon",
            ));
        }
        let config = match self.mechanism {
            MechanismKind::Grr => MechanismConfig::Grr {
                epsilon: epsilon()?,
                domain: domain()?,
            },
            MechanismKind::Bitflip => MechanismConfig::Bitflip {
                epsilon: epsilon()?,
                domain: domain()?,
            },
            MechanismKind::Oue => MechanismConfig::Oue {
                epsilon: epsilon()?,
                domain: domain()?,
            },
            MechanismKind::Subset => MechanismConfig::Subset {
                epsilon: epsilon()?,
                domain: domain()?,
                k: self.k,
            },
            MechanismKind::Laplace => MechanismConfig::Laplace {
                epsilon: epsilon()?,
                domain: domain()?,
                max_abs: None,
            },
            MechanismKind::Hadamard => MechanismConfig::Hadamard {
                epsilon: epsilon()?,
                domain: domain()?,
            },
            MechanismKind::Gauss => MechanismConfig::Gauss {
                rho: self
                    .rho
                    .ok_or_else(|| usage("--rho is required for gauss"))?,
                domain: domain()?,
                max_abs: None,
            },
            MechanismKind::Cohort => MechanismConfig::Cohort {
                epsilon: epsilon()?,
                domain: domain()?,
                cohorts: self.cohorts,
                seed: self.cohort_seed,
            },
            MechanismKind::Olh => MechanismConfig::Olh {
                epsilon: epsilon()?,
                domain: domain()?,
                g: self.olh_g,
                pool_size: self.pool_size,
                pool_seed: self.pool_seed,
            },
            MechanismKind::Raw => MechanismConfig::Raw { domain: domain()? },
            MechanismKind::Lgrr | MechanismKind::Losue | MechanismKind::Lsue => {
                self.longitudinal(domain()?)?
            }
            MechanismKind::Matrix => {
                let text = self
                    .matrix
                    .as_deref()
                    .ok_or_else(|| usage("--matrix is required for matrix"))?;
                MechanismConfig::Matrix {
                    matrix: parse_matrix(text)?,
                }
            }
        };
        config
            .validate("--mechanism")
            .map_err(|e| usage(e.to_string()))?;
        Ok(config)
    }

    fn longitudinal(&self, domain: u32) -> Result<MechanismConfig> {
        if self.epsilon.is_some() {
            return Err(usage(
                "--epsilon is not used by lgrr, losue or lsue: give --epsilon-perm (the memo's) \
                 and --epsilon-1 (one report's)",
            ));
        }
        let need = |value: Option<f64>, flag: &str| {
            value.ok_or_else(|| usage(format!("{flag} is required for this mechanism")))
        };
        let (epsilon_perm, epsilon_1) = (
            need(self.epsilon_perm, "--epsilon-perm")?,
            need(self.epsilon_1, "--epsilon-1")?,
        );
        let period = self.period;
        Ok(match self.mechanism {
            MechanismKind::Lgrr => MechanismConfig::Lgrr {
                epsilon_perm,
                epsilon_1,
                domain,
                period,
            },
            MechanismKind::Losue => MechanismConfig::Losue {
                epsilon_perm,
                epsilon_1,
                domain,
                period,
            },
            _ => MechanismConfig::Lsue {
                epsilon_perm,
                epsilon_1,
                domain,
                period,
            },
        })
    }

    pub fn build(&self) -> Result<Mechanism> {
        Mechanism::from_config(&self.config()?).map_err(|e| usage(e.to_string()))
    }
}

fn parse_matrix(text: &str) -> Result<Vec<Vec<f64>>> {
    text.split(';')
        .map(|row| {
            row.split(',')
                .map(|v| {
                    v.trim()
                        .parse::<f64>()
                        .map_err(|_| usage(format!("--matrix: {v:?} is not a number")))
                })
                .collect()
        })
        .collect()
}

/// A mistake in the command line that clap's own checks cannot see; exits with code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

pub fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow!(UsageError(message.into()))
}

/// `"uniform"` or `d` comma-separated probabilities; `flag` names the option in messages.
pub fn parse_distribution(text: &str, d: u32, flag: &str) -> Result<Vec<f64>> {
    if text == "uniform" {
        return Ok(vec![1.0 / f64::from(d); d as usize]);
    }
    let p: Vec<f64> = text
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<f64>()
                .map_err(|_| usage(format!("{flag}: {s:?} is not a number")))
        })
        .collect::<Result<_>>()?;
    if p.len() != d as usize {
        return Err(usage(format!(
            "{flag} has {} entries; --domain is {d}",
            p.len()
        )));
    }
    if let Some(x) = p.iter().find(|x| !(x.is_finite() && **x >= 0.0)) {
        return Err(usage(format!(
            "{flag} entry {x} is not a probability (finite, >= 0)"
        )));
    }
    let sum: f64 = p.iter().sum();
    if (sum - 1.0).abs() > 1e-9 {
        return Err(usage(format!("{flag} sums to {sum}; it must sum to 1")));
    }
    Ok(p)
}

/// A seed for a simulation or audit run when none was given (it is logged).
pub fn rand_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is keyed from the OS; good enough to pick a simulation seed we then log.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id().into());
    h.finish()
}

/// On SIGINT or SIGTERM, removes the output files still being written (they would be left
/// as hidden temporary files) and exits with 130, as a shell does for Ctrl-C.
pub fn clean_up_on_signal() {
    let installed = ctrlc::set_handler(|| {
        ldpstream_connectors::atomic_file::remove_unfinished();
        std::process::exit(130);
    });
    if let Err(e) = installed {
        tracing::warn!(error = %e, "no signal handler: an interrupted run may leave a temporary file");
    }
}

/// Reads and validates a config, including what only the engine can check (see
/// [`ldpstream_jobs::mechanisms`]).
pub fn load_config(path: &Path) -> Result<Config> {
    let config = Config::from_path(path)?;
    ldpstream_jobs::mechanisms::check_mechanisms(&config)?;
    Ok(config)
}
