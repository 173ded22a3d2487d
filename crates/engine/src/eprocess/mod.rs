//! Anytime-valid (sequential) tests: e-processes computed from a sketch snapshot.
//!
//! A monitor that evaluates a fixed-n χ² test at every snapshot of a growing window loses
//! its level: each look is another chance of a false alarm. An **e-process** `E_n` is
//! non-negative with `E[E_τ] ≤ 1` under H0 at every stopping time τ, so by Ville's
//! inequality `P(∃n: E_n ≥ 1/α) ≤ α` however often, and whenever, it is looked at.
//! Rejecting at `e ≥ 1/α` and reporting `anytime_p_value = min(1, 1/max e so far)` is then
//! valid under continuous monitoring.
//!
//! # Constructions
//!
//! | test | mechanism | construction | validity |
//! |---|---|---|---|
//! | gof | grr, matrix, raw | Dirichlet–multinomial mixture LR against `q0 = G·p0` on the signal counts ([`dirichlet`]) | exact, every n |
//! | gof | hadamard, cohort | Beta–binomial mixture LR on each row's signs given the row counts, `q0_j = ½ + η (F p0)_j` ([`rows`]) | exact, every n, any row choice |
//! | gof | olh | Gaussian mixture on the support counts' whitened statistic given the pool rows, ν = d−1 ([`olh_support`]); without a pool factor (d > 4,096), the Dirichlet mixture on the S·g (pool index, bucket) outcomes, `q0(i, y) = P_i(y)/S` | asymptotic, from n = 1000 (the fallback: exact, every n) |
//! | gof | bitflip, oue | Gaussian mixture on LocalBitFlipGOF's whitened statistic, ν = d−1 ([`gaussian`]) | asymptotic, from n = 1000 |
//! | gof | subset | the same mixture on SubsetGOF's generalized-inverse statistic, ν = d−1 | asymptotic, from n = 1000 |
//! | gof | gauss, laplace | Gaussian mixture on LocalNoiseGOF's statistic, ν = d−1 | asymptotic, from n = 1000 |
//! | independence | grr, bitflip | Gaussian mixture on LocalExpIND / LocalBitFlipIND, ν = (r−1)(c−1) | asymptotic, from n = 1000 and n·β² = 10 |
//! | two_sample | grr, matrix, raw, bitflip | Gaussian mixture on the two-sample χ² in information time `t = n1·n2/(n1+n2)` | asymptotic, from t = 1000 and t·β² = 10 (grr, raw, bitflip) |
//!
//! β is the per-report signal ([`information`]): the composite nulls' plug-in parameters
//! are estimated from the reports, so their χ² law needs information, not just reports.
//!
//! Every construction is a pure function of the sketch (of both sketches for two
//! samples): there is no running state beyond the running maximum, which
//! [`SequentialState`] keeps. Batch, serve, a split over partitions and a restart from a
//! checkpointed sketch therefore give bit-identical e-values.
//!
//! The mixtures are equal-weight averages over a grid of effect scales (κ for the
//! Dirichlet prior, r for the Gaussian prior): an average of e-processes is an e-process,
//! and the average costs at most `ln(grid size)` nats against the best single scale. A
//! test's `design_n` (the `_tuned` functions) moves most of the weight to the scale that
//! detects at that planned n ([`design`]), with the same validity.
//!
//! Why not a running-MLE (universal inference) likelihood ratio for the composite nulls:
//! its state is the whole sequence of plug-in predictions, so it is not a function of the
//! sketch and cannot survive merges of partitions; the χ²-mixture is, at the price of
//! being asymptotic.
//!
//! # Cost (measured once by hand, release test profile, shared 2-core machine; not a benchmark)
//!
//! | sketch | fixed-n statistic alone | e-process alone |
//! |---|---|---|
//! | bitflip d = 65,536, n = 10⁷ | 1.9–2.1 ms | 0.9–2.4 ms (it reuses the statistic) |
//! | grr d = 65,536, n ≈ 10⁷ | 0.16 ms | 2.9 ms (69 ms before grouping equal cells) |
//! | hadamard d = 65,536, n = 10⁷ (conditioned on the rows) | 0.7–1.1 ms (0.43 ms before) | 6–10 ms (4.3 ms before: the row-and-sign pairs group less than single cells) |
//! | grr d = 16 (per group; ×1000 groups) | 0.15 µs | 17 µs |
//!
//! A whole `evaluate` snapshot also computes the estimate and the MLE: for bitflip at
//! d = 65,536 it took 11–29 ms with or without the e-process, and for grr at d = 65,536 the
//! EM of the MLE alone ran for over a minute, so there the e-process is noise. The
//! Dirichlet mixture costs 12 ln Γ pairs per distinct (q0_k, c_k) cell; for small d with
//! many groups it is ~100× the bare χ² statistic, and whether that stays within 2× of the
//! whole snapshot (with its MLE) is still to be benched (criterion, d = 16, 1000 groups).
//!
//! The validity and power tables measured by `engine/tests/sequential.rs` are in the
//! README, section "Sequential (anytime-valid) tests".

pub mod confidence;
pub mod design;
pub mod dirichlet;
pub mod gaussian;
mod olh_support;
pub mod rows;
mod state;

pub use design::{Design, Mixture};
pub use state::{anytime_p_value, crosses, finite_e_value, SequentialState};

use crate::error::EngineError;
use crate::mechanism::Mechanism;
use crate::sketch::Sketch;
use crate::stats::{
    bitflip_two_sample, genrr_two_sample, local_bitflip_gof, local_bitflip_ind, local_exp_ind,
    noise_statistic, sign_row_means, subset_statistic,
};

/// Whether an e-process holds at every n or only from [`gaussian::ASYMPTOTIC_START`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validity {
    Exact,
    Asymptotic,
}

impl Validity {
    /// The name records carry in `validity`.
    pub fn name(self) -> &'static str {
        match self {
            Validity::Exact => "exact",
            Validity::Asymptotic => "asymptotic",
        }
    }
}

/// An e-process evaluated on one sketch snapshot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EProcess {
    /// `ln e`; may be `+∞` (a report the null declares impossible).
    pub log_e: f64,
    pub validity: Validity,
}

impl EProcess {
    /// The e-value, capped at `f64::MAX` so that records stay valid JSON.
    pub fn e_value(&self) -> f64 {
        finite_e_value(self.log_e)
    }

    fn exact(log_e: f64) -> Self {
        EProcess {
            log_e,
            validity: Validity::Exact,
        }
    }

    fn asymptotic(statistic: f64, df: u32, time: f64, design: Option<Design>) -> Self {
        let mixture = tuned(&gaussian::PRECISION_GRID, design, df);
        EProcess {
            log_e: gaussian::log_e_tuned(statistic, df, time, mixture),
            validity: Validity::Asymptotic,
        }
    }
}

/// The mixture over `grid`, tuned to `design` for a ν-dimensional alternative when given.
fn tuned(grid: &[f64], design: Option<Design>, df: u32) -> Mixture<'_> {
    Mixture {
        grid,
        tuned: design.and_then(|d| d.scale(df)),
    }
}

/// ν of a categorical report law: its possible cells less one.
fn law_df(q0: &[f64]) -> u32 {
    let cells = q0.iter().filter(|&&q| q > 0.0).count();
    u32::try_from(cells.saturating_sub(1)).unwrap_or(u32::MAX)
}

fn unsupported(what: &str, mechanism: &Mechanism) -> EngineError {
    EngineError::InvalidParameter {
        name: "sequential",
        value: format!("{what} on a {} stream", mechanism.kind()),
        allowed: "gof on any local mechanism or raw; independence on grr or bitflip; \
                  two_sample on grr, matrix, raw or bitflip",
    }
}

/// The law of one report under H0 on the cells of a count or signed sketch, or None for
/// the mechanisms whose report law the sketch does not determine (bit flip, noise). For
/// Hadamard and cohort it is the (row, sign) law when rows are drawn uniformly, as the
/// mechanisms' own randomizers do; their e-process does not use it, because it conditions
/// on the rows ([`rows`]).
pub fn null_report_law(mechanism: &Mechanism, p0: &[f64]) -> Result<Option<Vec<f64>>, EngineError> {
    if p0.len() != mechanism.domain() {
        return Err(EngineError::ShapeMismatch {
            expected: mechanism.domain(),
            found: p0.len(),
        });
    }
    Ok(match mechanism {
        Mechanism::Longitudinal(l) => return null_report_law(l.composed(), p0),
        Mechanism::Grr(m) => Some(m.report_law(p0)),
        Mechanism::Raw { .. } => Some(p0.to_vec()),
        Mechanism::Channel(m) => Some(m.signal_law(p0)),
        Mechanism::Hadamard(m) => Some(sign_law(&sign_row_means(mechanism, p0), m.eta())),
        Mechanism::Cohort(m) => Some(sign_law(&sign_row_means(mechanism, p0), m.eta())),
        // The (pool index, bucket) cells: index uniform, then row i's law.
        Mechanism::Olh(m) => {
            let share = 1.0 / f64::from(m.pool_size());
            Some(m.row_laws(p0).iter().map(|&pr| pr * share).collect())
        }
        Mechanism::BitFlip(_) | Mechanism::Noise(_) | Mechanism::Subset(_) => None,
    })
}

/// `(½ + η f_j)/J` for the J "+" cells then `(½ − η f_j)/J` for the J "−" cells, the
/// layout of [`crate::sketch::SignedSketch`]'s plus and minus tables.
fn sign_law(fp: &[f64], eta: f64) -> Vec<f64> {
    let j = fp.len() as f64;
    let plus = fp.iter().map(|&f| ((0.5 + eta * f) / j).max(0.0));
    let minus = fp.iter().map(|&f| ((0.5 - eta * f) / j).max(0.0));
    plus.chain(minus).collect()
}

/// The row-conditioned e-process of a ±1 family ([`rows`]); None for other mechanisms.
fn signed_gof_e_process(
    mechanism: &Mechanism,
    sketch: &Sketch,
    p0: &[f64],
    design: Option<Design>,
) -> Result<Option<EProcess>, EngineError> {
    let (eta, complement, rows) = match mechanism {
        Mechanism::Hadamard(m) => (m.eta(), m.one_minus_two_eta(), m.rows() as usize),
        Mechanism::Cohort(m) => (m.eta(), m.one_minus_two_eta(), m.cohorts() as usize),
        _ => return Ok(None),
    };
    if p0.len() != mechanism.domain() {
        return Err(EngineError::ShapeMismatch {
            expected: mechanism.domain(),
            found: p0.len(),
        });
    }
    let Sketch::Signed(s) = sketch else {
        return Err(mechanism.sketch_mismatch(sketch));
    };
    if s.rows() != rows {
        return Err(EngineError::ShapeMismatch {
            expected: rows,
            found: s.rows(),
        });
    }
    let h = sign_row_means(mechanism, p0);
    // One free "+" probability per row: ν = J.
    let df = u32::try_from(rows).unwrap_or(u32::MAX);
    Ok(Some(EProcess::exact(rows::log_e_row_mixture(
        s.plus(),
        s.minus(),
        &h,
        eta,
        complement,
        tuned(&dirichlet::KAPPA_GRID, design, df),
    ))))
}

/// The goodness-of-fit e-process of H0: p = `p0` on a snapshot of `mechanism`'s sketch.
#[cfg(test)]
pub fn gof_e_process(
    mechanism: &Mechanism,
    sketch: &Sketch,
    p0: &[f64],
) -> Result<EProcess, EngineError> {
    gof_e_process_tuned(mechanism, sketch, p0, None)
}

/// [`gof_e_process`] with its mixture tuned to a planned sample size ([`design`]).
pub fn gof_e_process_tuned(
    mechanism: &Mechanism,
    sketch: &Sketch,
    p0: &[f64],
    design: Option<Design>,
) -> Result<EProcess, EngineError> {
    let mechanism = mechanism.channel();
    if let Some(e) = signed_gof_e_process(mechanism, sketch, p0, design)? {
        return Ok(e);
    }
    if let Some(e) = olh_support::olh_gof_e_process(mechanism, sketch, p0, design)? {
        return Ok(e);
    }
    let law = null_report_law(mechanism, p0)?;
    if let Some(q0) = &law {
        if sketch.cells() != q0.len() {
            return Err(EngineError::ShapeMismatch {
                expected: q0.len(),
                found: sketch.cells(),
            });
        }
    }
    let n = sketch.n();
    let df = (p0.len() as u32).saturating_sub(1);
    Ok(match (mechanism, sketch, law) {
        (_, Sketch::Counts(s), Some(q0)) => EProcess::exact(dirichlet::log_e_tuned_cells(
            s.nonzero(),
            s.n(),
            &q0,
            tuned(&dirichlet::KAPPA_GRID, design, law_df(&q0)),
        )),
        // A pool without the whitened statistic (beyond the dense domain, or a
        // covariance that cannot be factored): the exact mixture on the S·g cells.
        (_, Sketch::Pool(s), Some(q0)) => EProcess::exact(dirichlet::log_e_tuned_cells(
            s.table()
                .iter()
                .copied()
                .enumerate()
                .filter(|&(_, c)| c > 0),
            s.table().iter().sum(),
            &q0,
            tuned(&dirichlet::KAPPA_GRID, design, law_df(&q0)),
        )),
        (Mechanism::BitFlip(m), Sketch::Bits(s), None) => {
            let d = local_bitflip_gof(m, s.bit_counts(), n, p0);
            EProcess::asymptotic(d.statistic, d.df.unwrap_or(0), n as f64, design)
        }
        (Mechanism::Subset(m), Sketch::Bits(s), None) => {
            let statistic = subset_statistic(m, s.bit_counts(), n, p0);
            EProcess::asymptotic(statistic, df, n as f64, design)
        }
        (Mechanism::Noise(m), Sketch::Sums(s), None) => {
            let statistic = noise_statistic(&s.sums_f64(), n, p0, m.variance());
            EProcess::asymptotic(statistic, df, n as f64, design)
        }
        _ => return Err(mechanism.sketch_mismatch(sketch)),
    })
}

/// The independence e-process of the rows × cols table (flattened row-major).
#[cfg(test)]
pub fn independence_e_process(
    mechanism: &Mechanism,
    sketch: &Sketch,
    rows: usize,
    cols: usize,
) -> Result<EProcess, EngineError> {
    independence_e_process_tuned(mechanism, sketch, rows, cols, None)
}

/// [`independence_e_process`] with its mixture tuned to a planned sample size ([`design`]).
pub fn independence_e_process_tuned(
    mechanism: &Mechanism,
    sketch: &Sketch,
    rows: usize,
    cols: usize,
    design: Option<Design>,
) -> Result<EProcess, EngineError> {
    let mechanism = mechanism.channel();
    if rows < 2 || cols < 2 || rows * cols != mechanism.domain() {
        return Err(EngineError::invalid(
            "rows",
            format!("{rows}×{cols}"),
            "rows, cols >= 2 with rows·cols = domain",
        ));
    }
    let n = sketch.n();
    let outcome = match (mechanism, sketch) {
        (Mechanism::Grr(m), Sketch::Counts(s)) => {
            local_exp_ind(m.epsilon(), rows, cols, &s.counts())
        }
        // The symmetric mechanism's Σ only; OUE is not offered.
        (Mechanism::BitFlip(m), _) if m.is_optimized() => {
            return Err(unsupported("independence", mechanism))
        }
        (Mechanism::BitFlip(m), Sketch::Bits(s)) => {
            local_bitflip_ind(m, rows, cols, s.bit_counts(), n)
        }
        (Mechanism::Grr(_) | Mechanism::BitFlip(_), _) => {
            return Err(mechanism.sketch_mismatch(sketch))
        }
        _ => return Err(unsupported("independence", mechanism)),
    };
    let d = outcome.decision;
    Ok(composite(
        mechanism,
        d.statistic,
        d.df.unwrap_or(0),
        n as f64,
        design,
    ))
}

/// The information about the report law that `t` reports carry, in reports' worth: `t·β²`
/// with β the per-report signal, the gap between the probabilities of reporting the true
/// category and a given other one (GenRR `(e^ε−1)/(e^ε+d−1)`, bit flip
/// `(e^{ε/2}−1)/(e^{ε/2}+1)`, raw 1). None for mechanisms without such a scale.
fn information(mechanism: &Mechanism, t: f64) -> Option<f64> {
    let beta = match mechanism {
        Mechanism::Grr(m) => {
            let e = m.epsilon().exp();
            (e - 1.0) / (e + mechanism.domain() as f64 - 1.0)
        }
        Mechanism::BitFlip(m) => m.alpha(),
        Mechanism::Raw { .. } => 1.0,
        _ => return None,
    };
    Some(t * beta * beta)
}

/// The asymptotic e-process of a composite null, 1 until the reports carry
/// [`gaussian::INFORMATION_START`] reports' worth of information. The plug-in nuisance
/// parameters (the marginals, the pooled law) are estimated from the same noisy reports;
/// at small ε they are noise for far longer than `ASYMPTOTIC_START` reports, and the
/// statistic is then nowhere near its χ² law (ε = 1e-9, 3 × 4 tables: 12% of null groups
/// crossed 1/α within 40,000 reports). Holding e = 1 longer only skips looks: valid.
fn composite(
    mechanism: &Mechanism,
    statistic: f64,
    df: u32,
    t: f64,
    design: Option<Design>,
) -> EProcess {
    match information(mechanism, t) {
        Some(info) if info < gaussian::INFORMATION_START => EProcess {
            log_e: 0.0,
            validity: Validity::Asymptotic,
        },
        _ => EProcess::asymptotic(statistic, df, t, design),
    }
}

/// The two-sample e-process of samples `a` and `b`, in information time
/// `n1·n2/(n1+n2)` (the inverse variance scale of a difference of two means).
#[cfg(test)]
pub fn two_sample_e_process(
    mechanism: &Mechanism,
    a: &Sketch,
    b: &Sketch,
) -> Result<EProcess, EngineError> {
    two_sample_e_process_tuned(mechanism, a, b, None)
}

/// [`two_sample_e_process`] with its mixture tuned to a planned sample size ([`design`]),
/// whose n is then the information time `n1·n2/(n1+n2)`.
pub fn two_sample_e_process_tuned(
    mechanism: &Mechanism,
    a: &Sketch,
    b: &Sketch,
    design: Option<Design>,
) -> Result<EProcess, EngineError> {
    let mechanism = mechanism.channel();
    let (n1, n2) = (a.n(), b.n());
    if n1 == 0 || n2 == 0 {
        return Ok(EProcess {
            log_e: 0.0,
            validity: Validity::Asymptotic,
        });
    }
    let d = match (mechanism, a, b) {
        (
            Mechanism::Grr(_) | Mechanism::Channel(_) | Mechanism::Raw { .. },
            Sketch::Counts(x),
            Sketch::Counts(y),
        ) => genrr_two_sample(&x.counts(), &y.counts()),
        (Mechanism::BitFlip(m), _, _) if m.is_optimized() => {
            return Err(unsupported("two_sample", mechanism))
        }
        (Mechanism::BitFlip(m), Sketch::Bits(x), Sketch::Bits(y)) => {
            bitflip_two_sample(m, x.bit_counts(), n1, y.bit_counts(), n2)
        }
        (
            Mechanism::Grr(_)
            | Mechanism::Channel(_)
            | Mechanism::Raw { .. }
            | Mechanism::BitFlip(_),
            _,
            _,
        ) => return Err(mechanism.sketch_mismatch(a)),
        _ => return Err(unsupported("two_sample", mechanism)),
    };
    let (f1, f2) = (n1 as f64, n2 as f64);
    // A planned total of N reports split equally is information time N/4.
    let design = design.map(|d| Design { n: d.n / 4, ..d });
    Ok(composite(
        mechanism,
        d.statistic,
        d.df.unwrap_or(0),
        f1 * f2 / (f1 + f2),
        design,
    ))
}
