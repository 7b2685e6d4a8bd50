//! The shared suite against a throwaway PostgreSQL server.

crate::suite::store_suite!(crate::fixture::postgres);
