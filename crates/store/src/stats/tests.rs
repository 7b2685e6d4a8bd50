//! Against textbook values: normal and chi-square tables, and worked
//! examples recomputed independently (Python's `math.erfc`).

use super::*;

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn normal_tail_matches_the_table() {
    // Φ(1.96) = 0.975, Φ(2.576) = 0.995, Φ(0) = 0.5.
    assert!(close(normal_sf(1.96), 0.025, 1e-5), "{}", normal_sf(1.96));
    assert!(close(normal_sf(2.576), 0.005, 1e-5));
    assert!(close(normal_sf(0.0), 0.5, 1e-7));
    assert!(close(normal_sf(-1.96), 0.975, 1e-5));
}

#[test]
fn chi_square_tail_matches_the_critical_values() {
    // 5% critical values: df 1 → 3.841, 2 → 5.991, 5 → 11.070, 10 → 18.307.
    for (x, df) in [(3.841, 1), (5.991, 2), (11.070, 5), (18.307, 10)] {
        let p = chi_square_sf(x, df);
        assert!(close(p, 0.05, 2e-4), "df {df}: {p}");
    }
    // 1% critical value for df 3 is 11.345.
    assert!(close(chi_square_sf(11.345, 3), 0.01, 1e-4));
    // df 2 has the closed form e^(−x/2).
    assert!(close(chi_square_sf(3.0, 2), (-1.5f64).exp(), 1e-9));
}

#[test]
fn mann_whitney_separated_samples() {
    // 1..5 against 6..10: U = 0; z = (12.5 − 0.5) / √(25·11/12) = 2.5067,
    // two-sided p = 0.012186.
    let a = [1.0, 2.0, 3.0, 4.0, 5.0];
    let b = [6.0, 7.0, 8.0, 9.0, 10.0];
    let r = mann_whitney_u(&a, &b).unwrap();
    assert_eq!(r.statistic, 0.0);
    assert!(close(r.p_value, 0.012_186, 1e-5), "{}", r.p_value);
    // Symmetric: swapping the samples gives U = 25 and the same p.
    let s = mann_whitney_u(&b, &a).unwrap();
    assert_eq!(s.statistic, 25.0);
    assert!(close(s.p_value, r.p_value, 1e-12));
}

#[test]
fn mann_whitney_with_ties() {
    // Ranks averaged over ties, variance tie-corrected: U = 4.5, p = 0.064147.
    let a = [1.0, 2.0, 2.0, 3.0, 4.0];
    let b = [2.0, 3.0, 5.0, 6.0, 6.0, 7.0];
    let r = mann_whitney_u(&a, &b).unwrap();
    assert_eq!(r.statistic, 4.5);
    assert!(close(r.p_value, 0.064_147, 1e-5), "{}", r.p_value);
    // Identical samples: no difference at all.
    let same = mann_whitney_u(&[3.0, 3.0, 3.0], &[3.0, 3.0]).unwrap();
    assert_eq!(same.p_value, 1.0);
    assert!(mann_whitney_u(&[1.0], &[2.0, 3.0]).is_none());
}

#[test]
fn two_proportions() {
    // 45/100 against 30/100: pooled 0.375, z = 2.1909, p = 0.028460.
    let r = two_proportion_z(45, 100, 30, 100).unwrap();
    assert!(close(r.statistic, 2.190_890, 1e-5), "{}", r.statistic);
    assert!(close(r.p_value, 0.028_460, 1e-5), "{}", r.p_value);
    assert_eq!(two_proportion_z(0, 50, 0, 80).unwrap().p_value, 1.0);
    assert!(two_proportion_z(1, 0, 1, 2).is_none());
}

#[test]
fn chi_square_two_by_three() {
    // [[20, 30, 50], [30, 30, 40]]: χ² = 3.1111 on 2 df, p = e^(−χ²/2) = 0.211072.
    let r = chi_square(&[(20, 30), (30, 30), (50, 40)]).unwrap();
    assert!(close(r.statistic, 3.111_111, 1e-5), "{}", r.statistic);
    assert!(close(r.p_value, 0.211_072, 1e-5), "{}", r.p_value);
    // Rare categories are pooled: ten paths of (5, 4), each expected 4.5
    // times, make the one column (50, 40) again.
    let mut rare = vec![(20, 30), (30, 30)];
    rare.extend([(5, 4); 10]);
    let pooled = chi_square(&rare).unwrap();
    assert!(close(pooled.statistic, r.statistic, 1e-9));
    assert_eq!(
        chi_square(&[(10, 20)]).unwrap().p_value,
        1.0,
        "one category"
    );
}

#[test]
fn holm_stops_at_the_first_failure() {
    // m = 4, α = 0.05: 0.005 ≤ 0.0125, 0.01 ≤ 0.0167, then 0.03 > 0.025 stops.
    let mut r: Vec<TestResult> = [0.01, 0.04, 0.03, 0.005]
        .iter()
        .map(|&p| TestResult::new("t", 0.0, p))
        .collect();
    let mut refs: Vec<&mut TestResult> = r.iter_mut().collect();
    holm(&mut refs, 0.05);
    let marked: Vec<bool> = r.iter().map(|t| t.significant).collect();
    assert_eq!(marked, [true, false, false, true]);
}
