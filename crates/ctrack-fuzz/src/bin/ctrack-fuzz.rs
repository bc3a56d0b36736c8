//! `ctrack-fuzz`: the in-repo fuzzing campaign driver. Runs the fuzz bodies
//! of `ctrack_fuzz::targets` with mutation-based, feature-guided inputs
//! (see `ctrack_fuzz::campaign`), from the corpus in `fuzz/corpus/`, until
//! a number of packets or seconds; writes crashing inputs out; can write
//! each target's minimised pool back as its corpus. See docs/fuzzing.md.

use std::hash::BuildHasher;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use ctrack_fuzz::campaign::{Crash, Fuzzer, quiet_panics};
use ctrack_fuzz::seeds;
use ctrack_fuzz::targets::{TARGETS, Target, find};
use serde::Serialize;

/// The in-repo fuzzing campaign driver.
#[derive(Debug, Parser)]
#[command(name = "ctrack-fuzz", version)]
struct Args {
    /// Target to run (repeat for several); `all` runs every one.
    #[arg(long = "target", default_value = "all")]
    targets: Vec<String>,
    /// Stop once the packet targets' bodies have pushed this many packets
    /// through, in all (all units when no selected target counts packets).
    #[arg(long)]
    packets: Option<u64>,
    /// Stop after this many seconds (60 when neither this nor --packets).
    #[arg(long)]
    seconds: Option<f64>,
    /// Seed of the mutations (each target mixes in its position).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Corpus root: seeds are read from DIR/<target>/ (default: the
    /// repository's fuzz/corpus). A missing or empty folder falls back to
    /// the built-in seeds.
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Start from the built-in seeds (examples/) as well as the corpus.
    #[arg(long)]
    builtin: bool,
    /// Where crashing inputs are written: DIR/<target>/crash-<hash>, with
    /// the panic message in crash-<hash>.txt.
    #[arg(long, default_value = "fuzz/artifacts/ctrack-fuzz")]
    save: PathBuf,
    /// At the end, write each target's minimised pool to DIR/<target>/,
    /// replacing what is there.
    #[arg(long)]
    minimise_into: Option<PathBuf>,
    /// Most bytes a minimised corpus keeps per target.
    #[arg(long, default_value_t = 128 * 1024)]
    max_corpus_bytes: usize,
    /// Inputs slower than this many milliseconds stay out of a minimised
    /// corpus (CI replays it in debug mode).
    #[arg(long, default_value_t = 20)]
    max_corpus_input_ms: u64,
    /// Time each target runs before the next one's turn, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    slice_ms: u64,
    /// Seconds between progress lines on stderr (0: none).
    #[arg(long, default_value_t = 60)]
    progress: u64,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
    /// List the targets and exit.
    #[arg(long)]
    list: bool,
}

#[derive(Debug, Serialize)]
struct Row {
    target: &'static str,
    unit: &'static str,
    packets: bool,
    units: u64,
    inputs: u64,
    crashes: u64,
    features: usize,
    pool: usize,
    seconds: f64,
    units_per_second: f64,
    slowest_input_seconds: f64,
}

#[derive(Debug, Serialize)]
struct Summary {
    seed: u64,
    seconds: f64,
    /// Packets of the packet targets (all units when none ran).
    packets: u64,
    inputs: u64,
    crashes: u64,
    targets: Vec<Row>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.list {
        for t in &TARGETS {
            println!(
                "{:16} {:10} {}",
                t.name,
                t.unit,
                if t.packets { "packets" } else { "" }
            );
        }
        return ExitCode::SUCCESS;
    }
    let targets = match select(&args.targets) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("ctrack-fuzz: {e}");
            return ExitCode::from(2);
        }
    };
    quiet_panics();
    let corpus = args.corpus.clone().unwrap_or_else(seeds::corpus_dir);
    let mut fuzzers: Vec<Fuzzer> = targets
        .iter()
        .enumerate()
        .map(|(i, t)| start(t, &args, &corpus, i as u64))
        .collect();
    let summary = campaign(&args, &mut fuzzers);
    if let Some(dir) = &args.minimise_into {
        for f in &mut fuzzers {
            let slow = Duration::from_millis(args.max_corpus_input_ms);
            if let Err(e) = write_corpus(dir, f, args.max_corpus_bytes, slow) {
                eprintln!("ctrack-fuzz: writing {}: {e}", dir.display());
                return ExitCode::from(2);
            }
        }
    }
    for f in &fuzzers {
        if f.totals().slowest >= SLOW {
            save_slowest(&args.save, f);
        }
    }
    report(&summary, args.json);
    if summary.crashes > 0 {
        eprintln!(
            "ctrack-fuzz: {} crash(es); inputs in {}",
            summary.crashes,
            args.save.display()
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn select(names: &[String]) -> Result<Vec<&'static Target>, String> {
    if names.iter().any(|n| n == "all") {
        return Ok(TARGETS.iter().collect());
    }
    names
        .iter()
        .map(|n| find(n).ok_or_else(|| format!("no target {n:?} (see --list)")))
        .collect()
}

/// The corpus files of `dir`, sorted by name.
fn read_dir(dir: &Path) -> Vec<Vec<u8>> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    paths.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

fn start(t: &'static Target, args: &Args, corpus: &Path, i: u64) -> Fuzzer {
    let mut f = Fuzzer::new(t, args.seed.wrapping_mul(0x9e37_79b9).wrapping_add(i));
    let mut seeds = read_dir(&corpus.join(t.name));
    if seeds.is_empty() || args.builtin {
        if seeds.is_empty() && !args.builtin {
            eprintln!("ctrack-fuzz: {}: no corpus, built-in seeds", t.name);
        }
        seeds.extend(seeds::builtin(t.name));
    }
    f.add_seeds(seeds);
    f
}

fn campaign(args: &Args, fuzzers: &mut [Fuzzer]) -> Summary {
    let begin = Instant::now();
    let seconds = args.seconds.or(if args.packets.is_none() {
        Some(60.0)
    } else {
        None
    });
    let end = seconds.map(|s| begin + Duration::from_secs_f64(s.max(0.0)));
    let goal = args.packets.unwrap_or(u64::MAX);
    let any_packets = fuzzers.iter().any(|f| f.target().packets);
    let counts = |f: &Fuzzer| f.target().packets || !any_packets;
    let mut counted: u64 = fuzzers
        .iter()
        .filter(|f| counts(f))
        .map(|f| f.totals().units)
        .sum();
    let slice = Duration::from_millis(args.slice_ms.max(1));
    let mut last_progress = Instant::now();
    let done = |counted: u64| counted >= goal || end.is_some_and(|e| Instant::now() >= e);
    while !done(counted) {
        for f in fuzzers.iter_mut() {
            if done(counted) {
                break;
            }
            let deadline = end.map_or(Instant::now() + slice, |e| e.min(Instant::now() + slice));
            let budget = if counts(f) { goal - counted } else { u64::MAX };
            let got = f.run_until(deadline, budget);
            if counts(f) {
                counted += got;
            }
            save_crashes(&args.save, f.target().name, f.take_crashes());
        }
        if args.progress > 0 && last_progress.elapsed().as_secs() >= args.progress {
            last_progress = Instant::now();
            let crashes: u64 = fuzzers.iter().map(|f| f.totals().crashes).sum();
            eprintln!(
                "ctrack-fuzz: {:.0} s, {counted} packets, {crashes} crashes",
                begin.elapsed().as_secs_f64()
            );
        }
    }
    summarise(args.seed, begin.elapsed(), fuzzers, counted)
}

fn summarise(seed: u64, took: Duration, fuzzers: &[Fuzzer], packets: u64) -> Summary {
    let targets: Vec<Row> = fuzzers
        .iter()
        .map(|f| {
            let t = f.totals();
            let secs = t.elapsed.as_secs_f64();
            Row {
                target: f.target().name,
                unit: f.target().unit,
                packets: f.target().packets,
                units: t.units,
                inputs: t.inputs,
                crashes: t.crashes,
                features: t.features,
                pool: t.pool,
                seconds: secs,
                units_per_second: if secs > 0.0 {
                    t.units as f64 / secs
                } else {
                    0.0
                },
                slowest_input_seconds: t.slowest.as_secs_f64(),
            }
        })
        .collect();
    Summary {
        seed,
        seconds: took.as_secs_f64(),
        packets,
        inputs: targets.iter().map(|r| r.inputs).sum(),
        crashes: targets.iter().map(|r| r.crashes).sum(),
        targets,
    }
}

/// Most crashing inputs written per target and run (all are counted).
const MAX_SAVED: usize = 50;

fn save_crashes(dir: &Path, target: &str, crashes: Vec<Crash>) {
    if crashes.is_empty() {
        return;
    }
    let dir = dir.join(target);
    let have = std::fs::read_dir(&dir).map_or(0, |d| d.count());
    if have >= 2 * MAX_SAVED || std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    for c in crashes.iter().take(MAX_SAVED) {
        let name = format!("crash-{:016x}", hash(&c.input));
        eprintln!("ctrack-fuzz: {target}: crash {name}: {}", c.message);
        let _ = std::fs::write(dir.join(&name), &c.input);
        let _ = std::fs::write(dir.join(format!("{name}.txt")), &c.message);
    }
}

/// An input that takes longer than this is written out as
/// DIR/<target>/slow-<hash> (not a failure: for a look by hand).
const SLOW: Duration = Duration::from_secs(1);

fn save_slowest(dir: &Path, f: &Fuzzer) {
    let dir = dir.join(f.target().name);
    let name = format!("slow-{:016x}", hash(f.slowest()));
    if std::fs::create_dir_all(&dir).is_ok() && std::fs::write(dir.join(&name), f.slowest()).is_ok()
    {
        eprintln!(
            "ctrack-fuzz: {}: slowest input ({:.2} s) in {}",
            f.target().name,
            f.totals().slowest.as_secs_f64(),
            dir.join(name).display()
        );
    }
}

fn hash(b: &[u8]) -> u64 {
    foldhash::fast::FixedState::with_seed(0).hash_one(b)
}

fn write_corpus(
    root: &Path,
    f: &mut Fuzzer,
    max_bytes: usize,
    max_time: Duration,
) -> std::io::Result<()> {
    let dir = root.join(f.target().name);
    let kept = f.minimised(max_bytes, max_time);
    std::fs::create_dir_all(&dir)?;
    for e in std::fs::read_dir(&dir)? {
        let p = e?.path();
        if p.is_file() {
            std::fs::remove_file(p)?;
        }
    }
    let bytes: usize = kept.iter().map(Vec::len).sum();
    for input in &kept {
        std::fs::write(dir.join(format!("{:016x}", hash(input))), input)?;
    }
    eprintln!(
        "ctrack-fuzz: {}: {} inputs, {bytes} bytes in {}",
        f.target().name,
        kept.len(),
        dir.display()
    );
    Ok(())
}

fn report(s: &Summary, json: bool) {
    if json {
        match serde_json::to_string_pretty(s) {
            Ok(j) => println!("{j}"),
            Err(e) => eprintln!("ctrack-fuzz: {e}"),
        }
        return;
    }
    println!(
        "{:16} {:>14} {:10} {:>10} {:>7} {:>8} {:>6} {:>8} {:>12} {:>9}",
        "target",
        "units",
        "unit",
        "inputs",
        "crashes",
        "features",
        "pool",
        "seconds",
        "units/s",
        "slowest"
    );
    for r in &s.targets {
        println!(
            "{:16} {:>14} {:10} {:>10} {:>7} {:>8} {:>6} {:>8.1} {:>12.0} {:>8.3}s",
            r.target,
            r.units,
            r.unit,
            r.inputs,
            r.crashes,
            r.features,
            r.pool,
            r.seconds,
            r.units_per_second,
            r.slowest_input_seconds
        );
    }
    let what = if s.targets.iter().any(|r| r.packets) {
        "packets (packet targets)"
    } else {
        "units (no packet target ran)"
    };
    println!(
        "total: {} {what}, {} inputs, {} crashes, {:.1} s, seed {}",
        s.packets, s.inputs, s.crashes, s.seconds, s.seed
    );
}
