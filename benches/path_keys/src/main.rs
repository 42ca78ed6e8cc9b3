//! The live-path structures of a backfill at scale, alone: `path_keys KIND N` inserts the
//! keys of N paths named as a backfill's (1,000 a version, 100 partitions) one by one,
//! looking each up first as the Delta replay does, then looks up N more; prints the time.
//! Run under `/usr/bin/time -v` for the peak. KIND: hashset (the Delta live set before),
//! keyset (`PathKeySet`), cache128 / cache64 (the removal cache's sorted keys per
//! 1,000-path manifest, before and after).
use std::collections::HashSet;
use std::time::Instant;

use xlake_model::{path_key, short_path_key, PathKeySet};

fn path(i: u64) -> String {
    format!(
        "day=2024-01-{:02}/part-{:05}-{i:016x}-c000.snappy.parquet",
        i % 100,
        i / 1000
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let kind = args.get(1).map(String::as_str).unwrap_or("keyset");
    let n: u64 = args
        .get(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let start = Instant::now();
    let mut hits = 0u64;
    match kind {
        "hashset" => {
            let mut live = HashSet::new();
            for i in 0..n {
                let k = path_key(&path(i));
                hits += u64::from(live.contains(&k));
                live.insert(k);
            }
            hits += (n..2 * n)
                .filter(|i| live.contains(&path_key(&path(*i))))
                .count() as u64;
            println!("len {}", live.len());
        }
        "keyset" => {
            let mut live = PathKeySet::new();
            for i in 0..n {
                let k = path_key(&path(i));
                hits += u64::from(live.contains(&k));
                live.insert(k);
            }
            hits += (n..2 * n)
                .filter(|i| live.contains(&path_key(&path(*i))))
                .count() as u64;
            println!("len {}", live.len());
        }
        "cache128" => {
            let mut cache: Vec<Box<[u128]>> = Vec::new();
            for m in 0..n / 1000 {
                let mut keys: Vec<u128> = (m * 1000..(m + 1) * 1000)
                    .map(|i| path_key(&path(i)))
                    .collect();
                keys.sort_unstable();
                cache.push(keys.into_boxed_slice());
            }
            println!("manifests {}", cache.len());
        }
        "cache64" => {
            let mut cache: Vec<Box<[u64]>> = Vec::new();
            for m in 0..n / 1000 {
                let mut keys: Vec<u64> = (m * 1000..(m + 1) * 1000)
                    .map(|i| short_path_key(&path(i)))
                    .collect();
                keys.sort_unstable();
                cache.push(keys.into_boxed_slice());
            }
            println!("manifests {}", cache.len());
        }
        other => panic!("unknown kind {other}"),
    }
    println!(
        "{kind} n={n} hits={hits} {:.2} s",
        start.elapsed().as_secs_f64()
    );
}
