//! Each mechanism's channel as an EM operator, and the MLE of a sketch snapshot.

use std::cell::RefCell;

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

/// `F p` into `out` (length J), from p (length d).
type Apply<'a> = Box<dyn Fn(&[f64], &mut [f64]) + 'a>;
/// `Fᵀ v` into `out` (length d), from v (length J), which it may overwrite.
type ApplyTransposed<'a> = Box<dyn Fn(&mut [f64], &mut [f64]) + 'a>;

/// A public ±1 family with J rows: signals are (row j, sign s), laid out as J "+" signals
/// then J "−" signals, with `G[(j,s), x] = (½ + s η F[j,x]) / J`. The row is ancillary (its
/// law does not depend on p), so this conditional channel has the same maximiser.
///
/// EM runs up to 200,000 steps per record here (its boundary maxima converge slowly), so
/// the steps allocate nothing: the J-long intermediate lives in `scratch`.
struct SignOperator<'a> {
    eta: f64,
    types: usize,
    rows: usize,
    apply: Apply<'a>,
    apply_t: ApplyTransposed<'a>,
    scratch: RefCell<Vec<f64>>,
}

impl EmOperator for SignOperator<'_> {
    fn types(&self) -> usize {
        self.types
    }
    fn forward(&self, p: &[f64]) -> Vec<f64> {
        let mut out = vec![0.0; 2 * self.rows];
        self.forward_into(p, &mut out);
        out
    }
    fn adjoint(&self, w: &[f64]) -> Vec<f64> {
        let mut out = vec![0.0; self.types];
        self.adjoint_into(w, &mut out);
        out
    }
    fn forward_into(&self, p: &[f64], out: &mut [f64]) {
        let mut fp = self.scratch.borrow_mut();
        (self.apply)(p, &mut fp);
        let j = self.rows as f64;
        let (plus, minus) = out.split_at_mut(self.rows);
        for ((plus, minus), &v) in plus.iter_mut().zip(minus).zip(fp.iter()) {
            *plus = (0.5 + self.eta * v) / j;
            *minus = (0.5 - self.eta * v) / j;
        }
    }
    fn adjoint_into(&self, w: &[f64], out: &mut [f64]) {
        let (wp, wm) = w.split_at(self.rows);
        let j = self.rows as f64;
        let half_total = 0.5 * w.iter().sum::<f64>();
        let mut diff = self.scratch.borrow_mut();
        for ((d, a), b) in diff.iter_mut().zip(wp).zip(wm) {
            *d = a - b;
        }
        (self.apply_t)(&mut diff, out);
        for o in out.iter_mut() {
            *o = (half_total + self.eta * *o) / j;
        }
    }
}

fn hadamard_operator(m: &Hadamard) -> SignOperator<'_> {
    let (k, d) = (m.rows() as usize, m.domain() as usize);
    SignOperator {
        eta: m.eta(),
        types: d,
        rows: k,
        apply: Box::new(move |p, out| {
            out[..d].copy_from_slice(p);
            out[d..].iter_mut().for_each(|v| *v = 0.0);
            fwht(out);
        }),
        apply_t: Box::new(move |w, out| {
            fwht(w);
            out.copy_from_slice(&w[..d]);
        }),
        scratch: RefCell::new(vec![0.0; k]),
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
        apply: Box::new(move |p, out| {
            for (o, row) in out.iter_mut().zip(signs.chunks_exact(d)) {
                *o = row.iter().zip(p).map(|(f, q)| f * q).sum();
            }
        }),
        apply_t: Box::new(move |w, out| {
            out.iter_mut().for_each(|o| *o = 0.0);
            for (row, wc) in signs_t.chunks_exact(d).zip(w.iter()) {
                for (o, f) in out.iter_mut().zip(row) {
                    *o += f * wc;
                }
            }
        }),
        scratch: RefCell::new(vec![0.0; c]),
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

    /// Whether [`Self::mle`] runs EM (matrix, Hadamard, cohort): the MLE that a sequential
    /// test's looks leave out ([`crate::hypothesis::Scope::look`]). GenRR's has a closed
    /// form (water-filling), and the others a closed form or a one-dimensional root.
    pub fn mle_by_em(&self) -> bool {
        match self {
            Mechanism::Channel(_) | Mechanism::Hadamard(_) | Mechanism::Cohort(_) => true,
            Mechanism::Longitudinal(l) => l.composed().mle_by_em(),
            Mechanism::Grr(_)
            | Mechanism::Raw { .. }
            | Mechanism::BitFlip(_)
            | Mechanism::Subset(_)
            | Mechanism::Noise(_)
            | Mechanism::Olh(_) => false,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanism::{Cohort, Hadamard};
    use crate::mle::{EM_MAX_CELL_UPDATES, MLE_MAX_ITERATIONS, MLE_TOLERANCE};
    use crate::sketch::SignedSketch;

    /// EM as it was before its steps stopped allocating (issue 44's speed work), with the
    /// sign channel written out: the MLE, its iterations and convergence must be the same
    /// to the bit, or every Hadamard and cohort record would change.
    fn reference_em(
        f: &dyn Fn(&[f64]) -> Vec<f64>,
        ft: &dyn Fn(&[f64]) -> Vec<f64>,
        eta: f64,
        d: usize,
        counts: &[f64],
    ) -> Mle {
        let rows = counts.len() / 2;
        let j = rows as f64;
        let n: f64 = counts.iter().sum();
        let mut p = vec![1.0 / d as f64; d];
        let cap = (EM_MAX_CELL_UPDATES / d as u64).min(u64::from(MLE_MAX_ITERATIONS)) as u32;
        for iteration in 1..=cap {
            let fp = f(&p);
            let plus = fp.iter().map(|&v| (0.5 + eta * v) / j);
            let minus = fp.iter().map(|&v| (0.5 - eta * v) / j);
            let q: Vec<f64> = plus.chain(minus).collect();
            let w: Vec<f64> = counts
                .iter()
                .zip(&q)
                .map(|(&c, &qs)| if c > 0.0 { c / (n * qs) } else { 0.0 })
                .collect();
            let (wp, wm) = w.split_at(rows);
            let half_total = 0.5 * w.iter().sum::<f64>();
            let diff: Vec<f64> = wp.iter().zip(wm).map(|(a, b)| a - b).collect();
            let r: Vec<f64> = ft(&diff)
                .iter()
                .map(|&v| (half_total + eta * v) / j)
                .collect();
            let gap = r.iter().cloned().fold(f64::NEG_INFINITY, f64::max) - 1.0;
            if gap < MLE_TOLERANCE {
                return Mle {
                    p,
                    iterations: iteration - 1,
                    converged: true,
                };
            }
            for (px, rx) in p.iter_mut().zip(&r) {
                *px *= rx;
            }
            let total: f64 = p.iter().sum();
            p.iter_mut().for_each(|px| *px /= total);
        }
        Mle {
            p,
            iterations: cap,
            converged: false,
        }
    }

    fn same(a: &Mle, b: &Mle) {
        assert_eq!((a.iterations, a.converged), (b.iterations, b.converged));
        let bits = |m: &Mle| m.p.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(a), bits(b));
    }

    /// Hadamard (d = 12 in K = 16 rows) and cohort (d = 5, 8 cohorts) on sketches with an
    /// interior and a boundary maximum (thousands of steps).
    #[test]
    fn em_steps_without_allocating_give_the_same_mle() {
        let tables: [(Vec<u64>, Vec<u64>); 2] = [
            (
                (0..16).map(|j| 500 + 7 * j).collect(),
                (0..16).map(|j| 480 + 3 * j).collect(),
            ),
            (
                (0..16).map(|j| if j % 3 == 0 { 90 } else { 40 }).collect(),
                (0..16).map(|j| 45 + j).collect(),
            ),
        ];
        let hadamard = Hadamard::new(1.0, 12).unwrap();
        let (k, d) = (hadamard.rows() as usize, 12usize);
        let f = move |p: &[f64]| {
            let mut v = p.to_vec();
            v.resize(k, 0.0);
            fwht(&mut v);
            v
        };
        let ft = move |w: &[f64]| {
            let mut v = w.to_vec();
            fwht(&mut v);
            v.truncate(d);
            v
        };
        let mech = Mechanism::Hadamard(hadamard);
        for (plus, minus) in &tables {
            let sketch =
                Sketch::Signed(SignedSketch::from_tables(plus.clone(), minus.clone()).unwrap());
            let counts: Vec<f64> = plus.iter().chain(minus).map(|&c| c as f64).collect();
            let want = reference_em(&f, &ft, hadamard.eta(), d, &counts);
            assert!(want.iterations > 10, "{}", want.iterations);
            same(&mech.mle(&sketch).unwrap(), &want);
        }
        let cohort = Cohort::new(1.0, 5, 8, 3).unwrap();
        let signs: Vec<f64> = (0..8u32)
            .flat_map(|c| (0..5u32).map(move |x| (c, x)))
            .map(|(c, x)| f64::from(cohort.sign(c, x)))
            .collect();
        let s2 = signs.clone();
        let f = move |p: &[f64]| -> Vec<f64> {
            signs
                .chunks_exact(5)
                .map(|row| row.iter().zip(p).map(|(f, q)| f * q).sum())
                .collect()
        };
        let ft = move |w: &[f64]| {
            let mut out = vec![0.0; 5];
            for (row, wc) in s2.chunks_exact(5).zip(w) {
                for (o, f) in out.iter_mut().zip(row) {
                    *o += f * wc;
                }
            }
            out
        };
        let mech = Mechanism::Cohort(Box::new(cohort.clone()));
        for (plus, minus) in &tables {
            let (plus, minus) = (plus[..8].to_vec(), minus[..8].to_vec());
            let sketch =
                Sketch::Signed(SignedSketch::from_tables(plus.clone(), minus.clone()).unwrap());
            let counts: Vec<f64> = plus.iter().chain(&minus).map(|&c| c as f64).collect();
            let want = reference_em(&f, &ft, cohort.eta(), 5, &counts);
            same(&mech.mle(&sketch).unwrap(), &want);
        }
    }
}
