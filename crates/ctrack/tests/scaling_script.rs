//! `scripts/scaling-bench.py`, the script behind BENCHMARKS.md's thread
//! scaling figures, runs end to end at `--quick` sizes and writes its
//! record: every bench it drives answers, and the summary is made of
//! them, written whole at the end (`complete`), and `benchmark` gives each
//! thread's own time. (Its figures at these sizes mean nothing; the check is that the
//! script and the benches' JSON still fit each other.) Needs python3;
//! without it the test says so and passes, except in CI (`CI` set).

use std::process::Command;

#[test]
fn the_scaling_script_runs_and_records_every_bench() {
    if Command::new("python3").arg("--version").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "python3 is missing in CI");
        eprintln!("skipped: no python3");
        return;
    }
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let out = std::env::temp_dir().join(format!("ctrack-scaling-{}.json", std::process::id()));
    let run = Command::new("python3")
        .arg(format!("{root}/scripts/scaling-bench.py"))
        .args([
            "--quick",
            "--threads",
            "1,2",
            "--ctrack",
            env!("CARGO_BIN_EXE_ctrack"),
        ])
        .arg("--json")
        .arg(&out)
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(text.contains("cps steady M/s"), "{text}");
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("the record")).unwrap();
    let _ = std::fs::remove_file(&out);
    assert_eq!(rec["threads"], serde_json::json!([1, 2]));
    // Written again after every step; the last write says it ran whole.
    assert_eq!(rec["complete"], true);
    // Each benchmark thread's own time, fastest first.
    let own: Vec<f64> = rec["benchmark"]["2"]["thread_ms"]
        .as_array()
        .expect("thread_ms")
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(own.len(), 2, "{own:?}");
    assert!(own[0] <= own[1] && own[0] > 0.0, "{own:?}");
    assert!(
        own[1] <= rec["benchmark"]["2"]["median_ms"].as_f64().unwrap() + 1.0,
        "no thread's own time exceeds the run's: {own:?}"
    );
    assert!(text.contains("each thread's own time"), "{text}");
    for key in ["1", "2"] {
        assert_eq!(rec["cps"][key]["threads"], key.parse::<u64>().unwrap());
        let steady = rec["cps"][key]["steady"]["conns_per_sec"].as_f64().unwrap();
        assert!(steady > 0.0 && steady.is_finite(), "{key}: {steady}");
    }
    assert_eq!(rec["cps_sweeper_thread"]["2"]["sweeper"], "thread");
    assert_eq!(rec["alone"]["benchmark"].as_array().unwrap().len(), 2);
    // The firewall stage, through one firewall at one thread and two,
    // and in two processes at once.
    assert!(text.contains("firewall stage Mpps"), "{text}");
    for key in ["1", "2"] {
        assert_eq!(
            rec["stage"][key]["figures"]["threads"],
            key.parse::<u64>().unwrap()
        );
    }
    assert_eq!(rec["alone"]["stage"].as_array().unwrap().len(), 2);
    assert_eq!(rec["summary"].as_array().unwrap().len(), 5);
}
