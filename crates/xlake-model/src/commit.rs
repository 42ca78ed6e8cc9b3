//! One completed source commit and what it did to the table.

use std::collections::{BTreeMap, BTreeSet};

use crate::{DataFile, PartitionSpec, Schema};

/// The table format a commit was read from, by the upper-case name XTable spells it with
/// (`HUDI`, `DELTA`, `PARQUET`). Each source names its own; the model knows none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceFormat(&'static str);

impl SourceFormat {
    /// The format called `name` (upper case, as written to `XTABLE_METADATA`).
    pub const fn new(name: &'static str) -> Self {
        Self(name)
    }

    /// Upper-case name as XTable spells it (`HUDI`, `DELTA`).
    pub fn as_str(&self) -> &'static str {
        self.0
    }
}

impl std::fmt::Display for SourceFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// A completed commit of the source table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceCommit {
    /// Source format.
    pub format: SourceFormat,
    /// The commit's identifier: Hudi requested instant time, Delta version.
    pub id: String,
    /// What the commit was (`commit`, `replacecommit`, `WRITE`, `MERGE`, …).
    pub action: String,
    /// When the commit was requested, ms since the epoch, if the source records it.
    pub requested_ms: Option<i64>,
    /// The commit's time in ms since the epoch: the time a reader time-travels by.
    pub commit_time_ms: i64,
}

impl SourceCommit {
    /// Identifier of the operation, `<id>.<action>`, as XTable writes it.
    pub fn operation_identifier(&self) -> String {
        format!("{}.{}", self.id, self.action)
    }
}

/// What one source commit did: the unit the target turns into one snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeSet {
    /// The commit.
    pub commit: SourceCommit,
    /// Table schema as of the commit.
    pub schema: Schema,
    /// Partition spec as of the commit.
    pub partition_spec: PartitionSpec,
    /// Data files added.
    pub added: Vec<DataFile>,
    /// Locations of data files removed (same form as [`DataFile::path`]).
    pub removed: Vec<String>,
    /// False when files were only rewritten (compaction, clustering): the rows are the same.
    pub data_change: bool,
    /// Extra entries for the snapshot summary, e.g. which view of the source is mirrored.
    pub notes: BTreeMap<String, String>,
    /// When true, `added` lists every live file after this commit and `removed` is unused:
    /// the target works out the difference from what it holds. For commits whose effect
    /// the source cannot name file by file (a rollback of an instant no longer logged).
    pub full_state: bool,
    /// What this commit is mirrored without, in words for the operator (a column left out
    /// because the target cannot hold its type, a view instead of the whole table). Each
    /// note is kept with the snapshot and shown by sync and inspect; an empty list means
    /// the snapshot holds exactly what the source commit holds.
    pub degraded: Vec<String>,
    /// Top-level columns the data files may hold although `schema` does not name them,
    /// because the source's readers skip them (Hudi meta columns of a table that does not
    /// populate them, Delta's change-data-feed `_change_type`). The target must make its
    /// readers skip them too.
    pub ignored_columns: Vec<String>,
    /// The source's own state as of this commit, in its own words (Delta: the `metaData`
    /// and `protocol` in force). The target keeps the newest one with its current
    /// snapshot only, and gives it back in the engine's mirror state, so that a source can
    /// resume where it stopped without reading its history again.
    pub source_state: Option<String>,
    /// The source's readers read a data file that carries no field ids by column name,
    /// each field under one of its [`aliases`](crate::Field::aliases) (an Iceberg table's
    /// `schema.name-mapping.default`: the aliases are every name it gives the field id).
    /// A target that maps columns by field id must then look at each file.
    pub name_mapped: bool,
}

impl ChangeSet {
    /// A change set with no file changes yet.
    pub fn new(commit: SourceCommit, schema: Schema, partition_spec: PartitionSpec) -> Self {
        Self {
            commit,
            schema,
            partition_spec,
            added: Vec::new(),
            removed: Vec::new(),
            data_change: true,
            notes: BTreeMap::new(),
            full_state: false,
            degraded: Vec::new(),
            ignored_columns: Vec::new(),
            source_state: None,
            name_mapped: false,
        }
    }
}

/// A source table as it is declared before any completed commit (its creation schema): an
/// empty table, which the target holds as a table with no snapshot, so that readers find
/// it and return no rows.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclaredTable {
    /// Source format.
    pub format: SourceFormat,
    /// The declared schema.
    pub schema: Schema,
    /// The declared partition spec.
    pub partition_spec: PartitionSpec,
    /// As [`ChangeSet::ignored_columns`]: columns its data files will hold unread.
    pub ignored_columns: Vec<String>,
}

/// A completed source commit as listed cheaply (from names, without reading it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedCommit {
    /// The commit's identifier (as in [`SourceCommit::id`]).
    pub id: String,
    /// Its time, ms since the epoch, as well as the listing knows it.
    pub time_ms: i64,
}

/// The completed commits a source holds, in order, for checking the mirror.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitListing {
    /// Commits that each must have one snapshot, in source order.
    pub commits: Vec<ListedCommit>,
    /// Commits before this id (in source order) are no longer listed because the source
    /// dropped them normally (archived instants, a truncated log), not because they failed.
    pub retained_from: Option<String>,
    /// Whether snapshots must follow source order (false where a commit may complete after
    /// newer ones were mirrored: Hudi table version 6).
    pub strictly_ordered: bool,
    /// Listed commits not mirrored that the source knows completed late: pending when the
    /// mirror's newest change set was saved (Hudi table version 6, ordered by requested
    /// time, names them in its saved state). A sync mirrors each, and `check` counts it
    /// missing, even where it comes before the oldest mirrored commit (which otherwise
    /// reads as mirrored and expired).
    pub completed_late: BTreeSet<String>,
    /// Commits the source knew pending when the mirror's newest change set was saved that
    /// it no longer holds, with why each may have completed unmirrored (Hudi table version
    /// 6: an instant pending at a sync, gone from the active timeline by the next one,
    /// older than all of it: archived, after completing or after a rollback that was
    /// archived too). Unless a listed rollback or restore undid one, a sync refuses to go
    /// on (its rows would be missing, its commit metadata is gone) and `check` reports it.
    pub gone_unmirrored: BTreeMap<String, String>,
}

impl CommitListing {
    /// Each listed commit's position in source order, by id.
    pub fn positions(&self) -> std::collections::HashMap<&str, usize> {
        self.commits
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id.as_str(), i))
            .collect()
    }

    /// Where the mirror begins in this listing: the position of `first`, the commit the
    /// target's oldest snapshot records, when listed; when it is not (a rollback or
    /// restore undid it, or the source dropped it), of the first listed commit after it in
    /// source order (`order`), or the listing's end; without `first`, of the first listed
    /// commit that `mirrored` holds; `None` when there is none. A listed commit before it
    /// that no snapshot records is not to mirror (it was mirrored and expired, or folded
    /// into the first snapshot by `sync --from-latest`) unless it completed late
    /// ([`Self::completed_late`]). Not the oldest mirrored commit in source order: after
    /// a late completion that one may come before commits the first snapshot folded; nor
    /// nowhere when the first snapshot's commit was undone (hostile review hr13: the
    /// commits it folded were mirrored again).
    pub fn mirror_start(
        &self,
        first: Option<&str>,
        mirrored: impl Fn(&str) -> bool,
        order: impl Fn(&str, &str) -> std::cmp::Ordering,
    ) -> Option<usize> {
        let Some(first) = first else {
            return self.commits.iter().position(|c| mirrored(&c.id));
        };
        let listed = self.commits.iter().position(|c| c.id == first);
        let after = || {
            let after = self
                .commits
                .iter()
                .position(|c| order(&c.id, first).is_gt());
            after.unwrap_or(self.commits.len())
        };
        Some(listed.unwrap_or_else(after))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_identifier_joins_id_and_action() {
        let commit = SourceCommit {
            format: SourceFormat::new("HUDI"),
            id: "20250713010536861".into(),
            action: "commit".into(),
            requested_ms: None,
            commit_time_ms: 0,
        };
        assert_eq!(commit.operation_identifier(), "20250713010536861.commit");
        assert_eq!(commit.format.as_str(), "HUDI");
    }

    #[test]
    fn the_mirror_begins_at_the_oldest_snapshots_commit_when_listed() {
        let listing = CommitListing {
            commits: ["a", "b", "c", "d"]
                .map(|id| ListedCommit {
                    id: id.into(),
                    time_ms: 0,
                })
                .into(),
            ..Default::default()
        };
        // c's snapshot is the oldest, a completed late after it.
        let mirrored = |id: &str| ["a", "c"].contains(&id);
        assert_eq!(listing.mirror_start(Some("c"), mirrored, str::cmp), Some(2));
        // Its commit no longer listed (undone, dropped): the first listed after it.
        assert_eq!(
            listing.mirror_start(Some("bb"), mirrored, str::cmp),
            Some(2)
        );
        assert_eq!(listing.mirror_start(Some("0"), mirrored, str::cmp), Some(0));
        assert_eq!(listing.mirror_start(Some("z"), mirrored, str::cmp), Some(4));
        // No snapshot records a commit: the first mirrored one.
        assert_eq!(listing.mirror_start(None, mirrored, str::cmp), Some(0));
        assert_eq!(listing.mirror_start(None, |_| false, str::cmp), None);
    }
}
