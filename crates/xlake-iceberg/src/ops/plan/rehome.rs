//! Vectors moved out of Puffin files holding a stale vector (v3). pyiceberg 0.12 applies
//! every blob of a Puffin file any live entry names, to whichever data file each blob is
//! about, whether or not that blob's own entry is live. While Delta's vectors only grow,
//! a stale blob deletes no row the file's live vector does not. A commit that drops or
//! shrinks the vector of a file it keeps (Delta's RESTORE re-adds the file with no
//! vector, or with fewer deleted rows) breaks that: the older blobs of the file would hide
//! rows there. So the live vectors of every Puffin file holding a blob of such a file are
//! copied, byte for byte, into a Puffin file of the commit's own and their entries moved
//! to it: no live entry names a file with a stale blob of it.

use std::collections::{HashMap, HashSet};

use iceberg::spec::{
    DataFile as IcebergDataFile, DataFileFormat, ManifestContentType, ManifestEntry, ManifestFile,
};

use super::deletes::{entry_key, Removals, Rewrite};
use crate::error::Result;
use crate::ops::table::IcebergTable;
use crate::spec::layout::METADATA_DIR;
use crate::spec::puffin::{check_framed, VectorBlob};

impl IcebergTable {
    /// Move the live vectors of Puffin files holding a blob of a file whose vector the
    /// commit drops or shrinks (see the module doc): their entries deleted, their copies
    /// added (`Rewrite::added`); kept delete manifests holding such entries become
    /// rewrites. `new_vectors`: the commit's own vectors.
    pub(super) async fn rehome_stale_vectors(
        &self,
        removals: &mut Removals,
        new_vectors: &[IcebergDataFile],
    ) -> Result<()> {
        let shrunk = shrunk(removals, new_vectors);
        if shrunk.is_empty() {
            return Ok(());
        }
        // Every delete manifest the snapshot keeps is a candidate rewrite.
        let mut candidates = Vec::new();
        for mf in std::mem::take(&mut removals.kept) {
            match mf.content {
                ManifestContentType::Deletes => candidates.push(self.candidate(mf).await?),
                ManifestContentType::Data => removals.kept.push(mf),
            }
        }
        let mut tainted = HashSet::new();
        // Only xlake's own Puffin files can hold a stale blob: an entry naming a file
        // elsewhere names a source's vector that is gone (see `gone_vector`).
        let metadata_dir = format!("{}/", self.store.absolute(METADATA_DIR));
        let puffins = live_puffins(removals.rewrites.iter().chain(&candidates));
        for puffin in puffins.into_iter().filter(|p| p.starts_with(&metadata_dir)) {
            let about = self.puffin_references(&puffin).await?;
            if about.iter().any(|r| shrunk.contains(r)) {
                tainted.insert(puffin);
            }
        }
        for r in removals.rewrites.iter_mut().chain(candidates.iter_mut()) {
            self.move_vectors(r, &tainted).await?;
        }
        for c in candidates {
            match c.hits.is_empty() {
                true => removals.kept.push(c.manifest),
                false => removals.rewrites.push(c),
            }
        }
        Ok(())
    }

    /// A kept delete manifest as a rewrite that deletes nothing yet.
    async fn candidate(&self, manifest: ManifestFile) -> Result<Rewrite> {
        let entries = self.read_manifest(&manifest).await?;
        Ok(Rewrite {
            manifest,
            entries,
            data: false,
            hits: HashSet::new(),
            added: Vec::new(),
        })
    }

    /// The live vectors of `r` that stay and whose Puffin file is `tainted`: deleted from
    /// it, their copies added to it.
    async fn move_vectors(&self, r: &mut Rewrite, tainted: &HashSet<String>) -> Result<()> {
        let moving: Vec<&ManifestEntry> = r
            .entries
            .iter()
            .filter(|e| e.is_alive() && tainted.contains(e.file_path()))
            .filter(|e| !r.hits.contains(&entry_key(e, false)))
            .collect();
        if moving.is_empty() {
            return Ok(());
        }
        let copies = self
            .copy_vectors(&moving, r.manifest.partition_spec_id)
            .await?;
        let keys: Vec<String> = moving.iter().map(|e| entry_key(e, false)).collect();
        r.hits.extend(keys);
        r.added.extend(copies);
        Ok(())
    }

    /// The data files a Puffin file's blobs are about, from its footer (uncompressed, as
    /// xlake writes it).
    async fn puffin_references(&self, path: &str) -> Result<Vec<String>> {
        let bad = |reason: &str| self.corrupt(path, format!("Puffin footer: {reason}"));
        let size = self
            .store
            .size(path)
            .await?
            .ok_or_else(|| bad("no such file"))?;
        let tail = self
            .store
            .get_range(
                path,
                size.checked_sub(12).ok_or_else(|| bad("too short"))?..size,
            )
            .await?;
        let len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
        if tail[4] & 1 != 0 || &tail[8..] != b"PFA1" {
            return Err(bad("compressed or not a Puffin file"));
        }
        let start = (size - 12)
            .checked_sub(len)
            .ok_or_else(|| bad("too short"))?;
        let payload = self.store.get_range(path, start..size - 12).await?;
        let footer: serde_json::Value =
            serde_json::from_slice(&payload).map_err(|e| bad(&e.to_string()))?;
        let blobs = footer["blobs"].as_array().ok_or_else(|| bad("no blobs"))?;
        Ok(blobs
            .iter()
            .filter_map(|b| b["properties"]["referenced-data-file"].as_str())
            .map(str::to_string)
            .collect())
    }

    /// The vectors of `entries` (of a manifest of spec `spec_id`), copied into one new
    /// Puffin file: their entries there.
    async fn copy_vectors(
        &self,
        entries: &[&ManifestEntry],
        spec_id: i32,
    ) -> Result<Vec<IcebergDataFile>> {
        let mut blobs = Vec::new();
        for e in entries {
            let f = e.data_file();
            let place = f.content_offset().zip(f.content_size_in_bytes());
            let (Some((offset, len)), Some(referenced)) = (place, f.referenced_data_file()) else {
                return Err(self.corrupt(f.file_path(), "a deletion vector entry without its blob"));
            };
            let start = u64::try_from(offset).map_err(|e| self.corrupt(f.file_path(), e))?;
            let end = start + u64::try_from(len).map_err(|e| self.corrupt(f.file_path(), e))?;
            let framed = self.store.get_range(f.file_path(), start..end).await?;
            check_framed(&framed).map_err(|reason| self.corrupt(f.file_path(), reason))?;
            let blob = VectorBlob {
                referenced_data_file: referenced,
                cardinality: f.record_count(),
                framed: framed.to_vec(),
            };
            blobs.push((blob, f.partition().clone()));
        }
        self.write_vectors(blobs, spec_id).await
    }
}

/// The files kept in place whose live vector the commit drops, or replaces by one of
/// fewer rows (so it is no superset of the old).
fn shrunk(removals: &Removals, new_vectors: &[IcebergDataFile]) -> HashSet<String> {
    let new: HashMap<String, u64> = new_vectors
        .iter()
        .filter_map(|d| Some((d.referenced_data_file()?, d.record_count())))
        .collect();
    let mut out = HashSet::new();
    for r in removals.rewrites.iter().filter(|r| !r.data) {
        for e in r.entries.iter().filter(|e| e.is_alive()) {
            let key = entry_key(e, false);
            let dropped = new.get(&key).is_none_or(|&n| n < e.record_count());
            if dropped && r.hits.contains(&key) && removals.in_place.contains(&key) {
                out.insert(key);
            }
        }
    }
    out
}

/// The Puffin files live vector entries of these delete manifests name (the entries the
/// commit deletes left out).
fn live_puffins<'a>(rewrites: impl Iterator<Item = &'a Rewrite>) -> HashSet<String> {
    let mut out = HashSet::new();
    for r in rewrites.filter(|r| !r.data) {
        let live = r.entries.iter().filter(|e| e.is_alive());
        for e in live.filter(|e| !r.hits.contains(&entry_key(e, false))) {
            if e.data_file().file_format() == DataFileFormat::Puffin {
                out.insert(e.file_path().to_string());
            }
        }
    }
    out
}
