//! Human durations: `90s`, `15m`, `1h30m`, `0`.

use std::time::Duration;

/// Parses a human duration (`90s`, `15m`, `1h30m`, `2h 5m`, `500ms`) or a bare `0`.
///
/// A bare number other than `0` is refused: `30` could mean seconds or minutes.
pub fn parse(value: &str) -> Result<Duration, String> {
    let v = value.trim();
    if v.is_empty() {
        return Err("empty".into());
    }
    if v.chars().all(|c| c == '0') {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(v).map_err(|e| e.to_string())
}

/// Formats a duration compactly for logs and Events: `37m12s`, `2h`, `850ms`.
pub fn format(d: Duration) -> String {
    let total = d.as_secs();
    if total == 0 {
        return format!("{}ms", d.subsec_millis());
    }
    let (h, m, s) = (total / 3600, (total / 60) % 60, total % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_human_forms() {
        let table = [
            ("90s", 90),
            ("15m", 900),
            ("1h30m", 5400),
            ("1h 30m", 5400),
            ("2h", 7200),
            ("0", 0),
            ("000", 0),
            (" 45s ", 45),
            ("1d", 86400),
        ];
        for (input, secs) in table {
            assert_eq!(parse(input), Ok(Duration::from_secs(secs)), "{input}");
        }
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("1.5h"), Ok(Duration::from_secs(5400)));
    }

    #[test]
    fn refuses_ambiguous_and_garbage() {
        for bad in ["", " ", "30", "abc", "-5s", "5 parsecs", "h", "1h30", "∞"] {
            assert!(parse(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn formats_compactly() {
        assert_eq!(format(Duration::from_secs(37 * 60 + 12)), "37m12s");
        assert_eq!(format(Duration::from_secs(7200)), "2h");
        assert_eq!(format(Duration::from_secs(3723)), "1h2m3s");
        assert_eq!(format(Duration::from_millis(850)), "850ms");
        assert_eq!(format(Duration::from_millis(90_400)), "1m30s");
    }
}
