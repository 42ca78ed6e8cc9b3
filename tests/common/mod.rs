//! Helpers shared by the end-to-end tests.
#![allow(dead_code, clippy::unwrap_used)]

pub mod delta;
pub mod foundation;
pub mod hudi;

/// Run the `xlake` binary; its exit code and stdout followed by stderr.
pub fn xlake(args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_xlake"))
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}
