//! Manifest lists: read, written, carried from a parent list, and the shape of a record.

pub(crate) mod carry;
pub(crate) mod read;
pub(crate) mod shape;
pub(crate) mod write;
