//! The single-pass firewall: a policy joined to the tracker.
//!
//! A packet of a known connection takes one tracker lookup, which returns
//! its state and the connection's verdict word ([`word`]): if the word is
//! of the current policy generation, the packet passes on it (stage
//! `session`) with no classification. Only a connection's first packet, a
//! packet decided stateless, and the first packet of a connection after a
//! policy change meet the classifier. See `docs/policy.md` for the
//! semantics and where they differ from OVN's.
//!
//! # Embedding it
//!
//! A datapath (an AF_XDP or DPDK application, a virtual switch) keeps one
//! [`Firewall`] for all its workers, and in each worker its own
//! [`FwStats`] and buffers. It hands over Ethernet frames, a frame at a
//! time ([`Firewall::process`], which reassembles IP fragments first) or a
//! burst at a time ([`Firewall::process_burst`], judged in place), and
//! forwards what is allowed; a `reject` comes with the answer to send back
//! out of the port the packet came in by. It sweeps the tracker now and
//! then (`ctrack run` has a housekeeping thread do it), and may replace
//! the policy at any time from any thread ([`Firewall::set_policy`]).
//!
//! ```
//! use ctrack_core::{Config, CtState, FragConfig, Time, Tracker};
//! use ctrack_policy::firewall::{
//!     AclRef, Action, BurstOut, Decision, DropReason, Firewall, FwOutputs, FwStats, Stage,
//! };
//! use ctrack_policy::model::Policy;
//! use ctrack_wire::build::{Frame, L4};
//! use ctrack_wire::tcp::flags;
//!
//! // Port `web` takes HTTP from `client`, and answers with a RST any
//! // other TCP connection to it.
//! let policy = |client: &str| {
//!     let text = format!(
//!         "[[port]]\nname = \"web\"\naddresses = [\"02:00:00:00:00:01 10.0.0.1\"]\n\
//!          [[port]]\nname = \"client\"\naddresses = [\"02:00:00:00:00:02 10.0.0.2\"]\n\
//!          [[port]]\nname = \"other\"\naddresses = [\"02:00:00:00:00:03 10.0.0.3\"]\n\
//!          [[acl]]\nname = \"http\"\ndirection = \"to-lport\"\npriority = 1000\n\
//!          match = 'outport == \"web\" && ip4.src == {client} && tcp.dst == 80'\n\
//!          action = \"allow-related\"\n\
//!          [[acl]]\nname = \"no-tcp\"\ndirection = \"to-lport\"\npriority = 900\n\
//!          match = 'outport == \"web\" && tcp'\naction = \"reject\"\n"
//!     );
//!     Policy::from_str(&text, "web.toml").unwrap()
//! };
//! let mac = |n: u8| [0x02, 0, 0, 0, 0, n];
//! // A TCP segment from host `from` to host `to` (10.0.0.n at MAC n).
//! let tcp = |from: u8, to: u8, sport, dport, fl, seq, ack| {
//!     let l4 = L4::tcp_seg(sport, dport, fl, seq, ack, 65535, &[]);
//!     let mut f = Frame::v4([10, 0, 0, from], [10, 0, 0, to], l4);
//!     (f.eth_src, f.eth_dst) = (mac(from), mac(to));
//!     f.build()
//! };
//!
//! // One firewall for every worker; a frame's tag (here `()`) comes back
//! // with it.
//! let tracker = Tracker::new(Config::default());
//! let fw: Firewall<()> = Firewall::new(tracker, FragConfig::default(), policy("10.0.0.2"))?;
//! let now = Time::from_secs(1);
//!
//! // Frame by frame: the client's SYN meets the ACLs and commits the
//! // connection...
//! let mut outs = FwOutputs::default();
//! fw.process(tcp(2, 1, 40000, 80, flags::SYN, 100, 0), (), now, &mut outs);
//! let d = outs.out[0].decision;
//! assert_eq!((d.action, d.stage, d.acl), (Action::Allow, Stage::ToLport, AclRef::Acl(0)));
//! assert!(d.ct.unwrap().state.contains(CtState::NEW));
//! // ...and the server's answer passes on the session, meeting no ACL.
//! fw.process(tcp(1, 2, 80, 40000, flags::SYN | flags::ACK, 500, 101), (), now, &mut outs);
//! let d = outs.out[1].decision;
//! assert_eq!((d.action, d.stage), (Action::Allow, Stage::Session));
//!
//! // Another host may not reach the web port over TCP: rejected, and
//! // answered with a RST to send back to it.
//! fw.process(tcp(3, 1, 40001, 80, flags::SYN, 7, 0), (), now, &mut outs);
//! let rejected = &outs.out[2];
//! let d = rejected.decision;
//! assert_eq!((d.action, d.acl), (Action::Reject, AclRef::Acl(1)));
//! assert!(rejected.reply.is_some());
//!
//! // A burst, judged in place: the established connection's packets leave
//! // by its session, with no classification; a new connection's first
//! // packet meets the ACLs as frame by frame.
//! let mut burst = vec![
//!     tcp(2, 1, 40000, 80, flags::ACK, 101, 501),
//!     tcp(1, 2, 80, 40000, flags::ACK, 501, 101),
//!     tcp(2, 1, 40002, 80, flags::SYN, 300, 0),
//! ];
//! let mut decisions = vec![Decision::default(); burst.len()];
//! let (mut replies, mut stats) = (Vec::new(), FwStats::default());
//! let out = BurstOut { decisions: &mut decisions, replies: &mut replies, stats: &mut stats };
//! fw.process_burst(&mut burst, now, out);
//! let stages: Vec<_> = decisions.iter().map(|d| (d.action, d.stage)).collect();
//! assert_eq!(stages, [
//!     (Action::Allow, Stage::Session),
//!     (Action::Allow, Stage::Session),
//!     (Action::Allow, Stage::ToLport),
//! ]);
//!
//! // The workers' counters add up; the `http` ACL counts the packets of
//! // the connections it opened, as `ovs-ofctl dump-flows` would.
//! stats.merge(&outs.stats);
//! assert_eq!((stats.acls[0].conns, stats.acls[0].packets), (2, 5));
//! assert_eq!(stats.verdicts, [5, 0, 1]); // allow, drop, reject
//!
//! // A new policy, in force at once for every worker: HTTP from another
//! // client only. The connection it no longer allows is blocked (dropped
//! // and removed) at its next packet, whichever way that goes.
//! fw.set_policy(policy("10.0.0.9"))?;
//! let mut outs = FwOutputs::default();
//! assert_eq!(fw.tracker().table_len(), 2);
//! fw.process(tcp(1, 2, 80, 40000, flags::ACK, 501, 101), (), now, &mut outs);
//! let d = outs.out[0].decision;
//! assert_eq!((d.action, d.reason), (Action::Drop, Some(DropReason::Blocked)));
//! assert_eq!(fw.tracker().table_len(), 1);
//!
//! // Now and then, expire the connections whose time is up (the SYN no
//! // one answered, here), looking at most at `budget` records a call;
//! // `next` says when to call again.
//! let later = Time::from_secs(120);
//! let swept = fw.tracker().sweep(later, 1024, &mut stats.tracker);
//! assert_eq!((swept.expired, fw.tracker().table_len()), (1, 0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod burst;
mod compiled;
mod decision;
mod engine;
mod judge;
mod nd;
pub mod persist;
mod security;
mod session;
pub mod word;

pub use burst::BurstOut;
pub use compiled::{Compiled, FirstDecision, Kind, StageDecision, TIERS, rank};
pub use decision::{AclCounters, AclRef, Action, Decision, DropReason, FwStats, Stage};
pub use engine::{Firewall, FwOut, FwOutputs};
pub use nd::is_nd_or_mld;
