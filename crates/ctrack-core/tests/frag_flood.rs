//! A fragment flood against the reassembler, smaller than `ctrack bench
//! flood frag` (the same traffic and driver, included from the bench):
//! random hostile fragments of both families (never completing, repeats,
//! overlaps, tiny, past 65535 bytes, odd lengths) among legitimate
//! fragmented datagrams of other flows. Reassembly memory must stay within
//! its bounds after every batch, at least 99% of the legitimate datagrams
//! must complete intact, and once virtual time passes the timeout nothing
//! may be held.

#[allow(dead_code)]
#[path = "../../ctrack/src/bench/flood/fragmix.rs"]
mod fragmix;

use ctrack_core::FragConfig;
use fragmix::{Mix, run};

fn mix(fragments: u64, seed: u64, config: FragConfig) -> Mix {
    Mix {
        fragments,
        legit_every: 50,
        gap: 4,
        pps: 1_000_000,
        seed,
        batch: 1024,
        config,
    }
}

fn check(m: &Mix) -> fragmix::Report {
    let r = run(m);
    let failures = r.failures(&m.config, 0.99);
    assert!(failures.is_empty(), "{failures:?}\n{r:?}");
    assert_eq!(r.hostile, m.fragments);
    assert!(r.legit_sent >= m.fragments / m.legit_every - 1);
    // Every kind of hostile fragment was sent, and the flood met the
    // limits (the bounds were tested, not idle).
    assert!(r.kinds.iter().all(|&k| k > 0), "{:?}", r.kinds);
    assert_eq!(
        r.peak_held, m.config.max_frags,
        "the flood fills the reassembler"
    );
    assert!(r.at_end.evicted > 0 && r.at_end.overlap > 0 && r.at_end.too_big > 0);
    assert!(r.at_end.duplicate > 0 && r.at_end.too_small > 0);
    // What was held when the flood stopped timed out.
    assert!(r.final_stats.expired > 0);
    assert_eq!(r.after_timeout, (0, 0, 0, r.after_timeout.3));
    r
}

#[test]
fn flood_stays_bounded_and_legit_datagrams_complete() {
    let r = check(&mix(200_000, 1, FragConfig::default()));
    assert!(r.legit_completed >= 3_900, "{}", r.legit_completed);
}

#[test]
fn small_limits_and_the_largest_one_hold_too() {
    for max_frags in [64, 5000] {
        let config = FragConfig {
            max_frags,
            max_bytes: 4 << 20,
            ..FragConfig::default()
        };
        let m = Mix {
            legit_every: 14,
            gap: 2,
            ..mix(60_000, u64::from(max_frags as u32), config)
        };
        let r = run(&m);
        let failures = r.failures(&m.config, 0.99);
        assert!(
            failures.is_empty(),
            "max_frags {max_frags}: {failures:?}\n{r:?}"
        );
        assert!(r.peak_bytes <= 4 << 20);
    }
}
