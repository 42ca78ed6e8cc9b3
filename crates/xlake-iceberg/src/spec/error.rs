//! [`CodecError`]: why a file of the specification could not be encoded or decoded.

use std::error::Error;
use std::fmt::Display;

/// Why a codec of the spec layer failed. Its message is the codec's own (the caller puts
/// the table and the file before it, as [`crate::IcebergError::CorruptMetadata`] does);
/// the error of the library beneath (iceberg-rust, serde_json, Avro, Parquet, storage),
/// where there is one, stays reachable as its [`source`](Error::source).
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The bytes or the values break a rule of the specification (or of what xlake writes).
    #[error("{0}")]
    Invalid(String),
    /// A library beneath failed; the message names what was being done.
    #[error("{message}")]
    Library {
        /// The message, the library's own after any context.
        message: String,
        /// The library's error.
        #[source]
        source: Box<dyn Error + Send + Sync>,
    },
}

impl CodecError {
    /// A rule of the specification is broken: `reason` says which.
    pub fn invalid(reason: impl Into<String>) -> Self {
        Self::Invalid(reason.into())
    }

    /// The library error `e`, its message as it reads.
    pub fn library(e: impl Error + Send + Sync + 'static) -> Self {
        Self::Library {
            message: e.to_string(),
            source: Box::new(e),
        }
    }

    /// A mapper to the library error `e` read as `<context>: <e>`.
    pub fn within<E: Error + Send + Sync + 'static>(
        context: impl Display,
    ) -> impl FnOnce(E) -> Self {
        move |e| Self::library(e).context(context)
    }

    /// The same error, its message prefixed (`<context>: <message>`); the cause stays.
    pub fn context(self, context: impl Display) -> Self {
        match self {
            Self::Invalid(reason) => Self::Invalid(format!("{context}: {reason}")),
            Self::Library { message, source } => Self::Library {
                message: format!("{context}: {message}"),
                source,
            },
        }
    }
}

impl From<String> for CodecError {
    fn from(reason: String) -> Self {
        Self::Invalid(reason)
    }
}

impl From<&str> for CodecError {
    fn from(reason: &str) -> Self {
        Self::Invalid(reason.to_string())
    }
}

/// The libraries whose errors a codec's caller meets directly: each is kept as the cause.
macro_rules! from_library {
    ($($t:ty),*) => {$(
        impl From<$t> for CodecError {
            fn from(e: $t) -> Self {
                Self::library(e)
            }
        }
    )*};
}

from_library!(
    serde_json::Error,
    std::num::TryFromIntError,
    iceberg::Error,
    xlake_storage::StorageError
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_reads_as_the_codec_wrote_it_and_the_cause_stays() {
        let json = serde_json::from_str::<u8>("x").unwrap_err();
        let text = json.to_string();
        let e = CodecError::within("manifest m.avro")(json);
        assert_eq!(e.to_string(), format!("manifest m.avro: {text}"));
        assert!(e.source().is_some_and(|s| s.is::<serde_json::Error>()));
        let e = CodecError::invalid("truncated").context("v1.metadata.json");
        assert_eq!(e.to_string(), "v1.metadata.json: truncated");
        assert!(e.source().is_none());
    }
}
