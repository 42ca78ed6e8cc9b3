//! Helpers shared by the end-to-end tests.
pub mod delta;
pub mod foundation;
pub mod hudi;
