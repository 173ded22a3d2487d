//! Every identity test and MLE against an independent numpy/scipy computation on fixed
//! sketches. The Python that produced each number is in the comment above it; `dense`
//! statistics there use `numpy.linalg.inv`, never the O(d) path under test.

use crate::mechanism::Mechanism;
use crate::sketch::{BitSketch, CountSketch, SignedSketch, Sketch, SumSketch};
use crate::stats::gof_statistic;
use ldpstream_config::{MechanismConfig, TestMethod};

fn mech(c: MechanismConfig) -> Mechanism {
    Mechanism::from_config(&c).unwrap()
}

fn rel(found: f64, expected: f64, tol: f64, what: &str) {
    assert!(
        (found - expected).abs() <= tol * expected.abs().max(f64::MIN_POSITIVE),
        "{what}: found {found:e}, expected {expected:e}"
    );
}

fn check(
    m: &Mechanism,
    method: TestMethod,
    sketch: &Sketch,
    p0: &[f64],
    stat: f64,
    p: Option<f64>,
    df: Option<u32>,
) {
    let out = gof_statistic(m, method, sketch, p0).unwrap();
    rel(
        out.statistic,
        stat,
        1e-9,
        &format!("{} statistic", method.name()),
    );
    assert_eq!(out.df, df, "{} df", method.name());
    match (out.p_value, p) {
        (Some(found), Some(expected)) => {
            rel(found, expected, 1e-9, &format!("{} p-value", method.name()))
        }
        (None, None) => {}
        other => panic!("{}: p-values {other:?}", method.name()),
    }
}

#[test]
fn local_bitflip_gof() {
    // h=exp(eps/2); a=(h-1)/(h+1); b=h/(h+1)**2; pt=a*p0+1/(h+1); v=H/n-pt
    // Sigma=a*a*(diag(p0)-outer(p0,p0))+b*I; Pi=I-1/d
    // T=n*v@Pi@inv(Sigma)@Pi@v; scipy.stats.chi2.sf(T, d-1)
    // eps=1, n=1000, H=[420,380,300,250], p0=[.4,.3,.2,.1]
    let m = mech(MechanismConfig::Bitflip {
        epsilon: 1.0,
        domain: 4,
    });
    let s = Sketch::Bits(BitSketch::from_counts(vec![420, 380, 300, 250], 1000).unwrap());
    check(
        &m,
        TestMethod::LocalBitFlipGOF,
        &s,
        &[0.4, 0.3, 0.2, 0.1],
        25.25061802601887,
        Some(1.3685213501137382e-05),
        Some(3),
    );
    // eps=0.5, n=20000, H=[9100,8800,8950,9400,8700,8600], p0 uniform (p below 1e-12)
    let m = mech(MechanismConfig::Bitflip {
        epsilon: 0.5,
        domain: 6,
    });
    let s = Sketch::Bits(
        BitSketch::from_counts(vec![9100, 8800, 8950, 9400, 8700, 8600], 20000).unwrap(),
    );
    check(
        &m,
        TestMethod::LocalBitFlipGOF,
        &s,
        &[1.0 / 6.0; 6],
        86.19429334206876,
        Some(4.2287273319203956e-17),
        Some(5),
    );
}

#[test]
fn local_noise_gof() {
    // v=S/n-p0; M=diag(p0)+sig*I-outer(p0,p0); T=n*v@Pi@inv(M)@Pi@v; chi2.sf(T, d-1)
    // gauss rho=0.5, n=1000, p0=[.4,.3,.2,.1]; sig is the grid noise's variance
    // (STATISTICS.md §1.3.1): s=math.ceil(math.sqrt(2)*2**18*(1+1e-12)); sig=(s/2**18)**2
    // = 2.000004314817488 (the nominal 1/rho = 2 gave T = 0.30903515878159354)
    let m = mech(MechanismConfig::Gauss {
        rho: 0.5,
        domain: 4,
        max_abs: None,
    });
    let p0 = [0.4, 0.3, 0.2, 0.1];
    let s = Sketch::Sums(SumSketch::from_sums_f64(
        &[410.5, 290.25, 215.0, 84.25],
        1000,
    ));
    check(
        &m,
        TestMethod::LocalNoiseGOF,
        &s,
        &p0,
        0.3090345502403004,
        Some(0.9583204662274897),
        Some(3),
    );
    let s = Sketch::Sums(SumSketch::from_sums_f64(
        &[150.0, 290.25, 215.0, 344.75],
        1000,
    ));
    check(
        &m,
        TestMethod::LocalNoiseGOF,
        &s,
        &p0,
        55.737677490730576,
        Some(4.778853850043832e-12),
        Some(3),
    );
    // laplace eps=1: the statistic (its p-value is simulated; see gof_size), with the grid
    // variance t=math.ceil(2*2**17*(1+1e-12)); g=2.0**-17; sig=g*g/(2*math.sinh(0.5/t)**2)
    // = 8.000061035262961 (the nominal 8/eps**2 = 8 gave 0.08274789896087788)
    let m = mech(MechanismConfig::Laplace {
        epsilon: 1.0,
        domain: 4,
        max_abs: None,
    });
    let s = Sketch::Sums(SumSketch::from_sums_f64(
        &[410.5, 290.25, 215.0, 84.25],
        1000,
    ));
    let out = gof_statistic(&m, TestMethod::LocalNoiseGOF, &s, &p0).unwrap();
    rel(
        out.statistic,
        0.08274728281986367,
        1e-9,
        "laplace statistic",
    );
}

#[test]
fn sheffet_chi2_and_tv_on_hadamard() {
    // Row-conditioned (docs/STATISTICS.md, "Conditioning on the rows"):
    // Hm[j,x]=(-1)**popcount(j&x); F=Hm[:,:d]; eta=(e-1)/(2(e+1)); nj=plus+minus; h=F@p0
    // z=((plus-minus)/nj-2*eta*h)*sqrt(nj/(1-4*eta**2*h**2)); Q=F@inv(F.T@F)@F.T
    // T=z@Q@z; chi2.sf(T, d)
    // eps=1, d=4, plus=[140,120,130,110], minus=[110,130,120,140], p0=[.4,.3,.2,.1]
    let m = mech(MechanismConfig::Hadamard {
        epsilon: 1.0,
        domain: 4,
    });
    let s = Sketch::Signed(
        SignedSketch::from_tables(vec![140, 120, 130, 110], vec![110, 130, 120, 140]).unwrap(),
    );
    let p0 = [0.4, 0.3, 0.2, 0.1];
    check(
        &m,
        TestMethod::SheffetChi2,
        &s,
        &p0,
        50.65906303935479,
        Some(2.630070339709592e-10),
        Some(4),
    );
    // tv = 0.5*abs(theta/(2*eta) - p0).sum()
    check(
        &m,
        TestMethod::SheffetTV,
        &s,
        &p0,
        0.37016279517568085,
        None,
        None,
    );
    // d=3 inside K=4 (F = Hm[:, :3], Q projects onto its 3 columns), p0=[.5,.3,.2]
    let m = mech(MechanismConfig::Hadamard {
        epsilon: 1.0,
        domain: 3,
    });
    let s = Sketch::Signed(
        SignedSketch::from_tables(vec![300, 260, 240, 250], vec![200, 240, 260, 250]).unwrap(),
    );
    check(
        &m,
        TestMethod::SheffetChi2,
        &s,
        &[0.5, 0.3, 0.2],
        104.92200883320852,
        Some(1.3580952373308838e-22),
        Some(3),
    );
    // Unequal rows (n_j = 550, 420, 340, 270): each row is weighed by its own count.
    let s = Sketch::Signed(
        SignedSketch::from_tables(vec![300, 200, 180, 130], vec![250, 220, 160, 140]).unwrap(),
    );
    check(
        &m,
        TestMethod::SheffetChi2,
        &s,
        &[0.5, 0.3, 0.2],
        137.33306621604532,
        Some(1.4205604113827744e-29),
        Some(3),
    );
}

#[test]
fn sheffet_chi2_on_cohorts() {
    // F[c,x] from splitmix64 with seed 7 = [[-1,1,1],[1,1,-1],[1,-1,-1],[1,-1,1]]
    // The same row-conditioned z and Q as for Hadamard, with this F: chi2.sf(z@Q@z, d)
    let m = mech(MechanismConfig::Cohort {
        epsilon: 1.0,
        domain: 3,
        cohorts: 4,
        seed: 7,
    });
    let Mechanism::Cohort(c) = &m else {
        unreachable!()
    };
    let family: Vec<Vec<i8>> = (0..4)
        .map(|ci| (0..3).map(|x| c.sign(ci, x)).collect())
        .collect();
    assert_eq!(
        family,
        vec![
            vec![-1, 1, 1],
            vec![1, 1, -1],
            vec![1, -1, -1],
            vec![1, -1, 1]
        ]
    );
    let s = Sketch::Signed(
        SignedSketch::from_tables(vec![150, 120, 140, 100], vec![100, 130, 110, 150]).unwrap(),
    );
    check(
        &m,
        TestMethod::SheffetChi2,
        &s,
        &[0.5, 0.3, 0.2],
        66.39757378442609,
        Some(2.5197954839145148e-14),
        Some(3),
    );
    // Unequal cohorts (n_c = 250, 130, 250, 75).
    let unequal = Sketch::Signed(
        SignedSketch::from_tables(vec![150, 60, 140, 30], vec![100, 70, 110, 45]).unwrap(),
    );
    check(
        &m,
        TestMethod::SheffetChi2,
        &unequal,
        &[0.5, 0.3, 0.2],
        29.96811274538639,
        Some(1.401536402437987e-06),
        Some(3),
    );
    // est = inv(A)@theta/(2*eta)
    let est = m.estimate(&s).unwrap().estimate;
    for (f, e) in est.iter().zip([
        -0.25967440964863836,
        -6.4566405549000616e-18,
        -0.17311627309909222,
    ]) {
        assert!((f - e).abs() < 1e-12, "{est:?}");
    }
}

#[test]
fn channel_and_pearson() {
    // q=G@p0; scipy.stats.chisquare([480,300,220], f_exp=1000*q)
    let g = vec![
        vec![0.6, 0.3, 0.2],
        vec![0.3, 0.4, 0.3],
        vec![0.1, 0.3, 0.5],
    ];
    let m = mech(MechanismConfig::Matrix { matrix: g });
    let s = Sketch::Counts(CountSketch::from_counts(vec![480, 300, 220]));
    check(
        &m,
        TestMethod::ChannelGOF,
        &s,
        &[0.5, 0.3, 0.2],
        10.20789288231149,
        Some(0.006072733528138532),
        Some(2),
    );
    // scipy.stats.chisquare([30,20,25,25], f_exp=100*[.3,.2,.3,.2])
    let m = mech(MechanismConfig::Raw { domain: 4 });
    let s = Sketch::Counts(CountSketch::from_counts(vec![30, 20, 25, 25]));
    check(
        &m,
        TestMethod::PearsonGOF,
        &s,
        &[0.3, 0.2, 0.3, 0.2],
        2.0833333333333335,
        Some(0.5552918954817923),
        Some(3),
    );
}

/// MLEs against scipy.optimize.minimize(-sum(counts*log(G@p)), method='SLSQP', simplex
/// constraint, ftol=1e-16). Tolerance 1e-6.
#[test]
fn mle_matches_scipy() {
    let close = |found: &[f64], expected: &[f64]| {
        for (f, e) in found.iter().zip(expected) {
            assert!((f - e).abs() < 1e-6, "{found:?} vs {expected:?}");
        }
    };
    let grr3 = mech(MechanismConfig::Grr {
        epsilon: 1.0,
        domain: 3,
    });
    // boundary: the unbiased estimate has a negative entry
    let mle = grr3
        .mle(&Sketch::Counts(CountSketch::from_counts(vec![
            500, 450, 50,
        ])))
        .unwrap();
    assert!(mle.converged);
    close(&mle.p, &[0.5569464942650667, 0.4430535098241664, 0.0]);
    // interior: equals the unbiased estimate (Sheffet Cor. 2)
    let mle = grr3
        .mle(&Sketch::Counts(CountSketch::from_counts(vec![
            450, 330, 220,
        ])))
        .unwrap();
    close(
        &mle.p,
        &[0.6536918660335324, 0.3241802303771171, 0.022127903589350593],
    );
    let grr4 = mech(MechanismConfig::Grr {
        epsilon: 0.5,
        domain: 4,
    });
    let mle = grr4
        .mle(&Sketch::Counts(CountSketch::from_counts(vec![
            400, 380, 120, 100,
        ])))
        .unwrap();
    close(&mle.p, &[0.552345343903802, 0.44765465609842214, 0.0, 0.0]);
    let channel = mech(MechanismConfig::Matrix {
        matrix: vec![
            vec![0.6, 0.3, 0.2],
            vec![0.3, 0.4, 0.3],
            vec![0.1, 0.3, 0.5],
        ],
    });
    // interior
    let mle = channel
        .mle(&Sketch::Counts(CountSketch::from_counts(vec![
            500, 330, 170,
        ])))
        .unwrap();
    close(
        &mle.p,
        &[
            0.6749999684569549,
            0.30000005703585786,
            0.024999974507187266,
        ],
    );
    // at a vertex, strictly (the likelihood falls towards the other types)
    let mle = channel
        .mle(&Sketch::Counts(CountSketch::from_counts(vec![
            700, 200, 100,
        ])))
        .unwrap();
    close(&mle.p, &[1.0, 0.0, 0.0]);
    // Hadamard d=3, K=4: G[(j,s),x] = (1/2 + s*eta*H[j,x])/4
    let h = mech(MechanismConfig::Hadamard {
        epsilon: 1.0,
        domain: 3,
    });
    let s = Sketch::Signed(
        SignedSketch::from_tables(vec![300, 260, 240, 250], vec![200, 240, 260, 250]).unwrap(),
    );
    let mle = h.mle(&s).unwrap();
    assert!(mle.converged, "{mle:?}");
    close(
        &mle.p,
        &[0.3331752511475875, 0.29214056049976295, 0.3746841883526495],
    );
    // Bit flip, composite likelihood of independent bits: eps=1, n=1000,
    // minimize(-sum(H*log(c+a*p)+(n-H)*log(1-c-a*p))) with c=1/(h+1), a=(h-1)/(h+1)
    let bf = mech(MechanismConfig::Bitflip {
        epsilon: 1.0,
        domain: 4,
    });
    let mle = bf
        .mle(&Sketch::Bits(
            BitSketch::from_counts(vec![420, 380, 300, 250], 1000).unwrap(),
        ))
        .unwrap();
    assert!(mle.converged, "{mle:?}");
    close(
        &mle.p,
        &[
            0.5574904664934442,
            0.39342809559845443,
            0.04908143790763532,
            0.0,
        ],
    );
    let mle = bf
        .mle(&Sketch::Bits(
            BitSketch::from_counts(vec![500, 420, 250, 190], 1000).unwrap(),
        ))
        .unwrap();
    close(&mle.p, &[0.6633195301170118, 0.33668046995901363, 0.0, 0.0]);
}
