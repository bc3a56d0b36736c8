//! A small command-line parser for the control commands' arguments
//! (written by hand: the commands are few and their syntax is Open
//! vSwitch's `key=value` words mixed with conntrack's options, which a
//! general parser would not make shorter; and nothing here may print or
//! exit).

use std::str::FromStr;

/// One option a command takes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opt {
    /// Its spellings (`-p`, `--proto`, `--orig-proto`).
    pub(crate) names: &'static [&'static str],
    /// The name it is reported under (the first long one, say).
    pub(crate) key: &'static str,
    /// It takes a value (`--proto tcp`, `--proto=tcp`).
    pub(crate) value: bool,
}

/// `--format json|text` (and conntrack's `-o json`), which most commands
/// take.
pub(crate) const FORMAT: Opt = Opt {
    names: &["--format", "-o", "--output"],
    key: "format",
    value: true,
};

/// The options given, in order, and the other words.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    /// (key, value) of each option given (value "" for a flag).
    pub(crate) opts: Vec<(&'static str, String)>,
    /// Words that are not options (`zone=5`, `N`).
    pub(crate) words: Vec<String>,
}

impl Parsed {
    /// The last value of option `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.opts
            .iter()
            .rev()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }

    /// True if flag `key` was given.
    pub(crate) fn has(&self, key: &str) -> bool {
        self.opts.iter().any(|(k, _)| *k == key)
    }

    /// The output format asked for.
    pub(crate) fn format(&self) -> Result<Format, String> {
        match self.get(FORMAT.key) {
            None => Ok(Format::Text),
            Some(f) => f.parse(),
        }
    }

    /// Fails if any word was given (for commands that take none).
    pub(crate) fn no_words(&self) -> Result<(), String> {
        match self.words.first() {
            None => Ok(()),
            Some(w) => Err(format!("unexpected argument {w:?}")),
        }
    }
}

/// Splits `argv` (the command's arguments, after its name) into options
/// of `spec` and words. An unknown option is an error.
pub(crate) fn parse(argv: &[String], spec: &[Opt]) -> Result<Parsed, String> {
    let mut out = Parsed::default();
    let mut i = 0;
    while i < argv.len() {
        let a = &argv[i];
        i += 1;
        if !a.starts_with('-') || a == "-" {
            out.words.push(a.clone());
            continue;
        }
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (a.as_str(), None),
        };
        let Some(opt) = spec.iter().find(|o| o.names.contains(&name)) else {
            return Err(format!("unknown option {name}"));
        };
        let value = match (opt.value, inline) {
            (false, None) => String::new(),
            (false, Some(_)) => return Err(format!("option {name} takes no value")),
            (true, Some(v)) => v.to_owned(),
            (true, None) => {
                let v = argv
                    .get(i)
                    .ok_or_else(|| format!("option {name} needs a value"))?;
                i += 1;
                v.clone()
            }
        };
        out.opts.push((opt.key, value));
    }
    Ok(out)
}

/// How a reply is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Format {
    /// For people, in the layout of the tool the command follows.
    #[default]
    Text,
    /// JSON.
    Json,
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        match s {
            "text" | "plain" => Ok(Format::Text),
            "json" => Ok(Format::Json),
            _ => Err(format!("unknown format {s:?} (text or json)")),
        }
    }
}

/// Parses `v` as a number for `what`, with a clear error.
pub(crate) fn number<T: FromStr>(what: &str, v: &str) -> Result<T, String> {
    let v = v.trim();
    let parsed = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u128::from_str_radix(hex, 16)
            .ok()
            .and_then(|n| n.to_string().parse().ok()),
        None => v.parse().ok(),
    };
    parsed.ok_or_else(|| format!("{what}: {v:?} is not a valid number"))
}

/// `zone=N` words: the zone numbers they give (`zone=1,2` and `zone=1
/// zone=2` alike). Other words are errors.
pub(crate) fn zones(words: &[String]) -> Result<Vec<u16>, String> {
    let mut out = Vec::new();
    for w in words {
        let Some(list) = w.strip_prefix("zone=") else {
            return Err(format!("expected zone=N, got {w:?}"));
        };
        for z in list.split(',') {
            out.push(number::<u16>("zone", z)?);
        }
    }
    Ok(out)
}

/// At most one `zone=N` word (the others are errors).
pub(crate) fn one_zone(words: &[String]) -> Result<Option<u16>, String> {
    match zones(words)?.as_slice() {
        [] => Ok(None),
        [z] => Ok(Some(*z)),
        _ => Err("give one zone=N at most".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &[Opt] = &[
        Opt {
            names: &["-p", "--proto"],
            key: "proto",
            value: true,
        },
        Opt {
            names: &["-s", "--stats"],
            key: "stats",
            value: false,
        },
        FORMAT,
    ];

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_and_words() {
        let p = parse(&argv(&["zone=5", "-p", "tcp", "-s", "--format=json"]), SPEC).unwrap();
        assert_eq!(p.get("proto"), Some("tcp"));
        assert!(p.has("stats"));
        assert_eq!(p.format(), Ok(Format::Json));
        assert_eq!(p.words, vec!["zone=5".to_string()]);
    }

    #[test]
    fn errors_are_clear() {
        assert_eq!(
            parse(&argv(&["--nope"]), SPEC).unwrap_err(),
            "unknown option --nope"
        );
        assert_eq!(
            parse(&argv(&["-p"]), SPEC).unwrap_err(),
            "option -p needs a value"
        );
        assert!(number::<u16>("zone", "70000").is_err());
        assert_eq!(number::<u32>("mark", "0x10"), Ok(16));
        assert_eq!(zones(&argv(&["zone=1,2", "zone=3"])), Ok(vec![1, 2, 3]));
        assert!(zones(&argv(&["zone=x"])).is_err());
        assert!(one_zone(&argv(&["zone=1", "zone=2"])).is_err());
    }

    #[test]
    fn the_finer_points() {
        // A lone `-` is a word, not an option.
        let p = parse(&argv(&["-"]), SPEC).unwrap();
        assert_eq!(p.words, vec!["-".to_string()]);
        // Only long options take `=value`; a short one with it is unknown.
        assert_eq!(
            parse(&argv(&["-p=tcp"]), SPEC).unwrap_err(),
            "unknown option -p=tcp"
        );
        assert_eq!(
            parse(&argv(&["--proto=udp"]), SPEC).unwrap().get("proto"),
            Some("udp")
        );
        // A flag given a value is an error, not a flag.
        assert_eq!(
            parse(&argv(&["--stats=yes"]), SPEC).unwrap_err(),
            "option --stats takes no value"
        );
        // The last of a repeated option wins.
        let p = parse(&argv(&["-p", "tcp", "--proto", "udp"]), SPEC).unwrap();
        assert_eq!(p.get("proto"), Some("udp"));
        // `plain` is another name of the text format.
        let p = parse(&argv(&["-o", "plain"]), SPEC).unwrap();
        assert_eq!(p.format(), Ok(Format::Text));
        assert!(
            parse(&argv(&["-o", "yaml"]), SPEC)
                .unwrap()
                .format()
                .is_err()
        );
        // Numbers: hexadecimal in either case, spaces around ignored.
        assert_eq!(number::<u16>("zone", "0X1f"), Ok(31));
        assert_eq!(number::<u16>("zone", " 7 "), Ok(7));
        assert_eq!(zones(&argv(&["zone= 1, 2"])), Ok(vec![1, 2]));
    }
}
