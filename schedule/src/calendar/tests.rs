//! Unit tests of `calendar` (a child module: they see its private items).

use super::*;

fn counts(text: &str) -> Result<Vec<(Option<String>, u32)>, String> {
    let c = counts_in(Some(text))?;
    Ok(c.into_iter()
        .map(|(p, n)| (p.map(|p| p.to_string()), n))
        .collect())
}

#[test]
fn an_event_names_counts_for_the_default_and_named_targets() {
    let gpu = |n| (Some("gpu".to_string()), n);
    assert_eq!(counts("Data 8 placeholders: 40"), Ok(vec![(None, 40)]));
    assert_eq!(
        counts("placeholders: 40\nplaceholders[gpu]: 4"),
        Ok(vec![(None, 40), gpu(4)])
    );
    // Any case, spaces free, `=` too; the first count of a target is kept.
    assert_eq!(
        counts("Placeholders [ GPU ] = 4, placeholders[gpu]: 9"),
        Ok(vec![gpu(4)])
    );
    assert_eq!(counts("placeholders[gpu]: 4"), Ok(vec![gpu(4)]));
    // A prose mention is no count, named or not.
    assert_eq!(counts("placeholders[gpu] in Kubernetes"), Ok(vec![]));
    for (bad, reason) in [
        (
            "placeholders[gpu]: lots",
            "`placeholders[gpu]:` is not followed by a whole number",
        ),
        (
            "placeholders[]: 4",
            "`placeholders[]`: a target's name is a DNS label",
        ),
        (
            "placeholders[g_pu]: 4",
            "`placeholders[g_pu]`: a target's name",
        ),
        ("placeholders[-gpu]: 4", "a DNS label"),
        (
            "placeholders: 100001",
            "`placeholders:` is not followed by a whole number from 0 to 100000",
        ),
    ] {
        let e = counts(bad).expect_err(bad);
        assert!(e.contains(reason), "{bad}: {e}");
    }
}

#[test]
fn the_summary_names_a_targets_count_before_the_description() {
    let text = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:x\r\n\
                SUMMARY:Course placeholders[gpu]: 2\r\n\
                DESCRIPTION:placeholders: 40\\nplaceholders[gpu]: 4\\nplaceholders[cpu-big]: 3\r\n\
                DTSTART:20260302T090000Z\r\nDTEND:20260302T100000Z\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
    let cal = Calendar::parse(text, Tz::UTC).unwrap();
    let from = DateTime::parse_from_rfc3339("2026-03-02T00:00:00Z")
        .unwrap()
        .to_utc();
    let occ = cal.occurrences(from, from + TimeDelta::days(1)).unwrap();
    let got: Vec<(Option<&str>, u32)> = occ.iter().map(|o| (o.pool.as_deref(), o.count)).collect();
    assert_eq!(got, [(Some("gpu"), 2), (None, 40), (Some("cpu-big"), 3)]);
}
