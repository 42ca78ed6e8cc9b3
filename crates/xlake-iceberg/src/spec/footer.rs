//! Record counts and column statistics read from a Parquet footer: the one reading every
//! target shares lives in `xlake_target::footer`.

pub use xlake_target::footer::{footer_stats, read_footer, FooterStats};
