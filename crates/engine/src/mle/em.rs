use super::{Mle, MLE_MAX_ITERATIONS, MLE_TOLERANCE};

/// A column-stochastic channel `G` (signals × types), given by its products so that
/// structured channels (GenRR's `ρ11ᵀ + γI`, Hadamard's fast transform) cost less than a
/// dense matrix.
pub trait EmOperator {
    /// Number of types d.
    fn types(&self) -> usize;
    /// `G p`: the signal law under type law `p`.
    fn forward(&self, p: &[f64]) -> Vec<f64>;
    /// `Gᵀ w`.
    fn adjoint(&self, w: &[f64]) -> Vec<f64>;
    /// [`EmOperator::forward`] into `out` (one entry per signal). EM calls it up to
    /// [`MLE_MAX_ITERATIONS`] times per estimate: an operator that overrides it (and
    /// [`EmOperator::adjoint_into`]) spares two allocations per step, with the same
    /// arithmetic, so the same result to the bit.
    fn forward_into(&self, p: &[f64], out: &mut [f64]) {
        out.copy_from_slice(&self.forward(p));
    }
    /// [`EmOperator::adjoint`] into `out` (one entry per type).
    fn adjoint_into(&self, w: &[f64], out: &mut [f64]) {
        out.copy_from_slice(&self.adjoint(w));
    }
}

/// The most category updates (iterations × d) one EM run may spend; at large d this caps
/// the iterations below [`MLE_MAX_ITERATIONS`] (the result then says `converged: false`),
/// so no single estimate runs for minutes.
pub const EM_MAX_CELL_UPDATES: u64 = 1 << 25;

/// Expectation–maximisation for the multinomial likelihood `Π_s (G p)_s^{counts_s}` over the
/// simplex: `p ← p ⊙ Gᵀ(counts / (n G p))`. Each step keeps p in the simplex and never
/// lowers the likelihood; the Frank–Wolfe gap `max_x r_x − 1` (with `r = Gᵀ(counts/(nGp))`)
/// bounds the remaining per-report log-likelihood and is the stopping rule.
pub fn em(op: &impl EmOperator, counts: &[f64]) -> Mle {
    let d = op.types();
    let n: f64 = counts.iter().sum();
    let mut p = vec![1.0 / d as f64; d];
    if n <= 0.0 {
        return Mle {
            p,
            iterations: 0,
            converged: false,
        };
    }
    let cap = (EM_MAX_CELL_UPDATES / d.max(1) as u64).min(u64::from(MLE_MAX_ITERATIONS)) as u32;
    let (mut q, mut w, mut r) = (
        vec![0.0; counts.len()],
        vec![0.0; counts.len()],
        vec![0.0; d],
    );
    for iteration in 1..=cap {
        op.forward_into(&p, &mut q);
        for ((ws, &c), &qs) in w.iter_mut().zip(counts).zip(&q) {
            *ws = if c > 0.0 { c / (n * qs) } else { 0.0 };
        }
        op.adjoint_into(&w, &mut r);
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
