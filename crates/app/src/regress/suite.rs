//! The results of a regression run: one [`CaseResult`] per case or
//! replayed request, gathered in named [`Suite`]s, and the run of case
//! files through a topology that produces them ([`run_cases`]).

use glassbox_engine::RunOptions;
use glassbox_trace::diff::path_taken;

use super::cases::Case;
use super::expect;
use crate::Local;

/// How one case or replayed request ended.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseResult {
    pub name: String,
    /// `file:line` of the case, or the stored request id.
    pub location: String,
    pub seconds: f64,
    /// Every miss; empty when it passed.
    pub failures: Vec<String>,
    /// Why it was not run (a request whose stored input is incomplete).
    pub skipped: Option<String>,
    /// The request the run made (for `trace show` / `trace diff`).
    pub request_id: String,
    pub path: String,
    pub cost: String,
}

impl CaseResult {
    pub fn passed(&self) -> bool {
        self.failures.is_empty() && self.skipped.is_none()
    }
}

/// A named list of results.
#[derive(Debug, Clone, PartialEq)]
pub struct Suite {
    pub name: String,
    pub results: Vec<CaseResult>,
}

impl Suite {
    pub fn failed(&self) -> usize {
        self.results
            .iter()
            .filter(|r| !r.failures.is_empty())
            .count()
    }

    pub fn skipped(&self) -> usize {
        self.results.iter().filter(|r| r.skipped.is_some()).count()
    }
}

/// Runs every case of each file through `local`, one suite per file, named
/// `ID@VERSION FILE`.
pub fn run_cases(local: &Local, files: &[(String, Vec<Case>)]) -> Vec<Suite> {
    let label = format!("{}@{}", local.topology.id, local.topology.version);
    files
        .iter()
        .map(|(path, cases)| Suite {
            name: format!("{label} {path}"),
            results: cases.iter().map(|case| run_case(local, case)).collect(),
        })
        .collect()
}

/// Runs one case and checks what it must show.
pub fn run_case(local: &Local, case: &Case) -> CaseResult {
    let outcome = local.run(case.input.clone(), RunOptions::default());
    let r = &outcome.trace.record;
    CaseResult {
        name: case.name.clone(),
        location: case.location.clone(),
        seconds: r.duration_us as f64 / 1e6,
        failures: expect::check(&case.expect, &outcome),
        skipped: None,
        request_id: r.request_id.to_string(),
        path: path_taken(&r.path)
            .iter()
            .map(|n| &**n)
            .collect::<Vec<_>>()
            .join(" → "),
        cost: expect::cost(r.receipt.total),
    }
}

/// Cases passed, failed and skipped over every suite.
pub fn totals(suites: &[Suite]) -> (usize, usize, usize) {
    let all = suites.iter().flat_map(|s| &s.results);
    let passed = all.filter(|r| r.passed()).count();
    let failed = suites.iter().map(Suite::failed).sum();
    let skipped = suites.iter().map(Suite::skipped).sum();
    (passed, failed, skipped)
}
