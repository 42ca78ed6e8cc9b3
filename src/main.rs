//! `xlake`: command-line entry point. Argument parsing and printing only; every behaviour
//! lives in the library crates under `crates/`.
//!
//! | module | what it holds |
//! |---|---|
//! | [`args`] | the commands, their arguments and help |
//! | [`commands`] | each command: find the table, call the library, print; exit codes |
//! | [`print`] | the human-readable output of each command |
//! | [`out`] | standard output; a closed pipe ends the process quietly (exit 141) |
//! | [`demo`] | `xlake demo`: the bundled Hudi table, unpacked into a new folder |
//! | [`progress`] | the progress bar of long backfills |
//! | [`signals`] | stopping the scheduled job between cycles |

mod args;
mod commands;
mod demo;
mod out;
mod print;
mod progress;
mod signals;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, LogFormat};
use out::errln;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match cli.command.single_threaded() {
        // File reads and writes (and a long metadata file's parse) go to blocking
        // threads: two keep a commit's few files moving, a listing beside a parse,
        // without starting a thread for each (tokio's default starts up to 512).
        true => {
            let mut builder = tokio::runtime::Builder::new_current_thread();
            builder.max_blocking_threads(2);
            builder
        }
        false => tokio::runtime::Builder::new_multi_thread(),
    }
    .enable_all()
    .build();
    match runtime {
        Ok(runtime) => runtime.block_on(run(cli)),
        Err(e) => {
            errln!("xlake: could not start: {e}");
            ExitCode::from(1)
        }
    }
}

async fn run(cli: Cli) -> ExitCode {
    // Warnings (a checkpoint not written, a catalog that cannot lock, …) show unless RUST_LOG says otherwise.
    let filter = tracing_subscriber::EnvFilter::builder()
        .with_default_directive(tracing_subscriber::filter::LevelFilter::WARN.into())
        .from_env_lossy();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
    let failure_code = cli.command.failure_code();
    match commands::run(cli.command).await {
        Ok(code) => code,
        Err(failure) => {
            errln!("xlake: {}", failure.message);
            ExitCode::from(failure.code.max(failure_code))
        }
    }
}
