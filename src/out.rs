//! Everything the commands print goes through here. When the reader of standard output
//! goes away (`xlake snapshots t | head -1`), the process ends at once, quietly, with exit
//! code 141 (128 + SIGPIPE: what a shell reports for a program a closed pipe stops), never
//! with a panic and never with 0, so `set -o pipefail` scripts do not take a cut-short run
//! for a finished one. Lines are printed only after the work they report is committed, so
//! stopping there leaves every table consistent.

use std::io::Write;

/// The exit code when standard output is closed.
pub const BROKEN_PIPE: i32 = 141;

/// Print one line on standard output (see the module docs for a closed pipe).
pub fn line(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.write_all(b"\n")) {
        gone(&e);
    }
}

/// Flush standard output (before drawing on stderr under the last line).
pub fn flush() {
    if let Err(e) = std::io::stdout().flush() {
        gone(&e);
    }
}

/// Print on standard error, ignoring a closed stderr (there is nowhere left to say it).
pub fn err(args: std::fmt::Arguments<'_>) {
    let _ = std::io::stderr().write_fmt(args);
}

fn gone(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(BROKEN_PIPE);
    }
    err(format_args!(
        "xlake: cannot write to standard output: {e}\n"
    ));
    std::process::exit(1);
}

/// `println!` through [`line`].
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::out::line(format_args!($($arg)*))
    };
}

/// `eprintln!` through [`err`].
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::out::err(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {errln, outln};
