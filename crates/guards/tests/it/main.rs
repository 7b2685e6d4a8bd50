//! The guards over this workspace, and the guards' own behaviour on small
//! crates written to a temporary folder.

#![allow(clippy::unwrap_used)]

mod architecture;
mod layering;
mod resolution;
mod sizes;
