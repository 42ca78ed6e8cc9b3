//! The operations layer: what a commit, an expiry, a relocation or a cleanup does, on
//! top of the codecs of [`crate::spec`].

pub(crate) mod commit;
pub mod expire;
pub(crate) mod live_paths;
// Public only for the integration tests (feature `testing`).
#[cfg(feature = "testing")]
pub mod merge;
#[cfg(not(feature = "testing"))]
#[allow(unreachable_pub)]
pub(crate) mod merge;
pub mod orphans;
pub mod path_index;
pub(crate) mod plan;
pub(crate) mod publish;
pub mod relocation;
pub(crate) mod settled;
pub mod table;
pub mod v3;
