//! The JSON verdict (schema 1): built once per run, fitted to 4096 bytes, written to its sink.

mod sink;
pub use sink::Sink;

use crate::proctable::Proc;
use crate::signal::Sig;
use serde::Serialize;
use std::collections::BTreeMap;

/// A Kubernetes termination message holds at most this many bytes; the newline counts.
pub const MAX_BYTES: usize = 4096;
const MAX_ERROR_CHARS: usize = 1024;

/// Why the stop began.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    ChildExited,
    Signal,
    Timeout,
    Control,
    ParentDied,
    /// vloer-run itself failed after the child started (`error` says how); the contract has no
    /// reason for this, and naming another would be a lie.
    Error,
}

impl Reason {
    /// The reason a stop beginning now for `new` reports, when `recorded` is already there (a
    /// watch after the child's exit, `--when-child-exits wait`): the watch keeps its reason unless
    /// something else (a timeout, a signal, a control request) ends it first.
    pub fn of_stop(recorded: Option<Reason>, new: Reason) -> Reason {
        match (recorded, new) {
            (Some(r), Reason::ChildExited) => r,
            _ => new,
        }
    }

    /// The reason in words, for `-v`.
    pub fn words(self) -> &'static str {
        match self {
            Reason::ChildExited => "the child exited",
            Reason::Signal => "a stop signal arrived",
            Reason::Timeout => "the timeout passed",
            Reason::Control => "a control client asked",
            Reason::ParentDied => "the parent process exited",
            Reason::Error => "vloer-run failed",
        }
    }
}

/// The main child's end, as far as it is known.
#[derive(Clone, Debug, Serialize, Default, PartialEq, Eq)]
pub struct ChildReport {
    pub pid: Option<i32>,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
}

/// The verdict, schema 1, field for field as the contract lists them (the groups are flattened
/// into one object, in this order).
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    #[serde(flatten)]
    pub proof: Proof,
    #[serde(flatten)]
    pub cause: Cause,
    pub child: ChildReport,
    pub exit_code: i32,
    pub scope: &'static str,
    #[serde(flatten)]
    pub effort: Effort,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// With `--sweep`: the folders, who held or named them, who could not be looked at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sweep: Option<crate::sweep::Report>,
    pub schema: u32,
}

/// Whether the scope was proven empty, and who is left when it was not.
#[derive(Clone, Debug, Serialize, Default)]
pub struct Proof {
    pub stopped: bool,
    pub survivors: Vec<Proc>,
    #[serde(skip_serializing_if = "is_zero")]
    pub survivors_omitted: usize,
}

/// What started the stop.
#[derive(Clone, Debug, Serialize)]
pub struct Cause {
    pub reason: Reason,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
}

/// What the stop took: signals sent, zombies reaped, time.
#[derive(Clone, Debug, Serialize, Default)]
pub struct Effort {
    /// How many processes got each signal: by name in the JSON, in the names' order.
    #[serde(serialize_with = "by_name")]
    pub sent: BTreeMap<Sig, u64>,
    pub reaped: u64,
    pub elapsed_ms: u64,
}

fn by_name<S: serde::Serializer>(sent: &BTreeMap<Sig, u64>, s: S) -> Result<S::Ok, S::Error> {
    let named: BTreeMap<String, u64> = sent.iter().map(|(sig, n)| (sig.name(), *n)).collect();
    named.serialize(s)
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Verdict {
    /// One line of JSON with its newline, at most 4096 bytes: survivors are dropped from the end
    /// (and counted in `survivors_omitted`) until it fits.
    pub fn to_line(&self) -> String {
        let mut v = self.clone();
        if let Some(s) = &mut v.sweep {
            // The sweep's lists get at most a quarter of the line: the proof's own survivors,
            // reason and error come first.
            s.fit(MAX_BYTES / 4);
        }
        if let Some(e) = &mut v.error {
            if e.chars().count() > MAX_ERROR_CHARS {
                *e = e.chars().take(MAX_ERROR_CHARS).collect::<String>() + "…";
            }
        }
        loop {
            let line = serde_json::to_string(&v).expect("a verdict always serialises") + "\n";
            if line.len() <= MAX_BYTES {
                return line;
            }
            if v.proof.survivors.is_empty() {
                // Only the error can still be too long: in JSON a control character takes six
                // bytes and many others three or four, so 1024 characters may be far over 4096.
                let Some(e) = v.error.as_mut() else {
                    return line;
                };
                let body = e.strip_suffix('…').unwrap_or(e);
                if body.is_empty() {
                    return line;
                }
                // Every character is at least one byte of JSON, so this always shrinks the line.
                let keep = body
                    .chars()
                    .count()
                    .saturating_sub(line.len() - MAX_BYTES + 1);
                *e = body.chars().take(keep).collect::<String>() + "…";
                continue;
            }
            // Drop in proportion to the excess so 5000 survivors do not take 5000 passes.
            let over = line.len() - MAX_BYTES;
            let per = (line.len() / (v.proof.survivors.len() + 1)).max(1);
            let drop = (over / per).clamp(1, v.proof.survivors.len());
            let keep = v.proof.survivors.len() - drop;
            v.proof.survivors.truncate(keep);
            v.proof.survivors_omitted += drop;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::unistd::Pid;

    fn verdict(n: usize) -> Verdict {
        Verdict {
            proof: Proof {
                stopped: n == 0,
                survivors: (0..n)
                    .map(|i| Proc {
                        pid: Pid::from_raw(100000 + i as i32),
                        ppid: Pid::from_raw(1),
                        pgid: Pid::from_raw(1),
                        sid: Pid::from_raw(1),
                        state: "S".into(),
                        comm: "a \"weird\"\u{1}name".into(),
                        starttime: 0,
                        threads: 1,
                        origin_unknown: None,
                    })
                    .collect(),
                survivors_omitted: 0,
            },
            cause: Cause {
                reason: Reason::Signal,
                signal: Some("SIGTERM".into()),
            },
            child: ChildReport {
                pid: Some(5),
                exit_code: None,
                signal: Some("SIGKILL".into()),
            },
            exit_code: 125,
            scope: "tree",
            effort: Effort {
                sent: BTreeMap::from([(Sig::TERM, 3)]),
                reaped: 2,
                elapsed_ms: 10,
            },
            error: Some("x".repeat(10_000)),
            sweep: None,
            schema: 1,
        }
    }

    #[test]
    fn the_fields_come_in_the_contracts_order() {
        let line = verdict(1).to_line();
        let keys = [
            "stopped",
            "survivors",
            "reason",
            "signal",
            "child",
            "exit_code",
            "scope",
            "sent",
            "reaped",
            "elapsed_ms",
            "error",
            "schema",
        ];
        let at: Vec<usize> = keys
            .iter()
            .map(|k| {
                line.find(&format!("\"{k}\":"))
                    .unwrap_or_else(|| panic!("{k}: {line}"))
            })
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{line}");
    }

    /// Property tests: whatever the run found, the verdict is one line of valid JSON that fits.
    mod props {
        use super::*;
        use proptest::prelude::*;

        /// Text as hostile as JSON gets: control characters (six bytes each once escaped), quotes,
        /// backslashes, three- and four-byte characters.
        fn nasty(max: usize) -> impl Strategy<Value = String> {
            let ch = prop_oneof![2 => any::<char>(), 4 => (0u8..0x20).prop_map(char::from), 1 => Just('"'), 1 => Just('\\'), 1 => Just('€'), 1 => Just('𝄞')];
            prop::collection::vec(ch, 0..max).prop_map(String::from_iter)
        }

        fn survivor() -> impl Strategy<Value = Proc> {
            let state = prop::sample::select(vec!["R", "S", "D", "T", "t", "I"]);
            (
                any::<i32>(),
                any::<i32>(),
                any::<i32>(),
                any::<i32>(),
                state,
                nasty(20),
            )
                .prop_map(|(pid, ppid, pgid, sid, state, comm)| Proc {
                    pid: Pid::from_raw(pid),
                    ppid: Pid::from_raw(ppid),
                    pgid: Pid::from_raw(pgid),
                    sid: Pid::from_raw(sid),
                    state: state.into(),
                    comm,
                    starttime: 0,
                    threads: 1,
                    origin_unknown: None,
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            #[test]
            fn every_verdict_is_one_line_of_json_within_4096_bytes(
                survivors in prop::collection::vec(survivor(), 0..300),
                error in prop::option::of(nasty(6000)),
                signal in prop::option::of(nasty(40)),
                sent in prop::collection::btree_map((1..=64i32).prop_filter_map("a signal", Sig::from_raw), any::<u64>(), 0..8),
                stopped in any::<bool>(),
                exit_code in any::<i32>(),
                reaped in any::<u64>(),
            ) {
                let n = survivors.len();
                let base = verdict(0);
                let v = Verdict {
                    proof: Proof { stopped, survivors: survivors.clone(), survivors_omitted: 0 },
                    cause: Cause { signal, ..base.cause.clone() },
                    effort: Effort { sent, reaped, ..base.effort.clone() },
                    error: error.clone(),
                    exit_code,
                    ..base
                };
                let line = v.to_line();
                prop_assert!(line.len() <= MAX_BYTES, "{} bytes", line.len());
                prop_assert!(line.ends_with('\n') && line.matches('\n').count() == 1, "not one line: {line:?}");
                let j: serde_json::Value = serde_json::from_str(&line).map_err(|e| TestCaseError::fail(format!("{e}: {line}")))?;
                prop_assert_eq!(&j["stopped"], &serde_json::json!(stopped));
                prop_assert_eq!(&j["exit_code"], &serde_json::json!(exit_code));
                prop_assert_eq!(&j["reaped"], &serde_json::json!(reaped));
                prop_assert_eq!(&j["schema"], &serde_json::json!(1));
                // Survivors are dropped from the end, and every dropped one is counted.
                let kept = j["survivors"].as_array().unwrap();
                let omitted = j.get("survivors_omitted").map_or(0, |o| o.as_u64().unwrap() as usize);
                prop_assert_eq!(kept.len() + omitted, n);
                for (k, s) in kept.iter().zip(&survivors) {
                    prop_assert_eq!(&k["pid"], &serde_json::json!(s.pid.as_raw()));
                    prop_assert_eq!(&k["comm"], &serde_json::json!(s.comm));
                }
                // An error is never lost, only shortened (ending in an ellipsis).
                match (&error, j.get("error")) {
                    (None, None) => {}
                    (Some(e), Some(out)) => {
                        let out = out.as_str().unwrap();
                        let cut = out.strip_suffix('…').unwrap_or(out);
                        prop_assert!(out == e || (out.ends_with('…') && e.starts_with(cut)), "{out:?} is not a prefix of the error");
                    }
                    (e, out) => prop_assert!(false, "error {e:?} became {out:?}"),
                }
            }
        }
    }

    #[test]
    fn sent_names_each_signal_in_the_names_order() {
        let mut v = verdict(0);
        v.effort.sent = BTreeMap::from([(Sig::TERM, 3), (Sig::KILL, 1), (Sig::CONT, 2)]);
        assert!(
            v.to_line()
                .contains(r#""sent":{"SIGCONT":2,"SIGKILL":1,"SIGTERM":3},"#),
            "{}",
            v.to_line()
        );
    }

    #[test]
    fn fits_in_4096_bytes() {
        for n in [0, 1, 10, 300, 5000] {
            let line = verdict(n).to_line();
            assert!(line.len() <= MAX_BYTES, "{n}: {}", line.len());
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            let kept = v["survivors"].as_array().unwrap().len();
            let omitted = v
                .get("survivors_omitted")
                .and_then(|x| x.as_u64())
                .unwrap_or(0) as usize;
            assert_eq!(kept + omitted, n);
            assert_eq!(v.get("survivors_omitted").is_none(), omitted == 0);
        }
    }
}

#[cfg(test)]
mod reason_tests {
    use super::Reason;

    #[test]
    fn a_stop_names_what_began_it_and_a_watch_keeps_the_childs_exit() {
        assert_eq!(Reason::of_stop(None, Reason::Signal), Reason::Signal);
        assert_eq!(
            Reason::of_stop(None, Reason::ChildExited),
            Reason::ChildExited
        );
        let watching = Some(Reason::ChildExited);
        assert_eq!(Reason::of_stop(watching, Reason::Timeout), Reason::Timeout);
        assert_eq!(Reason::of_stop(watching, Reason::Control), Reason::Control);
        assert_eq!(
            Reason::of_stop(watching, Reason::ChildExited),
            Reason::ChildExited
        );
    }
}
