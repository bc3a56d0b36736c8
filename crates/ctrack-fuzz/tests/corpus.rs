//! Replays the corpus kept in the repository, `fuzz/corpus/<target>/`,
//! through every target's body on every `cargo test`: each target must
//! have a corpus, no input may panic, and the corpus stays small.

use std::panic::{AssertUnwindSafe, catch_unwind};

use ctrack_fuzz::targets::TARGETS;
use ctrack_fuzz::{Probe, seeds};

/// Most bytes the whole corpus may take in the repository.
const MAX_CORPUS_BYTES: u64 = 2 * 1024 * 1024;

#[test]
fn corpus_replays_without_a_panic() {
    let root = seeds::corpus_dir();
    let mut total = 0u64;
    let mut failures = Vec::new();
    for t in &TARGETS {
        let dir = root.join(t.name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: no corpus folder: {e}", dir.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{}: empty corpus", dir.display());
        let mut probe = Probe::counting();
        for path in &files {
            let input = std::fs::read(path).expect("a corpus file reads");
            total += input.len() as u64;
            let r = catch_unwind(AssertUnwindSafe(|| (t.run)(&input, &mut probe)));
            if r.is_err() {
                failures.push(path.display().to_string());
            }
        }
        assert!(probe.units() > 0, "{}: the corpus ran nothing", t.name);
        println!(
            "{}: {} inputs, {} {}",
            t.name,
            files.len(),
            probe.units(),
            t.unit
        );
    }
    assert!(failures.is_empty(), "inputs that panic: {failures:#?}");
    assert!(
        total <= MAX_CORPUS_BYTES,
        "the corpus takes {total} bytes (at most {MAX_CORPUS_BYTES}): minimise it"
    );
}
