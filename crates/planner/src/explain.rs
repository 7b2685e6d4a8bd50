//! An explained number: value, unit, the formula and the inputs that made it.
//!
//! The planner never prints a bare figure; every output line carries the
//! formula with its inputs substituted, so a reader can check or redo it.

use serde::Serialize;

/// One explained result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Line {
    pub metric: String,
    pub value: f64,
    pub unit: String,
    pub formula: String,
    pub inputs: String,
}

impl Line {
    pub fn new(
        metric: &str,
        value: f64,
        unit: &str,
        formula: impl Into<String>,
        inputs: impl Into<String>,
    ) -> Self {
        Self {
            metric: metric.to_string(),
            value,
            unit: unit.to_string(),
            formula: formula.into(),
            inputs: inputs.into(),
        }
    }
}

/// Formats a number with 3-4 significant digits, switching to scientific
/// notation for very large or small magnitudes.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if !(1e-3..1e7).contains(&a) {
        format!("{v:.3e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_compact() {
        assert_eq!(num(70.312), "70.3");
        assert_eq!(num(1234.5), "1234");
        assert_eq!(num(2.1e17), "2.100e17");
        assert_eq!(num(0.25), "0.2500");
    }
}
