//! Significance tests for comparing two topology versions: is a difference
//! larger than noise?
//!
//! - [`mann_whitney_u`]: two samples of a continuous measure (latency,
//!   cost). Rank-based, so a few huge outliers or a long tail do not decide
//!   it, and it assumes no distribution. Two-sided, normal approximation
//!   with the tie correction and a continuity correction.
//! - [`two_proportion_z`]: two rates (errors, timeouts, guard failures).
//!   Pooled standard error, two-sided.
//! - [`chi_square`]: two distributions over categories (the path mix).
//!   Pearson's test of independence on a 2×k table; categories expected
//!   fewer than 5 times are pooled first (Cochran's rule), so rare paths do
//!   not inflate the statistic.
//! - [`holm`]: a comparison runs many tests at once (every node, every
//!   rate), so one in twenty would come out "significant" by chance at 5%;
//!   Holm's step-down correction keeps the chance of any false mark in the
//!   whole comparison at the level asked.
//!
//! Hand-written rather than a statistics crate: four formulas and two
//! special functions (the complementary error function, the regularised
//! incomplete gamma function) against a dependency tree that would add
//! linear-algebra crates to a 2-core build. Each is checked against
//! textbook values in the tests.

use serde::Serialize;

/// The outcome of one test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TestResult {
    /// `mann_whitney_u`, `two_proportion_z` or `chi_square`.
    pub test: &'static str,
    /// U (of the first sample), z, or χ².
    pub statistic: f64,
    /// Two-sided p-value: the chance of a difference at least this large if
    /// both versions behaved the same.
    pub p_value: f64,
    /// Significant after Holm's correction across the comparison (set by
    /// the caller with [`holm`]).
    pub significant: bool,
}

impl TestResult {
    fn new(test: &'static str, statistic: f64, p_value: f64) -> TestResult {
        TestResult {
            test,
            statistic,
            p_value: p_value.clamp(0.0, 1.0),
            significant: false,
        }
    }
}

/// erfc(x), Chebyshev fit with fractional error below 1.2e-7 everywhere
/// (Press et al., Numerical Recipes, `erfcc`).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

/// P(Z > z) for a standard normal Z.
pub fn normal_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, n = 9; ~15 significant digits).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1−x) = π / sin(πx).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Q(a, x) = Γ(a, x) / Γ(a), the regularised upper incomplete gamma
/// function: a series below a + 1, a continued fraction (Lentz) above.
fn gamma_q(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 1.0;
    }
    let ln_front = -x + a * x.ln() - ln_gamma(a);
    if x < a + 1.0 {
        let (mut sum, mut term, mut n) = (1.0 / a, 1.0 / a, a);
        for _ in 0..1000 {
            n += 1.0;
            term *= x / n;
            sum += term;
            if term.abs() < sum.abs() * 1e-15 {
                break;
            }
        }
        return 1.0 - sum * ln_front.exp();
    }
    const TINY: f64 = 1e-300;
    let mut b = x + 1.0 - a;
    let mut c = 1.0 / TINY;
    let mut d = 1.0 / b;
    let mut h = d;
    for i in 1..1000 {
        let an = -(i as f64) * (i as f64 - a);
        b += 2.0;
        d = an * d + b;
        if d.abs() < TINY {
            d = TINY;
        }
        c = b + an / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let delta = d * c;
        h *= delta;
        if (delta - 1.0).abs() < 1e-15 {
            break;
        }
    }
    ln_front.exp() * h
}

/// P(X > x) for X chi-square distributed with `df` degrees of freedom.
pub fn chi_square_sf(x: f64, df: u32) -> f64 {
    if df == 0 {
        return 1.0;
    }
    gamma_q(f64::from(df) / 2.0, x / 2.0)
}

/// Mann–Whitney U test of samples `a` and `b`. `None` when either sample
/// has fewer than two values.
pub fn mann_whitney_u(a: &[f64], b: &[f64]) -> Option<TestResult> {
    let (n1, n2) = (a.len(), b.len());
    if n1 < 2 || n2 < 2 {
        return None;
    }
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&v| (v, true))
        .chain(b.iter().map(|&v| (v, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = all.len();
    let (mut rank_a, mut ties) = (0.0, 0.0);
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        while j < n && all[j].0 == all[i].0 {
            j += 1;
        }
        // Positions i..j share the average of ranks i+1..=j.
        let rank = (i + 1 + j) as f64 / 2.0;
        let in_a = all[i..j].iter().filter(|(_, from_a)| *from_a).count();
        rank_a += rank * in_a as f64;
        let t = (j - i) as f64;
        ties += t * t * t - t;
        i = j;
    }
    let (n1f, n2f, nf) = (n1 as f64, n2 as f64, n as f64);
    let u = rank_a - n1f * (n1f + 1.0) / 2.0;
    let mean = n1f * n2f / 2.0;
    let var = n1f * n2f / 12.0 * ((nf + 1.0) - ties / (nf * (nf - 1.0)));
    if var <= 0.0 {
        // Every value equal: no evidence of any difference.
        return Some(TestResult::new("mann_whitney_u", u, 1.0));
    }
    let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
    Some(TestResult::new("mann_whitney_u", u, 2.0 * normal_sf(z)))
}

/// Two-proportion z test: `hits_a` of `n_a` against `hits_b` of `n_b`.
/// `None` when either side has no trials.
pub fn two_proportion_z(hits_a: u64, n_a: u64, hits_b: u64, n_b: u64) -> Option<TestResult> {
    if n_a == 0 || n_b == 0 {
        return None;
    }
    let (pa, pb) = (hits_a as f64 / n_a as f64, hits_b as f64 / n_b as f64);
    let pooled = (hits_a + hits_b) as f64 / (n_a + n_b) as f64;
    let se = (pooled * (1.0 - pooled) * (1.0 / n_a as f64 + 1.0 / n_b as f64)).sqrt();
    if se == 0.0 {
        // Both 0% or both 100%.
        return Some(TestResult::new("two_proportion_z", 0.0, 1.0));
    }
    let z = (pa - pb) / se;
    Some(TestResult::new(
        "two_proportion_z",
        z,
        2.0 * normal_sf(z.abs()),
    ))
}

/// Pearson's chi-square test of independence on a 2×k table: `counts[i]`
/// is (count in a, count in b) of category i. Categories expected fewer
/// than 5 times in either row are pooled into one. `None` when either row
/// is empty.
pub fn chi_square(counts: &[(u64, u64)]) -> Option<TestResult> {
    let (na, nb): (u64, u64) = counts.iter().fold((0, 0), |(x, y), (a, b)| (x + a, y + b));
    if na == 0 || nb == 0 {
        return None;
    }
    let total = (na + nb) as f64;
    let expected_min = |a: u64, b: u64| {
        let col = (a + b) as f64;
        (col * na as f64 / total).min(col * nb as f64 / total)
    };
    let mut cols: Vec<(u64, u64)> = Vec::new();
    let mut pooled = (0u64, 0u64);
    for &(a, b) in counts {
        if a + b == 0 {
            continue;
        }
        if expected_min(a, b) < 5.0 {
            pooled = (pooled.0 + a, pooled.1 + b);
        } else {
            cols.push((a, b));
        }
    }
    if pooled.0 + pooled.1 > 0 {
        cols.push(pooled);
    }
    let df = u32::try_from(cols.len().saturating_sub(1)).unwrap_or(u32::MAX);
    if df == 0 {
        return Some(TestResult::new("chi_square", 0.0, 1.0));
    }
    let mut x2 = 0.0;
    for (a, b) in cols {
        let col = (a + b) as f64;
        for (observed, row) in [(a, na), (b, nb)] {
            let expected = col * row as f64 / total;
            x2 += (observed as f64 - expected).powi(2) / expected;
        }
    }
    Some(TestResult::new("chi_square", x2, chi_square_sf(x2, df)))
}

/// Holm's step-down correction: marks `significant` on the results whose
/// difference holds at family-wise level `alpha` across all of them.
pub fn holm(results: &mut [&mut TestResult], alpha: f64) {
    let m = results.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| results[i].p_value.total_cmp(&results[j].p_value));
    for r in results.iter_mut() {
        r.significant = false;
    }
    for (step, &i) in order.iter().enumerate() {
        if results[i].p_value <= alpha / (m - step) as f64 {
            results[i].significant = true;
        } else {
            break;
        }
    }
}

#[cfg(test)]
mod tests;
