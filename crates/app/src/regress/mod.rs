//! Regression tests of a topology, as library code any door (or test) can
//! call: case files read against the validated topology, every problem at
//! its `file:line:column` ([`cases`]); what a run must show checked against
//! its outcome ([`expect`]); cases run into results and suites
//! ([`suite`]); stored requests replayed and every change in path, labels,
//! status, guard outcome or cost reported ([`replay`]); the results as
//! JUnit XML ([`junit`]). `glassbox test` (and `--replay`) resolves its
//! flags, calls these, and prints the suites.

pub mod cases;
pub mod expect;
pub mod junit;
pub mod replay;
pub mod suite;
