//! File groups and their base files: the live files of the table as each completed instant
//! takes effect.

use std::collections::BTreeMap;

use crate::commit_metadata::{CommitMetadata, WriteStat};
use crate::error::Reason;
use xlake_source::SourceOptions as HudiOptions;

/// The current base file of one file group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseFile {
    /// Path relative to the table root.
    pub path: String,
    /// Partition path.
    pub partition: String,
    /// File group id.
    pub file_id: String,
    /// Bytes.
    pub size: u64,
    /// Rows, when the commit metadata records them.
    pub records: Option<u64>,
}

impl BaseFile {
    /// The base file at `path` that `stat` records writing; an error when the stat lacks
    /// its file group id or size.
    pub(crate) fn written(stat: &WriteStat, path: &str) -> Result<BaseFile, Reason> {
        let file_id = stat
            .file_id
            .clone()
            .ok_or_else(|| format!("write stat of {path} has no fileId"))?;
        let size = stat
            .file_size_in_bytes
            .ok_or_else(|| format!("write stat of {path} has no fileSizeInBytes"))?;
        Ok(BaseFile {
            path: path.to_string(),
            partition: stat.partition_path.clone().unwrap_or_default(),
            file_id,
            size,
            records: stat.num_writes,
        })
    }
}

/// What one instant did to the live base files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effect {
    /// Base files that became live.
    pub added: Vec<BaseFile>,
    /// Base files that stopped being live.
    pub removed: Vec<BaseFile>,
}

/// The live base files, one per file group.
#[derive(Debug, Default, Clone)]
pub struct FileGroups {
    live: BTreeMap<(String, String), BaseFile>,
}

/// The parts of a base file's path relative to the table root,
/// `<partition path>/<fileId>_<writeToken>_<instantTime>.parquet`: (partition path,
/// file id, instant time); the partition path is empty for a file at the root.
pub fn parse_base_file_path(path: &str) -> Option<(&str, &str, &str)> {
    let (partition, name) = path.rsplit_once('/').unwrap_or(("", path));
    let (file_id, instant) = parse_base_file_name(name)?;
    Some((partition, file_id, instant))
}

/// The parts of a base file name `<fileId>_<writeToken>_<instantTime>.parquet`:
/// (file id, instant time).
pub fn parse_base_file_name(name: &str) -> Option<(&str, &str)> {
    let stem = name.strip_suffix(".parquet")?;
    let mut parts = stem.rsplitn(3, '_');
    let instant = parts.next()?;
    let _token = parts.next()?;
    let file_id = parts.next()?;
    (!file_id.is_empty() && instant.len() >= 14 && instant.bytes().all(|b| b.is_ascii_digit()))
        .then_some((file_id, instant))
}

/// True for Hudi log files (`.<fileId>_<instant>.log.<version>_<token>`).
pub(crate) fn is_log_file(path: &str) -> bool {
    path.rsplit('/')
        .next()
        .is_some_and(|name| name.starts_with('.') && name.contains(".log."))
}

impl FileGroups {
    /// Apply a commit, delta commit or replace commit. Log files are skipped for the
    /// read-optimized view of a merge-on-read table (`options.mor_read_optimized`) and
    /// refused otherwise, naming the target whose readers cannot read them.
    pub fn apply_commit(
        &mut self,
        meta: &CommitMetadata,
        options: &HudiOptions,
    ) -> Result<Effect, Reason> {
        let mut effect = Effect::default();
        for stat in meta.write_stats() {
            let path = stat
                .path
                .as_deref()
                .filter(|p| !p.is_empty())
                .ok_or("a write stat has no path")?;
            if is_log_file(path) {
                if options.mor_read_optimized {
                    continue;
                }
                let readers = options.target_readers();
                return Err(format!(
                    "writes log file {path}: merge-on-read log files cannot be read by {readers}"
                )
                .into());
            }
            if !path.ends_with(".parquet") {
                return Err(format!("base file {path} is not Parquet").into());
            }
            let file = BaseFile::written(stat, path)?;
            let key = (file.partition.clone(), file.file_id.clone());
            match self.live.insert(key, file.clone()) {
                Some(old) if old.path == file.path => continue,
                Some(old) => effect.removed.push(old),
                None => {}
            }
            effect.added.push(file);
        }
        for (partition, file_id) in meta.replaced() {
            if let Some(old) = self
                .live
                .remove(&(partition.to_string(), file_id.to_string()))
            {
                effect.removed.push(old);
            }
        }
        Ok(effect)
    }

    /// Make these base files live, as the state before the first instant replayed.
    pub fn seed(&mut self, files: Vec<BaseFile>) {
        for f in files {
            self.live
                .insert((f.partition.clone(), f.file_id.clone()), f);
        }
    }

    /// The live base files.
    pub fn live(&self) -> impl Iterator<Item = &BaseFile> {
        self.live.values()
    }

    /// Number of live base files.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// True when no base file is live.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::commit_metadata::WriteStat;

    fn meta(files: &[(&str, &str)], replaced: &[&str]) -> CommitMetadata {
        let stats = files
            .iter()
            .map(|(id, path)| WriteStat {
                file_id: Some(id.to_string()),
                path: Some(path.to_string()),
                partition_path: Some("p".into()),
                file_size_in_bytes: Some(10),
                num_writes: Some(1),
                ..Default::default()
            })
            .collect();
        CommitMetadata {
            partition_to_write_stats: Some(HashMap::from([("p".to_string(), Some(stats))])),
            partition_to_replace_file_ids: Some(HashMap::from([(
                "p".to_string(),
                Some(replaced.iter().map(|s| s.to_string()).collect()),
            )])),
            ..Default::default()
        }
    }

    fn paths(files: &[BaseFile]) -> Vec<&str> {
        files.iter().map(|f| f.path.as_str()).collect()
    }

    #[test]
    fn new_base_file_replaces_its_group_and_replace_commits_drop_groups() {
        let mut g = FileGroups::default();
        let none = HudiOptions::default();
        let e1 = g
            .apply_commit(
                &meta(&[("a", "p/a_1.parquet"), ("b", "p/b_1.parquet")], &[]),
                &HudiOptions::default(),
            )
            .unwrap();
        assert_eq!(paths(&e1.added), ["p/a_1.parquet", "p/b_1.parquet"]);
        let e2 = g
            .apply_commit(&meta(&[("a", "p/a_2.parquet")], &[]), &none)
            .unwrap();
        assert_eq!(
            (paths(&e2.added), paths(&e2.removed)),
            (vec!["p/a_2.parquet"], vec!["p/a_1.parquet"])
        );
        let e3 = g
            .apply_commit(&meta(&[("c", "p/c_3.parquet")], &["a", "b"]), &none)
            .unwrap();
        assert_eq!(paths(&e3.removed), ["p/a_2.parquet", "p/b_1.parquet"]);
        assert_eq!(g.len(), 1);
    }

    #[test]
    fn log_files_are_refused_naming_the_target_unless_skipped() {
        let mut g = FileGroups::default();
        let logs = meta(&[("a", "p/.a_1.log.1_0-1-1")], &[]);
        let refused = |options: &HudiOptions| {
            FileGroups::default()
                .apply_commit(&logs, options)
                .unwrap_err()
                .to_string()
        };
        let delta = HudiOptions {
            target_title: Some("Delta"),
            ..Default::default()
        };
        assert_eq!(
            refused(&delta),
            "writes log file p/.a_1.log.1_0-1-1: merge-on-read log files cannot be read by Delta engines"
        );
        assert!(
            refused(&HudiOptions::default()).ends_with("cannot be read by the mirror's readers")
        );
        let view = HudiOptions {
            mor_read_optimized: true,
            ..delta
        };
        assert_eq!(g.apply_commit(&logs, &view).unwrap(), Effect::default());
    }
}
