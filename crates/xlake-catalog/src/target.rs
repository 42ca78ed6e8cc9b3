//! [`CatalogTarget`]: what the operator asked for, and how messages name a catalog.
//! Backends take their target from here; opening one by its URI is `uri`'s.

use crate::error::{CatalogError, Result};
use crate::ident::TableIdent;

/// The catalog name used when none is given (the JDBC layout's `catalog_name`).
pub const DEFAULT_NAME: &str = "xlake";

/// What the operator asked for: `--catalog`, `--catalog-name`, `--catalog-table`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogTarget {
    /// The catalog URI.
    pub uri: String,
    /// The catalog's own name (the JDBC layout's `catalog_name`).
    pub name: String,
    /// `namespace.table`.
    pub table: String,
}

impl CatalogTarget {
    /// The table's identifier.
    pub fn ident(&self) -> Result<TableIdent> {
        TableIdent::parse(&self.table).map_err(|e| CatalogError::Config {
            catalog: redact(&self.uri),
            reason: e.to_string(),
        })
    }
}

/// The URI without a password (how messages name a catalog).
pub fn redact(uri: &str) -> String {
    match url::Url::parse(uri) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => uri.to_string(),
    }
}

pub(crate) fn config_error(uri: &str, reason: impl Into<String>) -> CatalogError {
    CatalogError::Config {
        catalog: redact(uri),
        reason: reason.into(),
    }
}
