//! A running `xlake serve` for the tests that answer Hudi's callback through it.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

/// A running `xlake serve` on a free loopback port, killed on drop.
pub struct Server {
    /// The process (for signals and its exit status).
    pub child: Child,
    /// `host:port` it listens on.
    pub addr: String,
}

impl Server {
    /// `xlake serve --listen 127.0.0.1:0 <args>`, with `XLAKE_CALLBACK_KEY` set to `key`
    /// (or unset), once it says where it listens.
    pub fn start<S: AsRef<OsStr>>(args: &[S], key: Option<&str>) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_xlake"));
        cmd.args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env_remove("XLAKE_CALLBACK_KEY")
            .stdout(Stdio::piped());
        if let Some(k) = key {
            cmd.env("XLAKE_CALLBACK_KEY", k);
        }
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("no address: {line:?}"))
            .to_string();
        Self { child, addr }
    }

    /// A callback (`POST /hudi`) with `key` in `HUDI-CALLBACK-KEY`: status and body.
    pub fn post(&self, key: Option<&str>, body: &str) -> (u16, String) {
        request(&self.addr, "POST", "/hudi", key, body)
    }

    /// `GET path`: status and body.
    pub fn get(&self, path: &str) -> (u16, String) {
        request(&self.addr, "GET", path, None, "")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request on its own connection (`Connection: close`): status and body.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: &str,
) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    let key = key.map_or(String::new(), |k| format!("HUDI-CALLBACK-KEY: {k}\r\n"));
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{key}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}
