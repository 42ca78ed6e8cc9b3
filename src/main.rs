//! `xlake`: command-line entry point. Argument parsing and printing only; every behaviour
//! lives in the library crates under `crates/`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use xlake_hudi::HudiOptions;
use xlake_iceberg::summary::iso_instant;
use xlake_iceberg::{IcebergTable, SyncMetadata};
use xlake_storage::TableStore;
use xlake_sync::{sync, SyncOptions};

/// Make a Hudi or Delta table readable as Apache Iceberg, in place.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Mirror every pending completed commit of a Hudi or Delta table as Iceberg snapshots.
    Sync {
        /// Table root: a local path, or a URL with the `cloud` feature.
        table: String,
        /// Mirror a merge-on-read table's base files only (its read-optimized view).
        #[arg(long)]
        mor_read_optimized: bool,
        /// Do not check that live data files exist (a copy of the log without the data).
        #[arg(long)]
        skip_file_check: bool,
    },
    /// List the Iceberg snapshots of a table and the source commit each one mirrors.
    Snapshots {
        /// Table root (the folder holding `metadata/`): a local path, or a URL with the
        /// `cloud` feature.
        table: String,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    match run(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xlake: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    match cli.command {
        Command::Sync {
            table,
            mor_read_optimized,
            skip_file_check,
        } => {
            let options = SyncOptions {
                hudi: HudiOptions { mor_read_optimized },
                skip_file_check,
                ..Default::default()
            };
            let report = sync(&table, &options, |m| {
                println!(
                    "{} {} {:<14} +{} -{} files -> snapshot {} (v{})",
                    m.change.commit.format.as_str(),
                    m.change.commit.id,
                    m.change.commit.action,
                    m.change.added.len(),
                    m.change.removed.len(),
                    m.committed.snapshot_id,
                    m.committed.version
                );
            })
            .await?;
            for note in &report.notes {
                println!("note: {note}");
            }
            match report.written.len() {
                0 => println!("{table}: up to date, nothing to mirror"),
                n => println!("{table}: {n} snapshots written"),
            }
        }
        Command::Snapshots { table } => {
            let iceberg = IcebergTable::new(TableStore::open(&table)?);
            let Some(loaded) = iceberg.load().await? else {
                println!("{table}: no Iceberg metadata yet");
                return Ok(());
            };
            let mut snapshots: Vec<_> = loaded.metadata.snapshots().collect();
            snapshots.sort_by_key(|s| s.sequence_number());
            println!("{table}: metadata/v{}.metadata.json", loaded.version);
            println!(
                "{:>4}  {:<20}  {:<24}  {:<9}  source commit",
                "seq", "snapshot", "time", "operation"
            );
            for s in snapshots {
                let sync = SyncMetadata::from_summary(&s.summary().additional_properties);
                let source = sync.map_or_else(
                    || "-".to_string(),
                    |m| {
                        format!(
                            "{} {}",
                            m.source_table_format.unwrap_or_default(),
                            m.latest_table_operation_identifier
                                .or(m.source_identifier)
                                .unwrap_or_default()
                        )
                    },
                );
                println!(
                    "{:>4}  {:<20}  {:<24}  {:<9}  {source}",
                    s.sequence_number(),
                    s.snapshot_id(),
                    iso_instant(s.timestamp_ms()),
                    s.summary().operation.as_str()
                );
            }
        }
    }
    Ok(())
}
