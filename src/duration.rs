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
            return Err(format!("'{text}' is not a valid duration; expected {ACCEPTED}"));
        }
        return Duration::try_from_secs_f64(secs)
            .ok()
            .filter(|d| *d <= MAX)
            .ok_or_else(|| format!("'{text}' is too long (at most {} s)", MAX.as_secs()));
    }
    match humantime::parse_duration(t) {
        Ok(d) if d <= MAX => Ok(d),
        Ok(_) => Err(format!("'{text}' is too long (at most {} s)", MAX.as_secs())),
        Err(_) => Err(format!("'{text}' is not a valid duration; expected {ACCEPTED}")),
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
        for bad in ["", "-1", "-1s", "abc", "5x", "nan", "inf", "1e30", "1000000000000h"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
