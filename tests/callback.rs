//! `xlake serve`: Hudi's write-commit HTTP callback mirrors the commit before it answers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

fn post(addr: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST /hudi HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
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

#[test]
fn a_hudi_callback_is_answered_after_its_commit_is_mirrored() {
    let (_dir, root) = common::hudi::extract("sample_table_cow_v9_txns_simple_nometa");
    let (last, action) = common::hudi::data_instants(&root).last().unwrap().clone();
    let mut server = Command::new(env!("CARGO_BIN_EXE_xlake"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_string();

    // As HoodieWriteCommitHttpCallback sends it (Jackson JSON of the callback message).
    let message = serde_json::json!({
        "commitTime": last,
        "tableName": "v9_txns_cow_simple_nometa",
        "basePath": format!("file:{}", root.display()),
        "hoodieWriteStat": [{"fileId": "x", "path": "region=us/x.parquet", "numWrites": 1}],
        "commitActionType": action,
        "extraMetadata": {"schema": "{}"}
    });
    let (status, body) = post(&addr, &message.to_string());
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"mirrored\":true"), "{body}");
    let (code, text) = common::xlake(&["check", root.to_str().unwrap()]);
    assert_eq!(code, 0, "{text}");

    let mut unknown = message.clone();
    unknown["commitTime"] = serde_json::json!("20990101000000000");
    let (status, body) = post(&addr, &unknown.to_string());
    assert_eq!(status, 500);
    assert!(
        body.contains("20990101000000000") && body.contains("no such completed commit"),
        "{body}"
    );

    let (status, _) = post(&addr, "{\"hello\":1}");
    assert_eq!(status, 400);
    server.kill().unwrap();
    let _ = server.wait();
}
