//! The progress bar of long backfills: one line on stderr, redrawn after each snapshot,
//! only when stderr is a terminal (logs and pipes get the plain per-snapshot lines).

use std::io::IsTerminal;

use crate::out::{self, outln};
use std::time::Instant;

/// Backfills shorter than this get no bar.
const MIN_COMMITS: usize = 20;

/// Progress of one sync.
pub struct Progress {
    enabled: bool,
    done: usize,
    started: Instant,
}

impl Progress {
    /// A bar if stderr is a terminal.
    pub fn new() -> Self {
        Self {
            enabled: std::io::stderr().is_terminal(),
            done: 0,
            started: Instant::now(),
        }
    }

    /// Print `line` on stdout for one more snapshot, `remaining` still to come, and
    /// redraw the bar under it.
    pub fn snapshot(&mut self, line: &str, remaining: usize) {
        self.done += 1;
        let total = self.done + remaining;
        let bar = self.enabled && total >= MIN_COMMITS;
        if bar {
            out::err(format_args!("\r\x1b[K"));
        }
        outln!("{line}");
        if bar && remaining > 0 {
            const WIDTH: usize = 30;
            let filled = self.done * WIDTH / total;
            let rate = self.done as f64 / self.started.elapsed().as_secs_f64().max(1e-3);
            out::flush();
            out::err(format_args!(
                "[{}{}] {}/{} commits, {:.0}/s, ~{:.0}s left",
                "#".repeat(filled),
                ".".repeat(WIDTH - filled),
                self.done,
                total,
                rate,
                remaining as f64 / rate
            ));
        }
    }
}
