//! Integration tests for glassbox-trace.

mod sink;
