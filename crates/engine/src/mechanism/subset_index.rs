//! The colexicographic numbering of k-subsets of `0..d` (the combinatorial number system),
//! by which the privacy audit enumerates subset reports: `S = {s_0 < … < s_{k−1}}` has
//! index `Σ_i C(s_i, i + 1)`, a bijection onto `0..C(d, k)`.

/// `C(n, k)`, or `u64::MAX` when it does not fit.
pub fn choose(n: u64, k: u64) -> u64 {
    if k > n {
        return 0;
    }
    let k = k.min(n - k);
    let mut c: u128 = 1;
    for i in 1..=u128::from(k) {
        // C(n−k+i, i) = C(n−k+i−1, i−1)·(n−k+i)/i, exact at every step and increasing in i.
        c = c * (u128::from(n - k) + i) / i;
        if c > u128::from(u64::MAX) {
            return u64::MAX;
        }
    }
    c as u64
}

/// The index of the sorted distinct subset `items`.
pub fn rank(items: &[u32]) -> u64 {
    items
        .iter()
        .enumerate()
        .map(|(i, &s)| choose(u64::from(s), i as u64 + 1))
        .fold(0u64, u64::saturating_add)
}

/// The sorted subset of size `k` with index `index` (< C(d, k)), written into `out`.
pub fn unrank(mut index: u64, k: u32, out: &mut Vec<u32>) {
    out.clear();
    out.resize(k as usize, 0);
    for i in (0..k as usize).rev() {
        // The largest s with C(s, i + 1) <= index: s_{k−1} first, then downwards.
        let mut s = i as u32;
        while choose(u64::from(s) + 1, i as u64 + 1) <= index {
            s += 1;
        }
        index -= choose(u64::from(s), i as u64 + 1);
        out[i] = s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choose_matches_pascal_and_saturates() {
        assert_eq!(choose(5, 2), 10);
        assert_eq!(choose(40, 20), 137_846_528_820);
        assert_eq!(choose(3, 5), 0);
        assert_eq!(choose(1 << 24, 12), u64::MAX);
        for n in 1..30u64 {
            for k in 1..n {
                assert_eq!(choose(n, k), choose(n - 1, k - 1) + choose(n - 1, k));
            }
        }
    }

    /// Every index of C(7, 3) unranks to a distinct sorted subset that ranks back to it.
    #[test]
    fn rank_inverts_unrank() {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for index in 0..choose(7, 3) {
            unrank(index, 3, &mut out);
            assert!(out.windows(2).all(|w| w[0] < w[1]) && out[2] < 7, "{out:?}");
            assert_eq!(rank(&out), index);
            assert!(seen.insert(out.clone()));
        }
        assert_eq!(seen.len(), 35);
    }
}
