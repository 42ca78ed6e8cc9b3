//! Where an incremental replay starts: decided by `incremental` (or by `partial` from a
//! timeline listed in part), kept by the source until its replay takes it.

use xlake_model::Schema;

use crate::file_group::BaseFile;

/// Where an incremental replay starts.
#[derive(Debug, Clone)]
pub(crate) struct Start {
    /// Index in the completed timeline of the first instant to replay.
    pub from: usize,
    /// The live base files after the newest mirrored instant.
    pub seed: Vec<BaseFile>,
    /// The schema as of the newest mirrored instant.
    pub schema: Schema,
}
