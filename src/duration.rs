//! The DURATION grammar: a plain number of seconds (`2.5`) or humantime units (`500ms`, `1m30s`).

use std::time::Duration;

const ACCEPTED: &str = "a number of seconds (2.5) or a duration with units (500ms, 5s, 1m30s)";

/// Parses a duration; negative, infinite and absurdly large values are refused.
pub fn parse(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err(format!("empty duration; expected {ACCEPTED}"));
    }
    // humantime rejects a bare `5`, so the plain-number form is tried first.
    if let Ok(secs) = t.parse::<f64>() {
        if !secs.is_finite() || secs < 0.0 {
            return Err(format!(
                "'{text}' is not a valid duration; expected {ACCEPTED}"
            ));
        }
        return Duration::try_from_secs_f64(secs)
            .ok()
            .filter(|d| *d <= MAX)
            .ok_or_else(|| format!("'{text}' is too long (at most {} s)", MAX.as_secs()));
    }
    match humantime::parse_duration(t) {
        Ok(d) if d <= MAX => Ok(d),
        Ok(_) => Err(format!(
            "'{text}' is too long (at most {} s)",
            MAX.as_secs()
        )),
        Err(_) => Err(format!(
            "'{text}' is not a valid duration; expected {ACCEPTED}"
        )),
    }
}

/// A hundred years: long enough for any run, short enough that `Instant + d` cannot overflow.
pub const MAX: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("2.5"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse("5"), Ok(Duration::from_secs(5)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert_eq!(parse("0.000000001"), Ok(Duration::from_nanos(1)));
        for bad in [
            "",
            "-1",
            "-1s",
            "abc",
            "5x",
            "nan",
            "inf",
            "1e30",
            "1000000000000h",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    /// Property tests: every input parses to the right value or gets an error that says why.
    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn whole_units_parse_exactly(n in 0u64..1_000_000, unit in prop::sample::select(vec![("ms", 1u64), ("s", 1000), ("m", 60_000), ("h", 3_600_000)])) {
                let (suffix, ms) = unit;
                let want = Duration::from_millis(n * ms);
                match parse(&format!("{n}{suffix}")) {
                    Ok(d) => prop_assert_eq!(d, want),
                    Err(e) => prop_assert!(want > MAX && e.contains("too long"), "{n}{suffix}: {e}"),
                }
            }

            #[test]
            fn minutes_and_seconds_add_up(m in 0u64..10_000, s in 0u64..60) {
                prop_assert_eq!(parse(&format!("{m}m{s}s")), Ok(Duration::from_secs(m * 60 + s)));
            }

            #[test]
            fn plain_seconds_with_millis(ms in 0u64..100_000_000, pad in prop::sample::select(vec!["", " ", "\t"])) {
                let text = format!("{pad}{}.{:03}{pad}", ms / 1000, ms % 1000);
                prop_assert_eq!(parse(&text), Ok(Duration::from_millis(ms)));
            }

            #[test]
            fn negative_values_are_refused(n in 1u64..u64::MAX, suffix in prop::sample::select(vec!["", "s", "ms", ".5"])) {
                let text = format!("-{n}{suffix}");
                prop_assert!(parse(&text).is_err(), "{text} parsed");
            }

            #[test]
            fn anything_else_parses_within_bounds_or_explains(text in any::<String>()) {
                match parse(&text) {
                    Ok(d) => prop_assert!(d <= MAX),
                    Err(e) => prop_assert!(
                        (e.contains("expected") && e.contains("500ms")) || e.contains("too long"),
                        "unclear error for {text:?}: {e}"
                    ),
                }
            }

            #[test]
            fn number_like_text_never_panics(text in "[-+]?[0-9]{0,30}(\\.[0-9]{0,30})?(e[-+]?[0-9]{1,4})?(ns|us|ms|s|m|h|d|w|y)?") {
                match parse(&text) {
                    Ok(d) => prop_assert!(d <= MAX),
                    Err(e) => prop_assert!(!e.is_empty()),
                }
            }
        }
    }
}
