//! Regression tests of a topology, as library code any door (or test) can
//! call: case files read against the validated topology, every problem at
//! its `file:line:column` ([`cases`]), and what a run must show checked
//! against its outcome ([`expect`]). `glassbox test` reads, runs and
//! reports them; replaying stored requests is `glassbox test --replay`.

pub mod cases;
pub mod expect;
