//! Bounded runs of the fuzz bodies, for CI: seeded random inputs and
//! mutations of the packets and files in `examples/`, and a short run of
//! the campaign engine on every target.
//!
//! `CTRACK_FUZZ_ITERS` scales every run (default 1; e.g. 100 for a long run
//! by hand); `CTRACK_FUZZ_SEED` changes the seed. For coverage-guided
//! fuzzing see docs/fuzzing.md.

use std::time::{Duration, Instant};

use ctrack_fuzz::campaign::{Fuzzer, Outcome};
use ctrack_fuzz::targets::TARGETS;
use ctrack_fuzz::{Probe, Rng, seeds};

fn iters() -> usize {
    std::env::var("CTRACK_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

fn rng(salt: u64) -> Rng {
    let seed = std::env::var("CTRACK_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    Rng::new(seed ^ salt)
}

fn examples() -> Vec<(String, Vec<u8>)> {
    seeds::capture_files()
}

/// Every packet of every bundled capture.
fn seed_packets() -> Vec<Vec<u8>> {
    let out = seeds::packets();
    assert!(out.len() > 300, "the bundled captures are the seed corpus");
    out
}

fn p() -> Probe {
    Probe::counting()
}

#[test]
fn parse_seeds_and_mutations() {
    let seeds = seed_packets();
    let mut r = rng(1);
    for s in &seeds {
        ctrack_fuzz::parse(s, &mut p());
    }
    for _ in 0..iters() * 60_000 {
        let s = &seeds[r.below(seeds.len())];
        let m = r.mutate(s);
        ctrack_fuzz::parse(&m, &mut p());
    }
    for _ in 0..iters() * 5_000 {
        let len = r.below(200);
        ctrack_fuzz::parse(&r.bytes(len), &mut p());
    }
}

#[test]
fn tracker_operation_sequences() {
    let mut r = rng(2);
    for _ in 0..iters() * 1_500 {
        let len = r.below(6_000);
        ctrack_fuzz::tracker(&r.bytes(len), &mut p());
    }
}

#[test]
fn tracker_on_mutated_real_traffic() {
    let seeds = seed_packets();
    let mut r = rng(3);
    // The real traffic in order, then mutated copies in random order.
    let mut probe = p();
    ctrack_fuzz::tracker_frames(&seeds, &mut probe);
    assert_eq!(probe.units(), seeds.len() as u64, "every frame counted");
    for _ in 0..iters() * 60 {
        let frames: Vec<Vec<u8>> = (0..128)
            .map(|_| {
                let s = &seeds[r.below(seeds.len())];
                if r.below(3) == 0 {
                    s.clone()
                } else {
                    r.mutate(s)
                }
            })
            .collect();
        ctrack_fuzz::tracker_frames(&frames, &mut p());
    }
}

#[test]
fn capture_files_mutated() {
    let files = examples();
    let mut r = rng(4);
    for (_, bytes) in &files {
        ctrack_fuzz::capture(bytes, &mut p());
        for _ in 0..iters() * 200 {
            ctrack_fuzz::capture(&r.mutate(bytes), &mut p());
        }
        for _ in 0..iters() * 50 {
            let cut = r.below(bytes.len());
            ctrack_fuzz::capture(&bytes[..cut], &mut p());
        }
    }
    for _ in 0..iters() * 2_000 {
        let len = r.below(512);
        let mut b = r.bytes(len);
        // Give some a valid magic so that record parsing is reached.
        if r.below(2) == 0 && b.len() >= 4 {
            b[..4].copy_from_slice(&[0xd4, 0xc3, 0xb2, 0xa1]);
        }
        ctrack_fuzz::capture(&b, &mut p());
    }
}

#[test]
fn table_against_a_map() {
    let mut r = rng(5);
    for _ in 0..iters() * 3_000 {
        let len = r.below(3_000);
        ctrack_fuzz::table(&r.bytes(len), &mut p());
    }
}

#[test]
fn ftp_reader_on_random_and_command_like_text() {
    let mut r = rng(6);
    let words = ctrack_fuzz::targets::FTP_WORDS;
    for _ in 0..iters() * 3_000 {
        let n = r.below(16);
        let mut data = r.bytes(n);
        for _ in 0..r.below(12) {
            let w = words[r.below(words.len())];
            if r.below(3) == 0 {
                data.extend_from_slice(&r.mutate(w));
            } else {
                data.extend_from_slice(w);
            }
        }
        ctrack_fuzz::ftp(&data, &mut p());
    }
}

#[test]
fn reassembler_on_cut_repeated_and_overlapping_fragments() {
    let mut r = rng(7);
    for _ in 0..iters() * 2_000 {
        let len = r.below(1_500);
        ctrack_fuzz::reassembly(&r.bytes(len), &mut p());
    }
}

/// `frames` with about one in four mutated.
fn one_in_four_mutated(r: &mut Rng, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    frames
        .iter()
        .map(|f| {
            if r.below(4) == 0 {
                r.mutate(f)
            } else {
                f.clone()
            }
        })
        .collect()
}

#[test]
fn translating_pipeline_on_mutated_real_traffic() {
    let mut r = rng(8);
    let scenarios = seeds::nat_scenarios();
    assert!(scenarios.len() >= 9, "the NAT scenarios are seeds");
    for (name, action, frames) in &scenarios {
        assert!(!frames.is_empty(), "{name}");
        let mut probe = p();
        ctrack_fuzz::pipeline_frames(frames, action, &mut probe);
        assert_eq!(probe.units(), frames.len() as u64, "every frame counted");
        for _ in 0..iters() * 4 {
            let m = one_in_four_mutated(&mut r, frames);
            ctrack_fuzz::pipeline_frames(&m, action, &mut p());
        }
    }
}

#[test]
fn firewall_bursts_against_frames_one_by_one_on_mutated_real_traffic() {
    let mut r = rng(13);
    let mut lists: Vec<Vec<Vec<u8>>> = seeds::nat_scenarios().into_iter().map(|s| s.2).collect();
    lists.extend(
        seeds::capture_files()
            .iter()
            .take(2)
            .map(|(_, b)| seeds::frames_of(b)),
    );
    assert!(lists.len() >= 9, "the NAT scenarios and captures are seeds");
    for (n, frames) in lists.iter().enumerate() {
        for pick in 0..ctrack_fuzz::FIREWALL_POLICIES.len() as u8 {
            let mut probe = p();
            ctrack_fuzz::firewall_frames(frames, pick, &mut probe);
            assert!(
                probe.units() > 0 || frames.is_empty(),
                "list {n} judged nothing"
            );
        }
        for _ in 0..iters() {
            let m = one_in_four_mutated(&mut r, frames);
            ctrack_fuzz::firewall_frames(&m, r.below(256) as u8, &mut p());
        }
    }
}

#[test]
fn policy_files_mutated() {
    let mut r = rng(11);
    for seed in [seeds::POLICY_TOML, seeds::POLICY_JSON] {
        ctrack_fuzz::policy_file(seed.as_bytes(), &mut p());
        for _ in 0..iters() * 400 {
            ctrack_fuzz::policy_file(&r.mutate(seed.as_bytes()), &mut p());
        }
    }
    for _ in 0..iters() * 200 {
        let n = r.below(64);
        ctrack_fuzz::policy_file(&r.bytes(n), &mut p());
    }
}

#[test]
fn matches_from_words_and_bytes() {
    let mut r = rng(12);
    let words = ctrack_fuzz::targets::MATCH_WORDS;
    for _ in 0..iters() * 5_000 {
        let mut data = Vec::new();
        for _ in 0..r.below(14) {
            let w = words[r.below(words.len())];
            if r.below(8) == 0 {
                data.extend_from_slice(&r.mutate(w));
            } else {
                data.extend_from_slice(w);
            }
            data.push(b' ');
        }
        ctrack_fuzz::match_expr(&data, &mut p());
    }
    for _ in 0..iters() * 500 {
        let n = r.below(32);
        ctrack_fuzz::match_expr(&r.bytes(n), &mut p());
    }
}

#[test]
fn classifier_against_a_linear_scan() {
    let mut r = rng(9);
    for _ in 0..iters() * 200 {
        let len = r.below(800);
        ctrack_fuzz::classifier_diff(&r.bytes(len), &mut p());
    }
}

/// Every cargo-fuzz target in `fuzz/fuzz_targets/` is a target of the
/// campaign driver (and so is run here and replayed from its corpus), and
/// the other way round.
#[test]
fn every_fuzz_target_is_known() {
    let dir = seeds::fuzz_dir().join("fuzz_targets");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("fuzz/fuzz_targets/")
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".rs")
                .map(String::from)
        })
        .collect();
    files.sort();
    let mut names: Vec<String> = TARGETS.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(files, names);
    for a in ctrack_fuzz::PIPELINE_ACTIONS {
        assert!(a.parse::<ctrack_core::CtAction>().is_ok(), "{a}");
    }
}

/// The campaign engine on every target, from the built-in seeds, for a
/// bounded time each: nothing crashes, every body counts what it pushed
/// through, and the guidance keeps inputs.
#[test]
fn campaign_engine_on_every_target() {
    for (i, t) in TARGETS.iter().enumerate() {
        let mut f = Fuzzer::new(t, 0x5eed + i as u64);
        let seeds = seeds::builtin(t.name);
        assert!(!seeds.is_empty(), "{}: built-in seeds", t.name);
        f.add_seeds(seeds.into_iter().take(8));
        let start = f.totals();
        assert!(start.units > 0, "{}: the seeds count", t.name);
        assert!(start.pool > 0 && start.features > 0, "{}", t.name);
        let limit = Duration::from_millis(100 * iters() as u64);
        f.run_until(Instant::now() + limit, u64::MAX);
        let end = f.totals();
        let crashes = f.take_crashes();
        assert!(crashes.is_empty(), "{}: {:?}", t.name, crashes[0].message);
        assert!(end.inputs > start.inputs, "{}", t.name);
        assert!(end.units >= start.units, "{}", t.name);
        let min = f.minimised(64 * 1024, Duration::from_secs(5));
        assert!(!min.is_empty() && min.len() <= end.pool, "{}", t.name);
        assert!(min.iter().map(Vec::len).sum::<usize>() <= 64 * 1024);
    }
}

/// A body that panics is a crash: caught, counted, kept with its message.
#[test]
fn crashes_are_caught_and_kept() {
    static BOOM: ctrack_fuzz::targets::Target = ctrack_fuzz::targets::Target {
        name: "boom",
        unit: "inputs",
        packets: false,
        run: |d, p| {
            p.count(1);
            assert!(!d.starts_with(b"X"), "boom");
        },
        shape: ctrack_fuzz::targets::Shape::Bytes,
        max_len: 16,
    };
    ctrack_fuzz::campaign::quiet_panics();
    let mut f = Fuzzer::new(&BOOM, 1);
    assert_eq!(f.execute(b"ok"), Outcome::Ran { new: 0 });
    match f.execute(b"X!") {
        Outcome::Crashed(m) => assert!(m.contains("boom"), "{m}"),
        o => panic!("{o:?}"),
    }
    let c = f.take_crashes();
    assert_eq!((c.len(), c[0].input.as_slice()), (1, &b"X!"[..]));
    assert_eq!((f.totals().crashes, f.totals().inputs), (1, 2));
}
