//! The small-manifest merge rule (Iceberg's `commit.manifest-merge.enabled`): which
//! manifests of a list are small, and whether a merge would bin any two of them. The
//! merge itself is an operation ([`crate::ops::merge`]); a list carried from its parent
//! ([`super::carry`]) asks this rule first.

use std::collections::BTreeMap;

use iceberg::spec::{ManifestContentType, ManifestFile};

/// Small data manifests of one spec that trigger a merge (Iceberg's
/// `commit.manifest.min-count-to-merge` default).
pub const MIN_COUNT_TO_MERGE: usize = 100;

/// Live entries a merged manifest holds at most; manifests with fewer are small.
pub const TARGET_ENTRIES: u32 = 100;

/// What merging looks at of a manifest: its partition spec, content and live entries.
pub(crate) type Shape = (i32, ManifestContentType, u32);

pub(crate) fn shape(m: &ManifestFile) -> Shape {
    (m.partition_spec_id, m.content, live(m))
}

/// The live entries of the small data manifests of each partition spec among `kept`, in
/// list order.
fn small_groups(kept: impl Iterator<Item = Shape>) -> BTreeMap<i32, Vec<u32>> {
    let mut groups: BTreeMap<i32, Vec<u32>> = BTreeMap::new();
    for shape in kept.filter(is_small_shape) {
        groups.entry(shape.0).or_default().push(shape.2);
    }
    groups
}

/// How many manifests each bin of a group holds: whole manifests, in list order, up to
/// [`TARGET_ENTRIES`] live entries a bin (`lives`: each manifest's live entries).
pub(crate) fn bin_sizes(lives: impl Iterator<Item = u32>) -> Vec<usize> {
    let (mut bins, mut size) = (vec![0], 0);
    for live in lives {
        if size + live > TARGET_ENTRIES && size > 0 {
            bins.push(0);
            size = 0;
        }
        size += live;
        if let Some(bin) = bins.last_mut() {
            *bin += 1;
        }
    }
    bins
}

/// Live entries of a manifest, as its list counts them.
pub(crate) fn live(m: &ManifestFile) -> u32 {
    m.added_files_count.unwrap_or(0) + m.existing_files_count.unwrap_or(0)
}

pub(crate) fn is_small(m: &ManifestFile) -> bool {
    is_small_shape(&shape(m))
}

fn is_small_shape((_, content, live): &Shape) -> bool {
    *content == ManifestContentType::Data && *live < TARGET_ENTRIES
}

/// Whether [`merge_small_manifests`](crate::ops::merge) would merge any of `kept` (else it
/// gives them back as they are, in their order).
pub(crate) fn merges(kept: impl Iterator<Item = Shape>) -> bool {
    small_groups(kept).values().any(|lives| {
        lives.len() >= MIN_COUNT_TO_MERGE
            && bin_sizes(lives.iter().copied()).iter().any(|n| *n >= 2)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::manifest_list::write::sample_manifest;

    /// `n` data manifests of spec `spec` with `live` live entries each.
    fn manifests(n: u32, spec: i32, live: u32) -> Vec<ManifestFile> {
        (0..n)
            .map(|i| ManifestFile {
                content: ManifestContentType::Data,
                partition_spec_id: spec,
                added_files_count: Some(live),
                existing_files_count: Some(0),
                ..sample_manifest(i + 1, None)
            })
            .collect()
    }

    /// `merges` says whether a merge changes anything: only when a spec has enough small
    /// manifests and two of them share a bin.
    #[test]
    fn merges_says_whether_any_bin_holds_two_manifests() {
        let merges_all = |kept: &[ManifestFile]| merges(kept.iter().map(shape));
        assert_eq!(bin_sizes([10; 25].into_iter()), [10, 10, 5]);
        assert_eq!(bin_sizes([60; 3].into_iter()), [1, 1, 1]);
        assert_eq!(bin_sizes(std::iter::empty()), [0]);
        assert!(merges_all(&manifests(100, 0, 10)));
        assert!(!merges_all(&manifests(99, 0, 10)), "too few");
        assert!(!merges_all(&manifests(100, 0, 60)), "no two share a bin");
        assert!(!merges_all(&manifests(200, 0, 100)), "none small");
        let mut two_specs = manifests(60, 0, 10);
        two_specs.extend(manifests(60, 1, 10));
        assert!(!merges_all(&two_specs), "too few of each spec");
        two_specs.extend(manifests(40, 1, 10));
        assert!(merges_all(&two_specs));
        let deletes: Vec<_> = manifests(100, 0, 10)
            .into_iter()
            .map(|m| ManifestFile {
                content: ManifestContentType::Deletes,
                ..m
            })
            .collect();
        assert!(!merges_all(&deletes), "delete manifests are not merged");
    }
}
