//! Stopping the scheduled job between cycles.

/// SIGTERM and Ctrl-C, listened to from the job's start so that a signal arriving during
/// a cycle is not lost (nor kills the process mid-commit).
pub struct StopSignals {
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl StopSignals {
    pub fn install() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Self {
                terminate: signal(SignalKind::terminate())?,
                interrupt: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// Sleep for `interval`; true if a stop signal came (or had come) first.
    pub async fn within(&mut self, interval: std::time::Duration) -> bool {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = tokio::time::sleep(interval) => false,
                _ = self.terminate.recv() => true,
                _ = self.interrupt.recv() => true,
            }
        }
        #[cfg(not(unix))]
        {
            tokio::select! {
                _ = tokio::time::sleep(interval) => false,
                _ = tokio::signal::ctrl_c() => true,
            }
        }
    }
}
