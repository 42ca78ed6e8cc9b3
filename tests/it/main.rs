//! The integration tests, in one binary: one module per area (each was its own test
//! binary, linking the whole dependency tree, before). Fixtures come from the
//! `xlake-test-utils` crate; helpers that run the `xlake` binary are in [`common`].
//!
//! The tests run as threads of one process: none may change the process's environment or
//! current directory (pass them to the child `Command` instead).
//!
//! `cargo test --test it MODULE::` runs one area, e.g. `cargo test --test it hudi_sync::`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

mod bad_input;
mod callback;
mod catalog;
mod check;
mod cleanup;
mod cli;
mod commit_mode;
mod conformance;
mod delta_sync;
mod delta_target;
mod expire;
mod formats;
mod fuzz_corpora;
mod hudi_sync;
mod hudi_timelines;
mod hudi_v6_pending;
mod iceberg_roundtrip;
mod iceberg_source;
mod iceberg_v3;
mod inspect;
mod job;
mod noop;
mod parquet_folder;
mod races;
mod relocation;
mod row_lineage;
mod store_faults;
mod vector_in_place;
