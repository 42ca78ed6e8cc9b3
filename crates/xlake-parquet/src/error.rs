//! [`ParquetError`]: why a Parquet folder cannot be mirrored, with the cause beneath.

use xlake_storage::footer::FooterError;

/// Why a file of a Parquet folder cannot be mirrored. The message is the one the operator
/// reads (after the file, see [`InFile`]); a library error beneath stays its source.
#[derive(Debug, thiserror::Error)]
pub enum ParquetError {
    /// The footer cannot be read.
    #[error("not a readable Parquet file: {0}")]
    Footer(#[source] FooterError),
    /// The footer's schema has no Arrow form.
    #[error("unreadable Parquet schema: {0}")]
    Schema(#[source] parquet::errors::ParquetError),
    /// A column whose type has no neutral (Iceberg) form.
    #[error("column {column}: {what}")]
    Column {
        /// The column's name.
        column: String,
        /// What of its type.
        what: String,
    },
    /// The file does not fit the table: a column or a partition value it cannot be read as.
    #[error("{0}")]
    Refused(String),
}

impl From<String> for ParquetError {
    fn from(reason: String) -> Self {
        Self::Refused(reason)
    }
}

/// A [`ParquetError`] of one file: `<file>: <error>`.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {source}")]
pub struct InFile {
    /// The file's full location.
    pub file: String,
    /// What is wrong with it.
    #[source]
    pub source: ParquetError,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    #[test]
    fn a_file_error_reads_file_first_and_keeps_the_library_error() {
        let footer = FooterError::TooShort { size: 3 };
        let text = footer.to_string();
        let e = InFile {
            file: "/t/a.parquet".into(),
            source: ParquetError::Footer(footer),
        };
        assert_eq!(
            e.to_string(),
            format!("/t/a.parquet: not a readable Parquet file: {text}")
        );
        let footer = e.source().and_then(Error::source);
        assert!(footer.is_some_and(|f| f.is::<FooterError>()));
    }
}
