//! Each mechanism's channel as an EM operator, and the MLE of a sketch snapshot.

use super::{fwht, Channel, Cohort, Hadamard, Mechanism};
use crate::error::EngineError;
use crate::mle::{
    bitflip_composite_mle, em, grr_mle, mle_omitted_reason, project_to_simplex, EmOperator, Mle,
};
use crate::sketch::Sketch;

impl EmOperator for Channel {
    fn types(&self) -> usize {
        self.domain() as usize
    }
    fn forward(&self, p: &[f64]) -> Vec<f64> {
        self.signal_law(p)
    }
    fn adjoint(&self, w: &[f64]) -> Vec<f64> {
        Channel::adjoint(self, w)
    }
}

/// A linear map between vectors, boxed so one operator type serves both families.
type LinearMap<'a> = Box<dyn Fn(&[f64]) -> Vec<f64> + 'a>;

/// A public ±1 family with J rows: signals are (row j, sign s), laid out as J "+" signals
/// then J "−" signals, with `G[(j,s), x] = (½ + s η F[j,x]) / J`. The row is ancillary (its
/// law does not depend on p), so this conditional channel has the same maximiser.
struct SignOperator<'a> {
    eta: f64,
    types: usize,
    rows: usize,
    /// `F p` (length J) and `Fᵀ v` (length d).
    apply: LinearMap<'a>,
    apply_t: LinearMap<'a>,
}

impl EmOperator for SignOperator<'_> {
    fn types(&self) -> usize {
        self.types
    }
    fn forward(&self, p: &[f64]) -> Vec<f64> {
        let fp = (self.apply)(p);
        let j = self.rows as f64;
        let plus = fp.iter().map(|&v| (0.5 + self.eta * v) / j);
        let minus = fp.iter().map(|&v| (0.5 - self.eta * v) / j);
        plus.chain(minus).collect()
    }
    fn adjoint(&self, w: &[f64]) -> Vec<f64> {
        let (wp, wm) = w.split_at(self.rows);
        let j = self.rows as f64;
        let half_total = 0.5 * w.iter().sum::<f64>();
        let diff: Vec<f64> = wp.iter().zip(wm).map(|(a, b)| a - b).collect();
        (self.apply_t)(&diff)
            .iter()
            .map(|&v| (half_total + self.eta * v) / j)
            .collect()
    }
}

fn hadamard_operator(m: &Hadamard) -> SignOperator<'_> {
    let (k, d) = (m.rows() as usize, m.domain() as usize);
    SignOperator {
        eta: m.eta(),
        types: d,
        rows: k,
        apply: Box::new(move |p| {
            let mut v = p.to_vec();
            v.resize(k, 0.0);
            fwht(&mut v);
            v
        }),
        apply_t: Box::new(move |w| {
            let mut v = w.to_vec();
            fwht(&mut v);
            v.truncate(d);
            v
        }),
    }
}

fn cohort_operator(m: &Cohort) -> SignOperator<'_> {
    let (c, d) = (m.cohorts() as usize, m.domain() as usize);
    let signs: Vec<f64> = (0..c)
        .flat_map(|ci| (0..d).map(move |x| (ci, x)))
        .map(|(ci, x)| f64::from(m.sign(ci as u32, x as u32)))
        .collect();
    let signs_t = signs.clone();
    SignOperator {
        eta: m.eta(),
        types: d,
        rows: c,
        apply: Box::new(move |p| {
            signs
                .chunks_exact(d)
                .map(|row| row.iter().zip(p).map(|(f, q)| f * q).sum())
                .collect()
        }),
        apply_t: Box::new(move |w| {
            let mut out = vec![0.0; d];
            for (row, wc) in signs_t.chunks_exact(d).zip(w) {
                for (o, f) in out.iter_mut().zip(row) {
                    *o += f * wc;
                }
            }
            out
        }),
    }
}

fn as_f64(values: &[u64]) -> Vec<f64> {
    values.iter().map(|&v| v as f64).collect()
}

impl Mechanism {
    /// Why the record of a window with `n` reports carries no MLE, if it does not: only the
    /// mechanisms whose MLE is solved by EM (GenRR, matrix, Hadamard, cohort), and only
    /// when n < d (see [`mle_omitted_reason`]). The others have a closed form or a
    /// one-dimensional root and always report it.
    pub fn mle_omitted(&self, n: u64) -> Option<String> {
        match self {
            Mechanism::Grr(_)
            | Mechanism::Channel(_)
            | Mechanism::Hadamard(_)
            | Mechanism::Cohort(_) => mle_omitted_reason(n, self.domain()),
            Mechanism::Raw { .. }
            | Mechanism::BitFlip(_)
            | Mechanism::Subset(_)
            | Mechanism::Noise(_) => None,
            // Every EM step on the reports' own likelihood costs a pass of S·d hashes, up to
            // thousands of steps per snapshot: records carry Norm-Sub and the IBU on the
            // support counts (O(d) per step) instead.
            Mechanism::Longitudinal(l) => l.composed().mle_omitted(n),
            Mechanism::Olh(_) => Some(
                "olh: the MLE (EM on the reports' likelihood) costs S·d hashes per \
                 iteration and is not computed; see estimate_norm_sub and estimate_ibu \
                 (the IBU on the support counts)"
                    .to_string(),
            ),
        }
    }

    /// The maximum-likelihood estimate of the type distribution from a sketch snapshot.
    ///
    /// * GenRR, matrix, Hadamard, cohort: the exact multinomial likelihood of the sketch,
    ///   maximised by EM.
    /// * raw: closed form (`counts/n`).
    /// * bit flip: the composite likelihood of independent bits (see
    ///   [`bitflip_composite_mle`]); subset: the same on its item counts.
    /// * Gauss/Laplace: the Euclidean projection of `Ĥ/n` onto the simplex, the maximiser of
    ///   the Gaussian approximation with isotropic noise.
    pub fn mle(&self, sketch: &Sketch) -> Result<Mle, EngineError> {
        if let Mechanism::Longitudinal(l) = self {
            return l.composed().mle(sketch);
        }
        Ok(match (self, sketch) {
            (Mechanism::Grr(m), Sketch::Counts(s)) => {
                grr_mle(&as_f64(&s.counts()), m.rho(), m.gamma())
            }
            (Mechanism::Channel(m), Sketch::Counts(s)) => em(m.as_ref(), &as_f64(&s.counts())),
            (Mechanism::Raw { .. }, Sketch::Counts(s)) => {
                let n = s.n().max(1) as f64;
                Mle {
                    p: s.counts().iter().map(|&c| c as f64 / n).collect(),
                    iterations: 0,
                    converged: s.n() > 0,
                }
            }
            (Mechanism::Hadamard(m), Sketch::Signed(s)) => em(
                &hadamard_operator(m),
                &[as_f64(s.plus()), as_f64(s.minus())].concat(),
            ),
            (Mechanism::Cohort(m), Sketch::Signed(s)) => em(
                &cohort_operator(m),
                &[as_f64(s.plus()), as_f64(s.minus())].concat(),
            ),
            (Mechanism::BitFlip(m), Sketch::Bits(s)) => {
                bitflip_composite_mle(s.bit_counts(), s.n(), m.alpha(), m.flip())
            }
            // Each item count is Binomial(n, q + α p_j), as a bit count is: the same
            // composite likelihood, with q in the place of the flip probability.
            (Mechanism::Subset(m), Sketch::Bits(s)) => {
                bitflip_composite_mle(s.bit_counts(), s.n(), m.alpha(), m.q())
            }
            (Mechanism::Noise(_), Sketch::Sums(s)) => {
                let n = s.n().max(1) as f64;
                let mean: Vec<f64> = s.sums_f64().iter().map(|v| v / n).collect();
                Mle {
                    p: project_to_simplex(&mean),
                    iterations: 0,
                    converged: s.n() > 0,
                }
            }
            _ => return Err(self.sketch_mismatch(sketch)),
        })
    }
}
