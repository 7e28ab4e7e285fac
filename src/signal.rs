//! Signal numbers and names, including the real-time range that nix's `Signal` enum cannot hold.

use std::fmt;

/// A signal number, real-time signals included; `0` only appears as a rewrite target.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Sig(i32);

const NAMES: &[(&str, i32)] = &[
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ILL", libc::SIGILL),
    ("TRAP", libc::SIGTRAP),
    ("ABRT", libc::SIGABRT),
    ("IOT", libc::SIGIOT),
    ("BUS", libc::SIGBUS),
    ("FPE", libc::SIGFPE),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("SEGV", libc::SIGSEGV),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("STKFLT", libc::SIGSTKFLT),
    ("CHLD", libc::SIGCHLD),
    ("CLD", libc::SIGCHLD),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("TTIN", libc::SIGTTIN),
    ("TTOU", libc::SIGTTOU),
    ("URG", libc::SIGURG),
    ("XCPU", libc::SIGXCPU),
    ("XFSZ", libc::SIGXFSZ),
    ("VTALRM", libc::SIGVTALRM),
    ("PROF", libc::SIGPROF),
    ("WINCH", libc::SIGWINCH),
    ("IO", libc::SIGIO),
    ("POLL", libc::SIGPOLL),
    ("PWR", libc::SIGPWR),
    ("SYS", libc::SIGSYS),
];

impl Sig {
    pub const HUP: Sig = Sig(libc::SIGHUP);
    pub const INT: Sig = Sig(libc::SIGINT);
    pub const QUIT: Sig = Sig(libc::SIGQUIT);
    pub const KILL: Sig = Sig(libc::SIGKILL);
    pub const TERM: Sig = Sig(libc::SIGTERM);
    pub const CHLD: Sig = Sig(libc::SIGCHLD);
    pub const CONT: Sig = Sig(libc::SIGCONT);
    pub const STOP: Sig = Sig(libc::SIGSTOP);
    pub const TSTP: Sig = Sig(libc::SIGTSTP);
    pub const PIPE: Sig = Sig(libc::SIGPIPE);
    pub const WINCH: Sig = Sig(libc::SIGWINCH);

    /// The kernel's first real-time signal as glibc, `kill -l`, docker and podman number it
    /// (`RTMIN+3` is systemd's 37). musl keeps 32 to 34 for itself and calls 35 SIGRTMIN, so
    /// libc's own answer would change what a name means with the libc vloer-run is built on.
    pub const RT_MIN: i32 = 34;
    /// The kernel's last signal (`_NSIG - 1` on every Linux target vloer-run builds for).
    pub const RT_MAX: i32 = 64;

    /// The highest signal number this system knows (SIGRTMAX).
    pub fn max() -> i32 {
        Sig::RT_MAX
    }

    /// A signal from a raw number, if it names a real signal (1..=SIGRTMAX).
    pub fn from_raw(n: i32) -> Option<Sig> {
        (1..=Sig::max()).contains(&n).then_some(Sig(n))
    }

    /// The "no signal" value, used by `--rewrite FROM:0` and the parent-death option.
    pub const NONE: Sig = Sig(0);

    pub fn raw(self) -> i32 {
        self.0
    }

    pub fn is_none(self) -> bool {
        self.0 == 0
    }

    /// Whether this is one of the job-control stop signals a terminal sends.
    pub fn is_job_control(self) -> bool {
        matches!(self.0, libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU)
    }

    /// Parses `TERM`, `SIGTERM`, `sigterm`, `15`, `RTMIN+2`, `SIGRTMAX-1`; `allow_zero` admits `0`.
    pub fn parse(text: &str, allow_zero: bool) -> Result<Sig, String> {
        let t = text.trim();
        let accepted = "a signal name such as TERM, SIGTERM or sigterm, RTMIN+N, or a number";
        if t.is_empty() {
            return Err(format!("empty signal; expected {accepted}"));
        }
        if let Ok(n) = t.parse::<i32>() {
            if n == 0 && allow_zero {
                return Ok(Sig::NONE);
            }
            return Sig::from_raw(n)
                .ok_or_else(|| format!("signal number {n} is out of range 1..={}", Sig::max()));
        }
        let upper = t.to_ascii_uppercase();
        let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
        if let Some(&(_, n)) = NAMES.iter().find(|(name, _)| *name == bare) {
            return Ok(Sig(n));
        }
        let rt = |base: i32, rest: &str, sign: i32| -> Option<Sig> {
            if rest.is_empty() {
                return Sig::from_raw(base);
            }
            let off: i32 = rest.parse().ok()?;
            let n = base + sign * off;
            (Sig::RT_MIN..=Sig::RT_MAX).contains(&n).then_some(Sig(n))
        };
        let parsed = if let Some(rest) = bare.strip_prefix("RTMIN") {
            match rest.strip_prefix('+') {
                Some(r) => rt(Sig::RT_MIN, r, 1),
                None if rest.is_empty() => rt(Sig::RT_MIN, "", 1),
                None => None,
            }
        } else if let Some(rest) = bare.strip_prefix("RTMAX") {
            match rest.strip_prefix('-') {
                Some(r) => rt(Sig::RT_MAX, r, -1),
                None if rest.is_empty() => rt(Sig::RT_MAX, "", -1),
                None => None,
            }
        } else {
            None
        };
        parsed.ok_or_else(|| format!("unknown signal '{text}'; expected {accepted}"))
    }

    /// The canonical name: `SIGTERM`, `SIGRTMIN+3`, or the number for a gap.
    pub fn name(self) -> String {
        if self.0 == 0 {
            return "0".to_string();
        }
        if let Some((name, _)) = NAMES
            .iter()
            .find(|(name, n)| *n == self.0 && !matches!(*name, "IOT" | "CLD" | "POLL"))
        {
            return format!("SIG{name}");
        }
        let (min, max) = (Sig::RT_MIN, Sig::RT_MAX);
        if (min..=max).contains(&self.0) {
            if self.0 - min <= max - self.0 {
                return if self.0 == min {
                    "SIGRTMIN".into()
                } else {
                    format!("SIGRTMIN+{}", self.0 - min)
                };
            }
            return if self.0 == max {
                "SIGRTMAX".into()
            } else {
                format!("SIGRTMAX-{}", max - self.0)
            };
        }
        self.0.to_string()
    }
}

impl fmt::Display for Sig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// The `--rewrite FROM:TO` table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rewrite {
    pub from: Sig,
    pub to: Sig,
}

impl Rewrite {
    pub fn parse(text: &str) -> Result<Rewrite, String> {
        let (from, to) = text.split_once(':').ok_or_else(|| {
            format!("'{text}' is not FROM:TO (for example TERM:QUIT, or INT:0 to drop)")
        })?;
        let from = Sig::parse(from, false)?;
        if matches!(from.0, libc::SIGKILL | libc::SIGSTOP | libc::SIGCHLD) {
            return Err(format!(
                "{from} cannot be rewritten: vloer-run never receives it as a forwardable signal"
            ));
        }
        Ok(Rewrite {
            from,
            to: Sig::parse(to, true)?,
        })
    }
}

impl Default for Sig {
    fn default() -> Self {
        Sig::NONE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        for t in ["TERM", "SIGTERM", "sigterm", "Term", "15", " 15 "] {
            assert_eq!(Sig::parse(t, false), Ok(Sig::TERM), "{t}");
        }
        // The numbers docker, podman and `kill -l` use, whichever libc vloer-run is built on.
        assert_eq!(Sig::parse("RTMIN", false).unwrap().raw(), 34);
        assert_eq!(Sig::parse("SIGRTMIN+3", false).unwrap().raw(), 37);
        assert_eq!(Sig::parse("sigrtmin+2", false).unwrap().raw(), 36);
        assert_eq!(Sig::parse("RTMAX-1", false).unwrap().raw(), 63);
        assert_eq!(Sig(37).name(), "SIGRTMIN+3");
        assert_eq!(Sig(33).name(), "33");
        assert_eq!(Sig::parse("0", true), Ok(Sig::NONE));
        assert!(Sig::parse("0", false).is_err());
        assert!(Sig::parse("65", false).is_err());
        assert!(Sig::parse("FOO", false).is_err());
        assert!(Sig::parse("RTMIN+99", false).is_err());
        assert!(Sig::parse("", false).is_err());
    }

    #[test]
    fn names_round_trip() {
        for n in 1..=Sig::max() {
            let s = Sig::from_raw(n).unwrap();
            if n == 32 || n == 33 {
                continue;
            }
            assert_eq!(Sig::parse(&s.name(), false), Ok(s), "{n} {}", s.name());
        }
    }

    /// Property tests: every input parses to the right signal or gets an error that says why.
    mod props {
        use super::*;
        use proptest::prelude::*;

        /// `name` in a random case, with or without a SIG prefix, maybe padded.
        fn spelled(name: &'static str) -> impl Strategy<Value = String> {
            (
                any::<bool>(),
                prop::collection::vec(any::<bool>(), 3 + name.len()),
                prop::sample::select(vec!["", " ", "\t"]),
            )
                .prop_map(move |(prefix, upper, pad)| {
                    let full = if prefix {
                        format!("SIG{name}")
                    } else {
                        name.to_string()
                    };
                    let cased: String = full
                        .chars()
                        .zip(upper)
                        .map(|(c, u)| {
                            if u {
                                c.to_ascii_uppercase()
                            } else {
                                c.to_ascii_lowercase()
                            }
                        })
                        .collect();
                    format!("{pad}{cased}{pad}")
                })
        }

        fn named() -> impl Strategy<Value = (String, i32)> {
            prop::sample::select(NAMES.to_vec())
                .prop_flat_map(|(name, n)| spelled(name).prop_map(move |s| (s, n)))
        }

        proptest! {
            #[test]
            fn names_in_any_case_with_or_without_sig((text, n) in named()) {
                prop_assert_eq!(Sig::parse(&text, false), Ok(Sig(n)));
            }

            #[test]
            fn numbers_in_range_parse_and_others_are_refused(n in any::<i64>()) {
                let got = Sig::parse(&n.to_string(), false);
                if (1..=Sig::max() as i64).contains(&n) {
                    prop_assert_eq!(got, Ok(Sig(n as i32)));
                } else {
                    let e = got.unwrap_err();
                    prop_assert!(e.contains("out of range") || e.contains("unknown signal"), "{n}: {e}");
                }
            }

            #[test]
            fn realtime_offsets(k in 0i32..64, from_max in any::<bool>()) {
                let (min, max) = (Sig::RT_MIN, Sig::RT_MAX);
                let (text, n) = if from_max { (format!("RTMAX-{k}"), max - k) } else { (format!("sigrtmin+{k}"), min + k) };
                let got = Sig::parse(&text, false);
                if (min..=max).contains(&n) {
                    prop_assert_eq!(got, Ok(Sig(n)));
                    prop_assert_eq!(Sig::parse(&Sig(n).name(), false), Ok(Sig(n)));
                } else {
                    prop_assert!(got.is_err(), "{text} gave {got:?}");
                }
            }

            #[test]
            fn any_text_parses_in_range_or_explains(text in any::<String>(), zero in any::<bool>()) {
                match Sig::parse(&text, zero) {
                    Ok(s) => prop_assert!((1..=Sig::max()).contains(&s.raw()) || (zero && s.is_none())),
                    Err(e) => prop_assert!(e.contains("signal"), "unclear error for {text:?}: {e}"),
                }
            }

            #[test]
            fn rewrites_parse_both_sides(from in 1..=64i32, to in 0..=64i32, by_name in any::<bool>()) {
                prop_assume!(from <= Sig::max() && to <= Sig::max());
                let show = |n: i32| if by_name && n != 0 { Sig(n).name() } else { n.to_string() };
                let got = Rewrite::parse(&format!("{}:{}", show(from), show(to)));
                if matches!(from, libc::SIGKILL | libc::SIGSTOP | libc::SIGCHLD) {
                    prop_assert!(got.unwrap_err().contains("cannot be rewritten"));
                } else {
                    prop_assert_eq!(got, Ok(Rewrite { from: Sig(from), to: Sig(to) }));
                }
            }

            #[test]
            fn any_rewrite_text_parses_or_explains(text in any::<String>()) {
                match Rewrite::parse(&text) {
                    Ok(r) => prop_assert!(!r.from.is_none() && (1..=Sig::max()).contains(&r.from.raw())),
                    Err(e) => prop_assert!(e.contains("FROM:TO") || e.contains("signal") || e.contains("cannot be rewritten"), "unclear error for {text:?}: {e}"),
                }
            }
        }
    }

    #[test]
    fn rewrite() {
        assert_eq!(Rewrite::parse("TERM:QUIT").unwrap().to.raw(), libc::SIGQUIT);
        assert!(Rewrite::parse("INT:0").unwrap().to.is_none());
        assert!(Rewrite::parse("TERM").is_err());
        assert!(Rewrite::parse("KILL:TERM").is_err());
    }
}
