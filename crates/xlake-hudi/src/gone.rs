//! Instants the mirror's saved state names pending (or owed, [`crate::resume`]) that the
//! timeline no longer holds in any state ([`CommitListing::gone_unmirrored`]).
//!
//! A rollback deletes the files of the instant it undoes, wherever that instant stands on
//! the timeline; archival takes the write timeline's oldest instants, in requested order,
//! and never passes a pending one. An instant pending at a sync that completes late, and
//! that archival then takes before the next sync (it is the oldest write left), is gone
//! that way with its commit metadata: its rows were never mirrored and no snapshot can
//! record it (hostile review hr13). So a named instant off the timeline and older than
//! every write instant on it may have completed unmirrored; one with an older write
//! instant still there was rolled back. The engine sets apart those a listed rollback or
//! restore undid; one whose rollback was archived too cannot be told from a completed one.
//!
//! [`CommitListing::gone_unmirrored`]: xlake_model::CommitListing::gone_unmirrored

use std::collections::{BTreeMap, BTreeSet};

use crate::resume::Floor;
use crate::HudiSource;

impl HudiSource {
    /// Of the instants `floor` names pending that get a snapshot once completed (known
    /// only in a state that names the others, `quiet`: a clean is archived too) or owed,
    /// those not in `mirrored` that the timeline in use holds in no state.
    pub(crate) fn off_timeline<'a>(
        &self,
        floor: &'a Floor,
        mirrored: &BTreeSet<String>,
    ) -> Vec<&'a str> {
        let pending = floor.quiet.as_ref().and(floor.pending.as_ref()).into_iter();
        let quiet = floor.quiet.as_deref().unwrap_or_default();
        let writes = pending
            .flatten()
            .filter(|p| quiet.binary_search(p).is_err());
        let named = writes.chain(&floor.owed).map(String::as_str);
        let mut off: BTreeSet<&str> = named.filter(|id| !mirrored.contains(*id)).collect();
        // Nearly always nothing is named: the timeline is not walked then.
        if !off.is_empty() {
            let timeline = self.timeline();
            for i in timeline.completed.iter().chain(&timeline.pending) {
                off.remove(i.requested());
            }
        }
        off.into_iter().collect()
    }

    /// Of [`Self::off_timeline`], those older than every write instant on the timeline in
    /// use (archived), each with why it may have completed unmirrored.
    pub(crate) fn gone_unmirrored(
        &self,
        floor: &Floor,
        mirrored: &BTreeSet<String>,
    ) -> BTreeMap<String, String> {
        let oldest_write = self.timeline().oldest_write();
        let gone = self.off_timeline(floor, mirrored).into_iter();
        gone.filter(|id| oldest_write.is_none_or(|w| *id < w))
            .map(|id| {
                let why = format!(
                    "Hudi instant {id} was pending at the last sync and has been archived since ({} holds no instant that old): if it completed, its rows are not in the mirror and its commit metadata is gone",
                    self.store().absolute(&self.config().timeline_dir)
                );
                (id.to_string(), why)
            })
            .collect()
    }
}
