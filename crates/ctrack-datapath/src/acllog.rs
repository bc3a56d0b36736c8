//! The ACL log of `ctrack run`: a line for each decision of an ACL with
//! `log = true`, as ovn-controller logs ACL hits (`acl_log`), written to
//! standard error by a thread of its own.
//!
//! The packet path never waits on it. Each worker holds a [`Limiter`]: a
//! token bucket of its own (no shared counter), so a logged ACL that a
//! flood hits costs at most `rate` lines a second a worker, the rest
//! counted as suppressed; a line within the rate is formatted by the
//! worker and offered to a bounded queue with a non-blocking `try_send`,
//! a full queue counting it as dropped. The writer thread takes lines off
//! the queue and writes them, so a slow or blocked standard error stalls
//! only it. An ACL that names a meter (`meter`, OVN's `ACL.meter`) is
//! limited by that meter instead, shared by all workers
//! ([`ctrack_policy::meter`]); the others by `ctrack run --acl-log-rate`
//! (OVN leaves them unlimited).

use std::borrow::Cow;
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

use ctrack_core::Time;
use ctrack_policy::firewall::{AclRef, Compiled, Decision};
use ctrack_policy::model::Severity;
use ctrack_policy::reject::RateLimiter;
use ctrack_wire::describe::describe;
use ctrack_wire::{LinkType, parse_frame};

/// Lines a second each worker may log, by default.
pub const DEFAULT_RATE: u32 = 100;

/// Lines waiting for the writer, at most.
pub const QUEUE: usize = 4096;

/// The log's counters (a worker's, or their sum).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AclLogStats {
    /// Lines handed to the writer.
    pub lines: u64,
    /// Decisions of a logged ACL over the rate: not logged.
    pub suppressed: u64,
    /// Lines lost because the writer's queue was full.
    pub dropped: u64,
}

impl AclLogStats {
    /// Adds `o` to `self`.
    pub fn merge(&mut self, o: &AclLogStats) {
        self.lines += o.lines;
        self.suppressed += o.suppressed;
        self.dropped += o.dropped;
    }
}

/// The log shared by a datapath's threads: the queue's two ends and the
/// rate each worker's [`Limiter`] gets.
#[derive(Debug)]
pub struct AclLog {
    tx: SyncSender<String>,
    rx: Mutex<Option<Receiver<String>>>,
    rate: u32,
}

impl AclLog {
    /// A log whose workers may write `rate` lines a second each (0: none)
    /// through a queue of `capacity` lines.
    pub fn new(rate: u32, capacity: usize) -> AclLog {
        let (tx, rx) = sync_channel(capacity.max(1));
        AclLog {
            tx,
            rx: Mutex::new(Some(rx)),
            rate,
        }
    }

    /// A worker's limiter.
    pub fn limiter(&self) -> Limiter {
        Limiter {
            tx: self.tx.clone(),
            bucket: RateLimiter::new(self.rate, self.rate),
        }
    }

    /// The queue's far end, once (for the writer thread).
    pub fn take_receiver(&self) -> Option<Receiver<String>> {
        self.rx.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl Default for AclLog {
    fn default() -> AclLog {
        AclLog::new(DEFAULT_RATE, QUEUE)
    }
}

/// A worker's side of the log.
#[derive(Debug)]
pub struct Limiter {
    tx: SyncSender<String>,
    bucket: RateLimiter,
}

impl Limiter {
    /// Whether a line may be written at `now` for the decision of `acl`,
    /// judged under policy generation `judged`, on a packet of `bytes`
    /// bytes, `pol` being the policy in force: by the ACL's meter if it
    /// names one and `pol` is the policy that judged, by the worker's rate
    /// otherwise. Counts a refusal in `stats` as suppressed. Asked first,
    /// so that a flood over the rate costs a meter's or a token bucket's
    /// test a packet and nothing else.
    pub fn admit(
        &mut self,
        now: Time,
        (pol, judged, acl): (&Compiled, u32, AclRef),
        bytes: usize,
        stats: &mut AclLogStats,
    ) -> bool {
        let metered = if pol.generation == judged {
            pol.log_metered(acl, now, bytes)
        } else {
            None
        };
        let ok = metered.unwrap_or_else(|| self.bucket.allow(now));
        stats.suppressed += u64::from(!ok);
        ok
    }

    /// Offers an admitted line to the writer; counts it in `stats` as
    /// handed over or dropped (the queue full).
    pub fn send(&mut self, line: String, stats: &mut AclLogStats) {
        match self.tx.try_send(line) {
            Ok(()) => stats.lines += 1,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => stats.dropped += 1,
        }
    }

    /// Logs `decision` of `frame` (which came in on port `inport`) at
    /// `now`, if its meter or the rate allows; counts the outcome in
    /// `stats`. `pol` is the policy in force, `judged` the generation that
    /// made the decision.
    pub fn log(
        &mut self,
        now: Time,
        (pol, judged): (&Compiled, u32),
        inport: &str,
        (decision, frame): (&Decision, &[u8]),
        stats: &mut AclLogStats,
    ) {
        if self.admit(now, (pol, judged, decision.acl), frame.len(), stats) {
            let (name, severity) = acl_of(pol, judged, decision.acl);
            self.send(line((&name, severity), inport, decision, frame), stats);
        }
    }
}

/// The name and severity a line gives the ACL `acl` that decided under
/// policy generation `judged`, `pol` being the policy in force. If another
/// policy was swapped in since, its ACL of that number may be another: the
/// line names the number and the generation instead.
pub fn acl_of(pol: &Compiled, judged: u32, acl: AclRef) -> (Cow<'_, str>, Severity) {
    match acl {
        AclRef::Acl(i) if pol.generation != judged => (
            Cow::Owned(format!("acl#{i} of policy generation {judged}")),
            Severity::Info,
        ),
        r => (Cow::Borrowed(pol.acl_name(r)), pol.acl_severity(r)),
    }
}

/// One log line, as ovn-controller's `acl_log` writes it (at its log
/// level INFO whatever the ACL's severity, which the line carries), the
/// packet summarised as `ctrack replay` summarises it. `acl` is the
/// deciding ACL's name and severity.
pub fn line(acl: (&str, Severity), inport: &str, d: &Decision, frame: &[u8]) -> String {
    let what = describe(frame, &parse_frame(frame, LinkType::Ethernet));
    format!("{}: inport=\"{inport}\": {what}", head(acl, d))
}

/// What every ACL log line starts with (`ctrack replay` follows it with
/// the packet's number): the ACL's name, the verdict, the ACL's severity,
/// the stage that decided.
pub fn head((acl, severity): (&str, Severity), d: &Decision) -> String {
    format!(
        "acl_log(ctrack)|INFO|name=\"{acl}\", verdict={}, severity={}, direction={}",
        d.action.name(),
        severity.name(),
        d.stage.name(),
    )
}

/// The writer thread's loop: writes each line of `rx` to `out` until
/// `stop` is set (what is queued then is written first) or every sender
/// is gone.
pub fn write_lines(rx: &Receiver<String>, out: &mut dyn Write, stop: &AtomicBool) {
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(l) => {
                // A closed or failing standard error loses the line, not
                // the datapath.
                let _ = writeln!(out, "{l}");
            }
            Err(RecvTimeoutError::Timeout) if !stop.load(Relaxed) => {}
            Err(_) => break,
        }
    }
    for l in rx.try_iter() {
        let _ = writeln!(out, "{l}");
    }
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctrack_policy::firewall::{Action, Stage};
    use ctrack_policy::model::Policy;
    use ctrack_wire::build::{Frame, L4};

    /// A policy whose ACL 3, `closed`, rejects and logs at `severity`,
    /// limited by meter `m` (`rate` lines a second, burst `rate`) if
    /// `rate` is not 0; as generation `generation`.
    fn closed(severity: &str, rate: u32, generation: u32) -> Compiled {
        let mut text = String::new();
        for i in 0..3 {
            text += &format!(
                "[[acl]]\ndirection = \"to-lport\"\npriority = {i}\nmatch = \"udp\"\naction = \"allow\"\n"
            );
        }
        text += &format!(
            "[[acl]]\nname = \"closed\"\ndirection = \"to-lport\"\npriority = 9\nmatch = \"tcp\"\naction = \"reject\"\nlog = true\nseverity = \"{severity}\"\n"
        );
        if rate > 0 {
            text += &format!("meter = \"m\"\n[meters.m]\nrate = {rate}\n");
        }
        Compiled::new(Policy::from_str(&text, "p.toml").unwrap(), generation).unwrap()
    }

    fn rejected() -> (Decision, Vec<u8>) {
        let d = Decision {
            action: Action::Reject,
            stage: Stage::ToLport,
            acl: AclRef::Acl(3),
            log: true,
            ..Decision::default()
        };
        let f = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::tcp(40000, 82, 0x002)).build();
        (d, f)
    }

    #[test]
    fn a_line_reads_as_ovns_acl_log() {
        let (d, f) = rejected();
        assert_eq!(
            line(("closed", Severity::Info), "client", &d, &f),
            format!(
                "acl_log(ctrack)|INFO|name=\"closed\", verdict=reject, severity=info, \
                 direction=to-lport: inport=\"client\": {}",
                describe(&f, &parse_frame(&f, LinkType::Ethernet))
            )
        );
        assert!(
            line(("closed", Severity::Info), "client", &d, &f)
                .contains("10.0.0.1:40000 > 10.0.0.2:82 tcp [S]")
        );
        assert!(
            line(("closed", Severity::Alert), "client", &d, &f)
                .contains("|INFO|name=\"closed\", verdict=reject, severity=alert,")
        );
    }

    #[test]
    fn the_rate_bounds_the_lines_and_a_full_queue_drops() {
        let (d, f) = rejected();
        let pol = closed("info", 0, 1);
        let log = AclLog::new(5, 3);
        let mut lim = log.limiter();
        let mut st = AclLogStats::default();
        let t = Time::from_millis(10_000);
        for _ in 0..8 {
            lim.log(t, (&pol, 1), "client", (&d, &f), &mut st);
        }
        // Five within the rate, of which the queue took three.
        assert_eq!(
            st,
            AclLogStats {
                lines: 3,
                suppressed: 3,
                dropped: 2
            }
        );
        let rx = log.take_receiver().expect("the receiver");
        assert!(log.take_receiver().is_none());
        assert_eq!(rx.try_iter().count(), 3);
        // A second later, five more tokens; the queue is empty again.
        for _ in 0..8 {
            let at = Time::from_millis(11_000);
            lim.log(at, (&pol, 1), "client", (&d, &f), &mut st);
        }
        assert_eq!((st.lines, st.suppressed, st.dropped), (6, 6, 4));
        // A rate of 0 logs nothing.
        let mut none = AclLog::new(0, 8).limiter();
        let mut st = AclLogStats::default();
        none.log(t, (&pol, 1), "client", (&d, &f), &mut st);
        assert_eq!((st.lines, st.suppressed), (0, 1));
    }

    #[test]
    fn the_writer_writes_what_is_queued_and_stops() {
        let (d, f) = rejected();
        let pol = closed("warning", 0, 1);
        let log = AclLog::new(100, 16);
        let mut lim = log.limiter();
        let mut st = AclLogStats::default();
        for _ in 0..4 {
            lim.log(Time::from_millis(1), (&pol, 1), "client", (&d, &f), &mut st);
        }
        let stop = AtomicBool::new(true);
        let mut out = Vec::new();
        write_lines(&log.take_receiver().expect("rx"), &mut out, &stop);
        let text = String::from_utf8(out).expect("UTF-8");
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(text.lines().all(|l| l.starts_with(
            "acl_log(ctrack)|INFO|name=\"closed\", verdict=reject, severity=warning,"
        )));
    }

    /// An ACL with a meter: its lines are limited by the meter, shared by
    /// the workers, and not by their rate; after a policy swap, by the
    /// rate again (the ACL of that number may be another).
    #[test]
    fn a_metered_acl_is_limited_by_its_meter() {
        let (d, f) = rejected();
        let pol = closed("info", 3, 1);
        let log = AclLog::new(100, 64);
        let (mut a, mut b) = (log.limiter(), log.limiter());
        let mut st = AclLogStats::default();
        let t = Time::from_millis(5_000);
        for _ in 0..4 {
            a.log(t, (&pol, 1), "client", (&d, &f), &mut st);
            b.log(t, (&pol, 1), "client", (&d, &f), &mut st);
        }
        assert_eq!(
            (st.lines, st.suppressed),
            (3, 5),
            "the meter's burst, for both"
        );
        // A second later, three more.
        let t = Time::from_millis(6_000);
        for _ in 0..4 {
            b.log(t, (&pol, 1), "client", (&d, &f), &mut st);
        }
        assert_eq!((st.lines, st.suppressed), (6, 6));
        // Judged under generation 1, logged under 2: the worker's rate.
        let newer = closed("info", 3, 2);
        for _ in 0..10 {
            a.log(t, (&newer, 1), "client", (&d, &f), &mut st);
        }
        assert_eq!((st.lines, st.suppressed), (16, 6));
        let rx = log.take_receiver().expect("rx");
        let lines: Vec<String> = rx.try_iter().collect();
        assert!(lines[..6].iter().all(|l| l.contains("name=\"closed\"")));
        assert!(
            lines[6..]
                .iter()
                .all(|l| l.contains("name=\"acl#3 of policy generation 1\""))
        );
    }

    #[test]
    fn a_line_after_a_policy_swap_names_the_acl_by_number() {
        let text = "[[acl]]\nname = \"closed\"\ndirection = \"to-lport\"\npriority = 1\n\
                    match = \"tcp\"\naction = \"reject\"\nlog = true\nseverity = \"alert\"\n";
        let pol = Compiled::new(Policy::from_str(text, "p.toml").unwrap(), 7).unwrap();
        let (name, sev) = acl_of(&pol, 7, AclRef::Acl(0));
        assert_eq!((name.as_ref(), sev), ("closed", Severity::Alert));
        let (name, sev) = acl_of(&pol, 6, AclRef::Acl(0));
        assert_eq!(
            (name.as_ref(), sev),
            ("acl#0 of policy generation 6", Severity::Info)
        );
        // The default is the default whatever the generation.
        assert_eq!(acl_of(&pol, 6, AclRef::Default).0, "default");
    }
}
