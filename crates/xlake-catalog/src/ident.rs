//! [`TableIdent`]: a table's name in a (possibly nested) namespace, as `--catalog-table`
//! gives it.

/// A table name inside a (possibly nested) namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableIdent {
    /// Namespace levels, outermost first.
    pub namespace: Vec<String>,
    /// The table's name.
    pub name: String,
}

/// A `--catalog-table` that is not `namespace.table`.
#[derive(Debug, thiserror::Error)]
#[error("--catalog-table {text:?}: expected <namespace>.<name>, e.g. analytics.trips")]
pub struct TableIdentError {
    /// The name as given.
    pub text: String,
}

impl TableIdent {
    /// Parse `namespace.table` (the last dot separates the name; nested namespaces use
    /// more dots, as in `a.b.table`).
    pub fn parse(text: &str) -> std::result::Result<Self, TableIdentError> {
        let parts: Vec<&str> = text.split('.').collect();
        if parts.len() < 2 || parts.iter().any(|p| p.trim().is_empty()) {
            return Err(TableIdentError {
                text: text.to_string(),
            });
        }
        let (name, namespace) = parts.split_last().unwrap_or((&"", &[]));
        Ok(Self {
            namespace: namespace.iter().map(|s| s.to_string()).collect(),
            name: name.to_string(),
        })
    }

    /// The namespace joined with dots (how the JDBC layout stores it).
    pub fn namespace_text(&self) -> String {
        self.namespace.join(".")
    }
}

impl std::fmt::Display for TableIdent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.namespace_text(), self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_need_a_namespace() {
        let t = TableIdent::parse("a.b.trips").unwrap();
        assert_eq!(t.namespace, ["a", "b"]);
        assert_eq!(t.name, "trips");
        assert_eq!(t.to_string(), "a.b.trips");
        assert!(TableIdent::parse("trips").is_err());
        assert!(TableIdent::parse("a..trips").is_err());
        assert!(TableIdent::parse(".trips").is_err());
    }
}
