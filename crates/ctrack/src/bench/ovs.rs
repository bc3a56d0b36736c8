//! Running Open vSwitch's `ovstest test-conntrack` beside ctrack, for
//! ratios taken in the same invocation. The binary is the user's own build
//! of Open vSwitch (`make tests/ovstest`); nothing of it is part of ctrack.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::BenchmarkArgs;

fn run(path: &Path, args: &[String]) -> Result<String> {
    let out = Command::new(path)
        .arg("test-conntrack")
        .args(args)
        .output()
        .with_context(|| format!("running {}", path.display()))?;
    if !out.status.success() {
        bail!(
            "{} test-conntrack {} failed: {}",
            path.display(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ovstest test-conntrack benchmark` with the same arguments: its
/// `conntrack: N ms`.
pub(crate) fn benchmark(path: &Path, a: &BenchmarkArgs) -> Result<Duration> {
    let args = [
        "benchmark".to_string(),
        a.n_threads.to_string(),
        a.n_pkts.to_string(),
        a.batch.to_string(),
        a.change.to_string(),
    ];
    let text = run(path, &args)?;
    let ms = text
        .lines()
        .find_map(|l| l.strip_prefix("conntrack:"))
        .and_then(|v| v.trim().trim_end_matches("ms").trim().parse::<u64>().ok())
        .with_context(|| format!("no `conntrack: N ms` line in ovstest's output: {text}"))?;
    Ok(Duration::from_millis(ms))
}

/// What `ovstest test-conntrack benchmark-zones` printed: the initial
/// insert time, and per column (commit, no commit, flush full, flush
/// empty) min, max, p95 and its exponentially weighted "Avg", in
/// microseconds.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct ZonesResult {
    pub(crate) initial_insert_ms: u64,
    /// `[column][min, max, p95, ewma]`.
    pub(crate) table: [[f64; 4]; 4],
}

pub(crate) fn zones(
    path: &Path,
    n_conns: u64,
    n_zones: u64,
    iterations: u64,
) -> Result<ZonesResult> {
    let args = [
        "benchmark-zones".to_string(),
        n_conns.to_string(),
        n_zones.to_string(),
        iterations.to_string(),
    ];
    let text = run(path, &args)?;
    let insert = text
        .lines()
        .find_map(|l| l.strip_prefix("initial insert time:"))
        .and_then(|v| v.trim().trim_end_matches("ms").trim().parse::<u64>().ok())
        .context("no initial insert time in ovstest's output")?;
    let mut table = [[0f64; 4]; 4];
    for (row, label) in ["| Min", "| Max", "| 95%ile", "| Avg"].iter().enumerate() {
        let line = text
            .lines()
            .find(|l| l.starts_with(label))
            .with_context(|| format!("no `{label}` row in ovstest's output"))?;
        let cells: Vec<f64> = line
            .split('|')
            .skip(2)
            .filter_map(|c| c.trim().trim_end_matches("us").trim().parse::<f64>().ok())
            .collect();
        if cells.len() != 4 {
            bail!("cannot read ovstest's `{label}` row: {line}");
        }
        for (col, v) in cells.into_iter().enumerate() {
            table[col][row] = v;
        }
    }
    Ok(ZonesResult {
        initial_insert_ms: insert,
        table,
    })
}
