//! [`Reason`]: a message for the operator with the library error beneath kept.

/// What is wrong with a file of a source table (or of a value in it), in the words the
/// operator reads; the error of the library beneath (Avro, JSON, Arrow, Parquet, storage),
/// where there is one, stays reachable as its [`source`](std::error::Error::source). The
/// formats' crates give it as the reason of their errors.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Reason {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl Reason {
    /// The library error `e`, its message as it reads.
    pub fn library(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self {
            message: e.to_string(),
            source: Some(Box::new(e)),
        }
    }

    /// A mapper to the library error `e` read as `<context>: <e>`.
    pub fn within<E: std::error::Error + Send + Sync + 'static>(
        context: impl std::fmt::Display,
    ) -> impl FnOnce(E) -> Self {
        move |e| Self::library(e).context(context)
    }

    /// The same reason, its message as it reads, with `e` beneath as its cause.
    pub fn because(mut self, e: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(e));
        self
    }

    /// The same reason, its message prefixed (`<context>: <message>`); the cause stays.
    pub fn context(mut self, context: impl std::fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }
}

impl From<String> for Reason {
    fn from(message: String) -> Self {
        Self {
            message,
            source: None,
        }
    }
}

impl From<&str> for Reason {
    fn from(message: &str) -> Self {
        message.to_string().into()
    }
}
