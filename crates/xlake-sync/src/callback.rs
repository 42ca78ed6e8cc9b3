//! In-commit mode over HTTP: an endpoint for Hudi's write-commit callback
//! (`hoodie.write.commit.callback.on=true`, `hoodie.write.commit.callback.http.url=...`).
//! Hudi POSTs a JSON `HoodieWriteCommitCallbackMessage` (`commitTime`, `tableName`,
//! `basePath`, …) after each commit; the endpoint mirrors that commit before it answers:
//! 200 once the commit has its snapshot, 4xx for a request it cannot use, 500 with the
//! reason when mirroring fails.

use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::{mirror_commit, SyncOptions};

/// The fields of Hudi's callback message the endpoint needs.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallbackMessage {
    commit_time: String,
    base_path: String,
    #[serde(default)]
    table_name: Option<String>,
}

/// Largest request accepted (a callback lists the commit's write stats).
const MAX_REQUEST: usize = 64 << 20;

/// Answer callbacks on `listener`, one connection at a time, forever.
pub async fn serve(listener: TcpListener, options: SyncOptions) -> std::io::Result<()> {
    loop {
        let (stream, peer) = listener.accept().await?;
        if let Err(e) = handle(stream, &options).await {
            tracing::warn!(%peer, error = %e, "callback connection failed");
        }
    }
}

async fn handle(mut stream: TcpStream, options: &SyncOptions) -> std::io::Result<()> {
    let (status, body) = match read_request(&mut stream).await? {
        Err(bad) => (400, bad),
        Ok(body) => match serde_json::from_slice::<CallbackMessage>(&body) {
            Err(e) => (400, format!("not a Hudi commit callback message: {e}")),
            Ok(msg) => {
                let table = msg.table_name.clone().unwrap_or_default();
                match mirror_commit(&msg.base_path, options, &msg.commit_time, |_| {}).await {
                    Ok(report) => {
                        tracing::info!(table = %table, commit = %msg.commit_time, written = report.written.len(), "callback mirrored");
                        (200, format!("{{\"mirrored\":true,\"commitTime\":\"{}\",\"snapshotsWritten\":{}}}", msg.commit_time, report.written.len()))
                    }
                    Err(e) => {
                        tracing::error!(table = %table, commit = %msg.commit_time, error = %e, "callback failed");
                        (500, e.to_string())
                    }
                }
            }
        },
    };
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        _ => "Internal Server Error",
    };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        if status == 200 { "application/json" } else { "text/plain; charset=utf-8" },
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

/// The body of a `POST` request, or why the request is refused.
async fn read_request(stream: &mut TcpStream) -> std::io::Result<Result<Vec<u8>, String>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 || buf.len() > MAX_REQUEST {
            return Ok(Err("incomplete HTTP request".into()));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    if !head.starts_with("POST ") {
        return Ok(Err("only POST is accepted".into()));
    }
    let length = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok());
    let Some(length) = length.filter(|&l| l <= MAX_REQUEST) else {
        return Ok(Err("a Content-Length (up to 64 MiB) is required".into()));
    };
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(Err("request body shorter than its Content-Length".into()));
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Ok(Ok(body))
}
