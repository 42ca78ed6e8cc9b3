//! The spec layer: codecs for the files of the Iceberg specification. Nothing here
//! imports the operations above it ([`crate::ops`]).

pub(crate) mod body;
pub(crate) mod compact;
pub(crate) mod container;
pub(crate) mod decode;
pub mod deletes;
pub mod encode;
pub(crate) mod error;
pub mod fidelity;
pub mod footer;
pub mod history;
pub mod layout;
pub(crate) mod manifest;
pub(crate) mod manifest_list;
pub mod partition;
// Public only for the integration tests (feature `testing`).
#[cfg(feature = "testing")]
pub mod puffin;
#[cfg(not(feature = "testing"))]
#[allow(unreachable_pub)]
pub(crate) mod puffin;
pub mod schema;
pub mod snapshot_index;
pub mod summary;
pub mod value;
pub(crate) mod written;
