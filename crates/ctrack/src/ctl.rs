//! `ctrack ctl [--ctl PATH] COMMAND ...`: asks a running `ctrack run`
//! over its control socket (`ctrack ctl help` lists the commands; the
//! protocol is described in `ctrack_datapath::ctl`).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};
use clap::Args;
use ctrack_datapath::ctl::DEFAULT_SOCKET;
use ctrack_datapath::ctl::client::{Client, ClientError, StreamItem};

/// Arguments of `ctrack ctl`.
#[derive(Debug, Args)]
pub struct CtlArgs {
    /// The control socket of the `ctrack run` to ask (its `--ctl`).
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    pub ctl: PathBuf,
    /// The command and its arguments: dump-conntrack, list, flush, count,
    /// stats, set-maxconns, get-maxconns, ct-set-limits, ct-get-limits,
    /// ct-del-limits, ct-set-timeout, ct-get-timeout, ct-del-timeout,
    /// policy reload|show|counters, events, ports, fdb-show, fdb-flush,
    /// version, help.
    #[arg(
        value_name = "COMMAND",
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required = true
    )]
    pub command: Vec<String>,
}

/// The client's error as one line (its I/O cause is already said in
/// words).
fn line(e: ClientError) -> anyhow::Error {
    anyhow!("{e}")
}

/// `policy reload FILE` with a relative FILE: made absolute here, since
/// the daemon's working directory is not ours.
fn absolutize(argv: &[String]) -> Result<Vec<String>> {
    let mut argv = argv.to_vec();
    if let [cmd, sub, file] = argv.as_mut_slice()
        && cmd == "policy"
        && sub == "reload"
        && Path::new(file.as_str()).is_relative()
    {
        let abs = std::env::current_dir()?.join(&*file);
        *file = abs.to_string_lossy().into_owned();
    }
    Ok(argv)
}

/// True if `argv` asks for JSON output.
fn wants_json(argv: &[String]) -> bool {
    argv.iter().enumerate().any(|(i, a)| {
        a == "--format=json"
            || (matches!(a.as_str(), "--format" | "-o" | "--output")
                && argv.get(i + 1).is_some_and(|v| v == "json"))
    })
}

/// Runs `ctrack ctl`: prints the reply (an error reply is an error);
/// `events` prints the stream until the daemon ends it or the process is
/// interrupted.
pub fn run(args: &CtlArgs, out: &mut dyn Write) -> Result<()> {
    let argv = absolutize(&args.command)?;
    let mut client = Client::connect(&args.ctl).map_err(line)?;
    if argv.first().map(String::as_str) != Some("events") {
        // Written part by part as it comes: a listing of millions of
        // connections is never held whole.
        let mut last = None;
        let mut failed: Option<std::io::Error> = None;
        let r = client.request_each(&argv, |part| {
            if let Some(&b) = part.as_bytes().last() {
                last = Some(b);
            }
            out.write_all(part.as_bytes()).inspect_err(|e| {
                failed = Some(std::io::Error::new(e.kind(), e.to_string()));
            })
        });
        if let Some(e) = failed {
            return Err(e.into());
        }
        r.map_err(line)?;
        if last.is_some_and(|b| b != b'\n') {
            out.write_all(b"\n")?;
        }
        return Ok(());
    }
    let json = wants_json(&argv);
    let mut failed: Option<std::io::Error> = None;
    let streamed = client.stream(&argv, |item| {
        let r = match item {
            StreamItem::Event(serde_json::Value::String(s)) => writeln!(out, "{s}"),
            StreamItem::Event(v) => writeln!(out, "{v}"),
            StreamItem::Dropped(n) if json => writeln!(out, "{{\"dropped\":{n}}}"),
            StreamItem::Dropped(n) => writeln!(out, "# {n} events dropped"),
        };
        match r.and_then(|()| out.flush()) {
            Ok(()) => true,
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    });
    if let Some(e) = failed {
        return Err(e.into());
    }
    streamed.map_err(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::os::unix::net::UnixListener;

    fn args(sock: &Path, cmd: &[&str]) -> CtlArgs {
        CtlArgs {
            ctl: sock.to_path_buf(),
            command: cmd.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn temp_sock(name: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("ctrack-cli-{}-{name}.sock", std::process::id()));
        let _ = std::fs::remove_file(&p);
        p
    }

    /// A server answering one request with `lines`; returns the request.
    fn fake(sock: &Path, lines: &'static [&'static str]) -> std::thread::JoinHandle<String> {
        let l = UnixListener::bind(sock).unwrap();
        std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut req = String::new();
            r.read_line(&mut req).unwrap();
            for line in lines {
                (&s).write_all(line.as_bytes()).unwrap();
                (&s).write_all(b"\n").unwrap();
            }
            req
        })
    }

    #[test]
    fn no_daemon_is_one_clear_line() {
        let sock = temp_sock("none");
        let e = run(&args(&sock, &["count"]), &mut Vec::new()).unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            format!(
                "cannot reach ctrack at {}: no such file (is `ctrack run` running?)",
                sock.display()
            )
        );
    }

    #[test]
    fn text_replies_print_and_errors_fail() {
        let sock = temp_sock("text");
        let h = fake(&sock, &[r#"{"ok":true,"text":"3"}"#]);
        let mut out = Vec::new();
        run(&args(&sock, &["count", "zone=5"]), &mut out).unwrap();
        assert_eq!(out, b"3\n");
        assert_eq!(h.join().unwrap(), "{\"argv\":[\"count\",\"zone=5\"]}\n");
        let _ = std::fs::remove_file(&sock);
        let h = fake(
            &sock,
            &[r#"{"ok":false,"error":"count: zone: \"x\" is not a valid number"}"#],
        );
        let e = run(&args(&sock, &["count", "zone=x"]), &mut Vec::new()).unwrap_err();
        assert_eq!(e.to_string(), "count: zone: \"x\" is not a valid number");
        h.join().unwrap();
        let _ = std::fs::remove_file(&sock);
    }

    /// A reply in parts (a long listing) prints as its texts put
    /// together, a newline added at the end where the last lacks one; one
    /// cut short (the daemon gone before its last part) is an error.
    #[test]
    fn a_reply_in_parts_prints_whole() {
        let sock = temp_sock("parts");
        let h = fake(
            &sock,
            &[
                r#"{"ok":true,"text":"[\n  {\"a\": 1},","more":true}"#,
                r#"{"ok":true,"text":"\n  {\"a\": 2}","more":true}"#,
                r#"{"ok":true,"text":"\n]"}"#,
            ],
        );
        let mut out = Vec::new();
        run(&args(&sock, &["list", "--format", "json"]), &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[\n  {\"a\": 1},\n  {\"a\": 2}\n]\n"
        );
        h.join().unwrap();
        let _ = std::fs::remove_file(&sock);
        let h = fake(&sock, &[r#"{"ok":true,"text":"tcp,1\n","more":true}"#]);
        let mut out = Vec::new();
        let e = run(&args(&sock, &["dump-conntrack"]), &mut out).unwrap_err();
        assert!(e.to_string().contains("before its reply's end"), "{e}");
        assert_eq!(out, b"tcp,1\n");
        h.join().unwrap();
        let _ = std::fs::remove_file(&sock);
    }

    #[test]
    fn events_print_lines_and_drops() {
        let sock = temp_sock("events");
        let h = fake(
            &sock,
            &[
                r#"{"ok":true,"text":""}"#,
                r#"{"event":"    [NEW] udp      17 30 src=10.0.0.1"}"#,
                r#"{"dropped":5}"#,
            ],
        );
        let mut out = Vec::new();
        run(&args(&sock, &["events"]), &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "    [NEW] udp      17 30 src=10.0.0.1\n# 5 events dropped\n"
        );
        h.join().unwrap();
        let _ = std::fs::remove_file(&sock);
    }

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: Cmd,
    }

    #[derive(Debug, clap::Subcommand)]
    enum Cmd {
        Ctl(CtlArgs),
    }

    #[test]
    fn the_command_s_options_reach_the_server_untouched() {
        use clap::{CommandFactory, Parser};
        Cli::command().debug_assert();
        let Cmd::Ctl(a) = Cli::try_parse_from([
            "ctrack", "ctl", "--ctl", "/x.sock", "list", "-p", "tcp", "--src", "10.0.0.1",
        ])
        .unwrap()
        .cmd;
        assert_eq!(a.ctl, PathBuf::from("/x.sock"));
        assert_eq!(a.command, ["list", "-p", "tcp", "--src", "10.0.0.1"]);
        let Cmd::Ctl(a) = Cli::try_parse_from(["ctrack", "ctl", "dump-conntrack", "-s"])
            .unwrap()
            .cmd;
        assert_eq!(a.ctl, PathBuf::from(DEFAULT_SOCKET));
        assert_eq!(a.command, ["dump-conntrack", "-s"]);
        assert!(Cli::try_parse_from(["ctrack", "ctl"]).is_err());
    }

    #[test]
    fn a_relative_policy_file_is_made_absolute() {
        let argv: Vec<String> = ["policy", "reload", "p.toml"].map(String::from).to_vec();
        let abs = absolutize(&argv).unwrap();
        assert!(Path::new(&abs[2]).is_absolute());
        assert!(abs[2].ends_with("p.toml"));
        let argv: Vec<String> = ["list", "-o", "json"].map(String::from).to_vec();
        assert!(wants_json(&argv));
        assert!(!wants_json(&argv[..2]));
    }
}
