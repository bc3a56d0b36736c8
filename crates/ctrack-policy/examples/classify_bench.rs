//! Rough figures for the classifier on generated rule sets: compile time,
//! one insert and one removal, lookups per second on one core, memory.
//!
//! `cargo run --release -p ctrack-policy --example classify_bench [N...]`
//! (default 100 1000 10000 100000; `--cli` for the CLI's rule set only,
//! `--lookups=N` for N lookups per size, 20 million by default). The reference figures come from
//! `ctrack bench policy`; this is for working on the classifier. Each size
//! runs twice: on this example's own rule set (seed 42, most keys hit a
//! broad rule early), and on the one `ctrack bench policy classify` uses
//! (rules seed 7, keys seed 11), whose lookups probe more tuples.

use std::hint::black_box;
use std::time::Instant;

use ctrack_policy::classify::{Classifier, r#gen};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cli_only = args.iter().any(|a| a == "--cli");
    let lookups: usize = args
        .iter()
        .find_map(|a| a.strip_prefix("--lookups=")?.parse().ok())
        .unwrap_or(20_000_000);
    let sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() {
        vec![100, 1_000, 10_000, 100_000]
    } else {
        sizes
    };
    for (n, (rule_seed, key_seed)) in sizes
        .into_iter()
        .flat_map(|n| [(n, (42, 7)), (n, (7, 11))])
        .filter(|(_, seeds)| !cli_only || seeds.0 == 7)
    {
        let rules = r#gen::rules(n, rule_seed);
        let t = Instant::now();
        let mut c = Classifier::build(rules.iter().map(|(i, r, e)| (*i, *r, e))).expect("compiles");
        let build = t.elapsed();
        // One insert and one removal, averaged over a few rules.
        let extra = r#gen::rules(n + 200, 43);
        let t = Instant::now();
        for (i, r, e) in &extra[n..] {
            c.insert(*i, *r, e).expect("compiles");
        }
        let insert = t.elapsed() / 200;
        let t = Instant::now();
        for (i, _, _) in &extra[n..] {
            c.remove(*i);
        }
        let remove = t.elapsed() / 200;
        let keys = r#gen::keys(&rules, 1 << 16, key_seed);
        let hits = keys.iter().filter(|k| c.classify(k).is_some()).count();
        let rounds = (lookups / keys.len()).max(1);
        let t = Instant::now();
        let mut sum = 0u64;
        for _ in 0..rounds {
            for k in &keys {
                sum = sum.wrapping_add(c.classify(black_box(k)).map_or(0, |m| u64::from(m.0)));
            }
        }
        let rate = (rounds * keys.len()) as f64 / t.elapsed().as_secs_f64();
        black_box(sum);
        let s = c.stats();
        println!(
            "{n:>6} rules (seed {rule_seed:>2}): build {build:>9.2?}  insert {insert:>8.2?}  remove {remove:>8.2?}  \
             {:>6.2} M lookups/s  hits {:.0}%  tuples {}  entries {}  buckets {}  longest {}  memory {:.1} MiB",
            rate / 1e6,
            100.0 * hits as f64 / keys.len() as f64,
            s.tuples,
            s.entries,
            s.buckets,
            s.longest_bucket,
            s.memory as f64 / (1 << 20) as f64
        );
    }
}
