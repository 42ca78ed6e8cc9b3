//! Manifest lists: read ([`read`], iceberg-rust's parse as the fallback), written
//! ([`write`], iceberg-rust's writer as the fallback), carried from the parent's list
//! ([`carry`]), and the shape of each record of a list this crate wrote ([`shape`]).

pub(crate) mod carry;
// `pub` constants, re-exported by `ops::merge` (public under the feature `testing`).
#[allow(unreachable_pub)]
pub(crate) mod merging;
pub(crate) mod read;
pub(crate) mod shape;
pub(crate) mod write;

use std::collections::HashSet;

use bytes::Bytes;
use iceberg::spec::{ManifestContentType, ManifestFile, UNASSIGNED_SEQUENCE_NUMBER};
use xlake_storage::TableStore;

use carry::ParentList;
use write::ListOf;

use crate::spec::error::CodecError;

/// A manifest list written by [`write_manifest_list`].
#[derive(Debug)]
pub(crate) struct WrittenList {
    /// The manifests as the list holds them; `None` when the parent's records were
    /// carried whole, unread.
    pub(crate) manifests: Option<Vec<ManifestFile>>,
    /// The rows given ids (v3 `added-rows`).
    pub(crate) added_rows: u64,
    /// The list's bytes.
    pub(crate) bytes: Bytes,
}

/// The manifests of a manifest list (see [`crate::spec::manifest_list::read`]).
pub(crate) async fn read_manifest_list(
    store: &TableStore,
    location: &str,
) -> Result<Vec<ManifestFile>, CodecError> {
    read_list_file(store, location).await?.manifests()
}

/// A manifest list as read or written: its location, its bytes (which a list keeping all
/// its manifests may carry, see [`crate::spec::manifest_list::carry`]) and its manifests, once read from
/// them or when written (not when it carried its parent's records unread).
#[derive(Debug, Clone)]
pub(crate) struct ListFile {
    pub(crate) location: String,
    pub(crate) decoded: Option<Vec<ManifestFile>>,
    pub(crate) bytes: Bytes,
}

impl ListFile {
    /// Its manifests, read from its bytes unless they are already known.
    pub(crate) fn manifests(self) -> Result<Vec<ManifestFile>, CodecError> {
        match self.decoded {
            Some(manifests) => Ok(manifests),
            None => read::manifests(&self.bytes, &self.location),
        }
    }
}

/// The manifest list at `location`, its records not read yet (an append may carry them
/// unread, see [`crate::spec::manifest_list::carry::whole`]).
pub(crate) async fn read_list_file(
    store: &TableStore,
    location: &str,
) -> Result<ListFile, CodecError> {
    let bytes = store
        .get_written_once(location)
        .await
        .map_err(CodecError::library)?;
    Ok(ListFile {
        location: location.to_string(),
        decoded: None,
        bytes,
    })
}

/// Write the manifest list of a snapshot at `location`; with `first_row_id` (a v3 table's
/// `next-row-id`), a v3 list that gives each data manifest without one its row id range:
/// iceberg-rust's `ManifestListWriter::v3` gives a new manifest its added and existing
/// rows. A manifest of `carried` (every live file's id written, see [`carry_row_ids`])
/// gets the next id as its `first_row_id` and no rows: the spec makes counting existing
/// rows optional when their files have ids, and counting them would give rows that have
/// ids new ones. Returns the manifests as the list holds them: the new ones with the
/// snapshot's sequence number (and v3 first row id), as the writer assigns them (so the
/// next commit of a batch need not read the list back), the rows given ids (v3
/// `added-rows`) and the list's bytes. With `parent_list`, when the last of `manifests`
/// are the parent's, the parent's records may be carried as written
/// ([`crate::spec::manifest_list::carry`]); when it is carried whole, `manifests` are only the new ones,
/// the parent's records follow them unread, and no manifests are returned.
pub(crate) async fn write_manifest_list(
    store: &TableStore,
    location: &str,
    (snapshot_id, parent): (i64, Option<i64>),
    (sequence_number, first_row_id): (i64, Option<u64>),
    mut manifests: Vec<ManifestFile>,
    carried: &HashSet<String>,
    parent_list: Option<&ParentList>,
) -> Result<WrittenList, CodecError> {
    let of = ListOf {
        snapshot_id,
        parent,
        sequence_number,
        first_row_id,
    };
    let counted = assign(of, &mut manifests, carried)?;
    let whole = parent_list.filter(|p| p.whole);
    let bytes = match whole {
        // `carry::whole` checked what `encode` checks.
        Some(parent) => carry::encode(of, &manifests, parent)
            .ok_or("the parent's manifest list cannot be carried after all")??
            .into(),
        None => encode_list(of, &manifests, &counted, parent_list).await?,
    };
    store
        .put(location, bytes.clone())
        .await
        .map_err(CodecError::library)?;
    // Never negative: row ids only grow from `first_row_id` (checked in `assign`).
    let added_rows = counted.next_row_id.unwrap_or(0) - first_row_id.unwrap_or(0);
    Ok(WrittenList {
        manifests: whole.is_none().then_some(manifests),
        added_rows,
        bytes,
    })
}

/// The list of `manifests`: the parent's records carried when they are its tail, else
/// encoded here, else by iceberg-rust.
async fn encode_list(
    of: ListOf,
    manifests: &[ManifestFile],
    counted: &Counted,
    parent_list: Option<&ParentList>,
) -> Result<Bytes, CodecError> {
    let tail = parent_list.and_then(|p| Some((p, carry::tail_of(manifests, p)?)));
    let carried_list = match tail {
        Some((parent, new)) => carry::encode(of, &manifests[..new], parent),
        // Some of the parent's records kept (a removal's list): copied, not encoded again.
        None => parent_list.and_then(|p| carry::spliced(of, manifests, p)),
    };
    let encoded = match carried_list {
        Some(encoded) => Some(encoded),
        None => write::encode(of, manifests),
    };
    match encoded {
        Some(bytes) => Ok(Bytes::from(bytes?)),
        None => iceberg_list(of, manifests, counted).await,
    }
}

/// The manifests a list assigned row ids to (by index), and the next row id after them.
struct Counted {
    indices: Vec<usize>,
    next_row_id: Option<u64>,
}

/// What iceberg-rust's list writer assigns, assigned in place: the snapshot's sequence
/// number to its own new manifests, and (v3) row id ranges in list order, a carried
/// manifest getting the next id and no rows.
fn assign(
    of: ListOf,
    manifests: &mut [ManifestFile],
    carried: &HashSet<String>,
) -> Result<Counted, CodecError> {
    let mut counted = Counted {
        indices: Vec::new(),
        next_row_id: of.first_row_id,
    };
    for (i, m) in manifests.iter_mut().enumerate() {
        // A v3 list gives a delete manifest no row ids (iceberg-rust's writer drops any).
        if of.first_row_id.is_some() && m.content == ManifestContentType::Deletes {
            m.first_row_id = None;
        }
        if let (Some(next), ManifestContentType::Data, None) =
            (counted.next_row_id, m.content, m.first_row_id)
        {
            m.first_row_id = Some(next);
            if !carried.contains(&m.manifest_path) {
                // Row ids are Iceberg longs: signed.
                let rows = m.added_rows_count.unwrap_or(0);
                let next = rows
                    .checked_add(m.existing_rows_count.unwrap_or(0))
                    .and_then(|rows| next.checked_add(rows))
                    .filter(|n| i64::try_from(*n).is_ok())
                    .ok_or_else(|| format!("{}: row ids overflow", m.manifest_path))?;
                counted.next_row_id = Some(next);
                counted.indices.push(i);
            }
        }
        for n in [&mut m.sequence_number, &mut m.min_sequence_number] {
            if *n == UNASSIGNED_SEQUENCE_NUMBER {
                if m.added_snapshot_id != of.snapshot_id {
                    return Err(format!(
                        "{}: an unassigned sequence number in a manifest of snapshot {}",
                        m.manifest_path, m.added_snapshot_id
                    )
                    .into());
                }
                *n = of.sequence_number;
            }
        }
    }
    Ok(counted)
}

/// The list written by iceberg-rust's writer, which assigns the row ids of `counted`
/// itself (and must arrive at the same next row id).
async fn iceberg_list(
    of: ListOf,
    manifests: &[ManifestFile],
    counted: &Counted,
) -> Result<Bytes, CodecError> {
    let mut given = manifests.to_vec();
    for &i in &counted.indices {
        given[i].first_row_id = None;
    }
    let (bytes, assigned) = write::iceberg_write(of, given).await?;
    if assigned != counted.next_row_id {
        return Err(format!(
            "row ids assigned up to {assigned:?}, expected {:?}",
            counted.next_row_id
        )
        .into());
    }
    Ok(bytes)
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A list record of `content` with no files, `first_row_id` as given (manifest tests
    /// use it too).
    pub(crate) fn listed(first_row_id: Option<u64>, content: ManifestContentType) -> ManifestFile {
        ManifestFile {
            manifest_path: "m.avro".into(),
            manifest_length: 1,
            partition_spec_id: 0,
            content,
            sequence_number: 1,
            min_sequence_number: 1,
            added_snapshot_id: 1,
            added_files_count: Some(0),
            existing_files_count: Some(0),
            deleted_files_count: Some(0),
            added_rows_count: Some(0),
            existing_rows_count: Some(0),
            deleted_rows_count: Some(0),
            partitions: None,
            key_metadata: None,
            first_row_id,
        }
    }

    /// Every field of a data file survives setting its first row id.
    /// A carried manifest gets the next id and no rows; new manifests their added and
    /// existing rows, as the spec's example.
    #[tokio::test]
    async fn a_carried_manifest_gets_no_new_row_ids() {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap()).unwrap();
        let manifest = |path: &str, added: u64, existing: u64| ManifestFile {
            manifest_path: store.absolute(path),
            added_rows_count: Some(added),
            existing_rows_count: Some(existing),
            ..listed(None, ManifestContentType::Data)
        };
        let kept = ManifestFile {
            first_row_id: Some(925),
            ..manifest("kept.avro", 75, 0)
        };
        let manifests = [
            kept,
            manifest("added1.avro", 100, 25),
            manifest("carried.avro", 0, 100),
            manifest("added3.avro", 125, 25),
        ];
        let carried = HashSet::from([store.absolute("carried.avro")]);
        let list = store.absolute("metadata/list.avro");
        let written = write_manifest_list(
            &store,
            &list,
            (1, None),
            (1, Some(1000)),
            manifests.to_vec(),
            &carried,
            None,
        )
        .await
        .unwrap();
        let listed = written.manifests.unwrap();
        let ids: Vec<_> = listed.iter().map(|m| m.first_row_id).collect();
        assert_eq!(ids, [Some(925), Some(1000), Some(1125), Some(1125)]);
        assert_eq!(written.added_rows, 275);
        let written = read_manifest_list(&store, &list).await.unwrap();
        let ids: Vec<_> = written.iter().map(|m| m.first_row_id).collect();
        assert_eq!(ids, [Some(925), Some(1000), Some(1125), Some(1125)]);
        // iceberg-rust's writer, given the same assignments to redo, writes the same list.
        let of = ListOf {
            snapshot_id: 1,
            parent: None,
            sequence_number: 1,
            first_row_id: Some(1000),
        };
        let mut again = manifests.clone();
        let counted = assign(of, &mut again, &carried).unwrap();
        assert_eq!(again.to_vec(), listed);
        let bytes = iceberg_list(of, &again, &counted).await.unwrap();
        assert_eq!(
            crate::spec::manifest_list::read::manifests(&bytes, &list).unwrap(),
            written
        );
        // Row ids that would overflow are refused, naming the manifest.
        let mut huge = manifests.to_vec();
        huge[1].added_rows_count = Some(u64::MAX - 10);
        let err = assign(of, &mut huge, &carried).err().unwrap().to_string();
        assert!(err.ends_with("added1.avro: row ids overflow"), "{err}");
        let near = ListOf {
            first_row_id: Some(i64::MAX as u64 - 5),
            ..of
        };
        let mut ids = manifests.to_vec();
        ids[0].first_row_id = None;
        let err = assign(near, &mut ids, &carried).err().unwrap().to_string();
        assert!(err.ends_with("kept.avro: row ids overflow"), "{err}");
        // A delete manifest comes back without a row id, as the list holds it.
        let mut deletes = [ManifestFile {
            content: ManifestContentType::Deletes,
            first_row_id: Some(5),
            ..manifest("deletes.avro", 0, 0)
        }];
        assign(of, &mut deletes, &carried).unwrap();
        assert_eq!(deletes[0].first_row_id, None);
    }
}
