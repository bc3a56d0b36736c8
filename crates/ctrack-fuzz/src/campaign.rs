//! The engine of the in-repo campaign driver (`src/bin/ctrack-fuzz.rs`): a
//! small mutation-based fuzzer per target, guided by the features its body
//! records (verdicts, error kinds, protocol paths) as a cheap stand-in for
//! coverage.
//!
//! Each step takes an input from the pool (the seeds and every input that
//! showed a new feature), mutates it as its target's [`Shape`] says, runs
//! the body under `catch_unwind`, and keeps the input if it showed a new
//! feature. A panic is a crash: the input and its message are kept for the
//! caller to write out. Written here rather than taken from a crate: the
//! guidance is ours (the bodies' features), and it must build on stable.

use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;
use std::time::{Duration, Instant};

use foldhash::fast::FixedState;

use crate::Probe;
use crate::mutate::{Rng, decode_frames, encode_frames};
use crate::targets::{Shape, Target};

/// Most inputs a pool keeps; past it a new input replaces a random one.
const POOL_MAX: usize = 20_000;

/// A crashing input and what its panic said.
#[derive(Debug, Clone)]
pub struct Crash {
    /// The input.
    pub input: Vec<u8>,
    /// The panic's message and place.
    pub message: String,
}

/// What one target's fuzzer has done so far.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    /// Units its body counted (see [`Target::unit`]).
    pub units: u64,
    /// Inputs run (seeds included).
    pub inputs: u64,
    /// Inputs that panicked.
    pub crashes: u64,
    /// Distinct features seen.
    pub features: usize,
    /// Inputs in the pool.
    pub pool: usize,
    /// Time spent running inputs.
    pub elapsed: Duration,
    /// The longest any one input took.
    pub slowest: Duration,
}

/// What became of one input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It ran; it showed this many new features.
    Ran {
        /// New features.
        new: usize,
    },
    /// It panicked with this message.
    Crashed(String),
}

thread_local! {
    static LAST_PANIC: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs a panic hook that, while [`Fuzzer`] runs a body on this
/// thread, keeps the message for it instead of printing it; other panics
/// go to the hook there was before. Once per process.
pub fn quiet_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(std::cell::Cell::get) {
                return prev(info);
            }
            let msg = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            let at = info
                .location()
                .map(|l| format!("{}:{}", l.file(), l.line()))
                .unwrap_or_default();
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{at}: {msg}")));
        }));
    });
}

/// A mutation-based fuzzer of one target.
#[derive(Debug)]
pub struct Fuzzer {
    target: &'static Target,
    rng: Rng,
    pool: Vec<Vec<u8>>,
    seen: HashSet<u64, FixedState>,
    probe: Probe,
    totals: Totals,
    crashes: Vec<Crash>,
    slowest: Vec<u8>,
}

impl Fuzzer {
    /// A fuzzer of `target` with an empty pool, seeded with `seed`.
    pub fn new(target: &'static Target, seed: u64) -> Self {
        Self {
            target,
            rng: Rng::new(seed),
            pool: Vec::new(),
            seen: HashSet::default(),
            probe: Probe::recording(),
            totals: Totals::default(),
            crashes: Vec::new(),
            slowest: Vec::new(),
        }
    }

    /// The input that took longest (see [`Totals::slowest`]).
    pub fn slowest(&self) -> &[u8] {
        &self.slowest
    }

    /// Its target.
    pub fn target(&self) -> &'static Target {
        self.target
    }

    /// What it has done so far.
    pub fn totals(&self) -> Totals {
        Totals {
            features: self.seen.len(),
            pool: self.pool.len(),
            ..self.totals.clone()
        }
    }

    /// Takes the crashes found since the last call.
    pub fn take_crashes(&mut self) -> Vec<Crash> {
        std::mem::take(&mut self.crashes)
    }

    /// Runs each seed once and puts it in the pool (unless it crashed).
    pub fn add_seeds(&mut self, seeds: impl IntoIterator<Item = Vec<u8>>) {
        for s in seeds {
            if let Outcome::Ran { .. } = self.execute(&s) {
                self.push(s);
            }
        }
    }

    /// Runs `input` through the body, counting and recording.
    pub fn execute(&mut self, input: &[u8]) -> Outcome {
        let start = Instant::now();
        self.probe.clear();
        let run = self.target.run;
        let probe = &mut self.probe;
        QUIET.with(|q| q.set(true));
        let r = catch_unwind(AssertUnwindSafe(|| run(input, probe)));
        QUIET.with(|q| q.set(false));
        let took = start.elapsed();
        self.totals.elapsed += took;
        if took > self.totals.slowest {
            self.totals.slowest = took;
            self.slowest = input.to_vec();
        }
        self.totals.inputs += 1;
        self.totals.units += self.probe.units();
        match r {
            Ok(()) => {
                let mut new = 0;
                for f in self.probe.features() {
                    new += usize::from(self.seen.insert(*f));
                }
                Outcome::Ran { new }
            }
            Err(payload) => {
                let message = LAST_PANIC
                    .with(|p| p.borrow_mut().take())
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_string()))
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                self.totals.crashes += 1;
                self.crashes.push(Crash {
                    input: input.to_vec(),
                    message: message.clone(),
                });
                Outcome::Crashed(message)
            }
        }
    }

    /// Makes one input, runs it, keeps it if it showed something new.
    pub fn step(&mut self) -> Outcome {
        let input = self.generate();
        let out = self.execute(&input);
        if let Outcome::Ran { new } = out
            && new > 0
        {
            self.push(input);
        }
        out
    }

    /// Steps until `deadline`, or until the body has counted `units` more
    /// units; returns the units counted.
    pub fn run_until(&mut self, deadline: Instant, units: u64) -> u64 {
        let start = self.totals.units;
        while self.totals.units - start < units {
            self.step();
            if Instant::now() >= deadline {
                break;
            }
        }
        self.totals.units - start
    }

    fn push(&mut self, input: Vec<u8>) {
        if self.pool.len() < POOL_MAX {
            self.pool.push(input);
        } else {
            let i = self.rng.below(self.pool.len());
            self.pool[i] = input;
        }
    }

    /// A new input: mostly a mutation of one from the pool, sometimes
    /// random bytes.
    fn generate(&mut self) -> Vec<u8> {
        let max = self.target.max_len;
        let r = &mut self.rng;
        if self.pool.is_empty() || r.below(64) == 0 {
            let n = r.below(max.min(4096));
            return r.bytes(n);
        }
        let a = &self.pool[r.below(self.pool.len())];
        let b = &self.pool[r.below(self.pool.len())];
        let mut v = if r.below(10) == 0 {
            r.splice(a, b)
        } else {
            match self.target.shape {
                Shape::Bytes => r.mutate(a),
                Shape::Text(dict) => r.mutate_text(a, dict),
                Shape::Capture => {
                    let mut v = a.clone();
                    for _ in 0..1 + r.below(4) {
                        let from = if r.below(4) == 0 { 0 } else { 24 };
                        r.edit(&mut v, from);
                    }
                    v
                }
                Shape::Frames { prefix } => mutate_frames(r, a, b, prefix),
            }
        };
        v.truncate(max);
        v
    }

    /// The pool cut to a small set that shows every feature the pool does:
    /// inputs by increasing length, each kept if it shows a feature none
    /// kept before does, until `max_bytes` are kept. Inputs that take
    /// longer than `max_time` (or panic) are left out, so that replaying
    /// the set stays quick.
    pub fn minimised(&mut self, max_bytes: usize, max_time: Duration) -> Vec<Vec<u8>> {
        let mut inputs = self.pool.clone();
        inputs.sort_by(|x, y| x.len().cmp(&y.len()).then_with(|| x.cmp(y)));
        inputs.dedup();
        let mut covered: HashSet<u64, FixedState> = HashSet::default();
        let mut out = Vec::new();
        let mut bytes = 0;
        let mut probe = Probe::recording();
        for input in inputs {
            if bytes + input.len() > max_bytes {
                continue;
            }
            probe.clear();
            let run = self.target.run;
            let p = &mut probe;
            QUIET.with(|q| q.set(true));
            let start = Instant::now();
            let r = catch_unwind(AssertUnwindSafe(|| run(&input, p)));
            QUIET.with(|q| q.set(false));
            if r.is_err() || start.elapsed() > max_time {
                continue;
            }
            let mut new = false;
            for f in probe.features() {
                new |= covered.insert(*f);
            }
            if new {
                bytes += input.len();
                out.push(input);
            }
        }
        out
    }
}

/// A frame-list input mutated: its frames edited, repeated, dropped,
/// moved or taken from `other`; sometimes its prefix or its bytes edited.
fn mutate_frames(r: &mut Rng, input: &[u8], other: &[u8], prefix: usize) -> Vec<u8> {
    if r.below(8) == 0 {
        return r.mutate(input);
    }
    let cut = prefix.min(input.len());
    let mut head = input[..cut].to_vec();
    head.resize(prefix, 0);
    if prefix > 0 && r.below(16) == 0 {
        head[r.below(prefix)] = r.next_u64() as u8;
    }
    let mut frames = decode_frames(&input[cut..]);
    let others = decode_frames(&other[prefix.min(other.len())..]);
    for _ in 0..1 + r.below(3) {
        r.mutate_frames(&mut frames, &others);
    }
    head.extend(encode_frames(&frames));
    head
}
