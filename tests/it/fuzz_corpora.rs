//! The fuzz corpora replayed as regression tests: every committed input of every cargo-fuzz
//! target (`fuzz/corpus/<target>/`) and every input that once crashed one
//! (`fuzz/regressions/<target>/`) goes through the same harness, which must not panic.

#[path = "../../fuzz/harness.rs"]
mod harness;

use std::path::Path;

fn inputs(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries.map(|e| e.unwrap().path()).collect();
    files.sort();
    files
}

#[test]
fn every_corpus_and_regression_input_is_answered_without_a_panic() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    for (name, harness) in harness::TARGETS {
        let corpus = inputs(&fuzz.join("corpus").join(name));
        assert!(!corpus.is_empty(), "no corpus for {name}");
        for file in corpus
            .iter()
            .chain(&inputs(&fuzz.join("regressions").join(name)))
        {
            // A fuzzer running meanwhile may have replaced it with a smaller input.
            let Ok(data) = std::fs::read(file) else {
                continue;
            };
            let outcome = std::panic::catch_unwind(|| harness(&data));
            assert!(outcome.is_ok(), "{name} panicked on {}", file.display());
        }
    }
}
