//! Tables for the schedule, time passed in: windows, zones and a daylight-saving change,
//! recurrence, overlapping events, lead time, bounds, and what is refused.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use selfdestruct_schedule::{Baseline, Calendar, Cause, Schedule, Tz};

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn schedule(baseline: &str, tz: Tz) -> Schedule {
    Schedule {
        baseline: Baseline::parse(baseline).unwrap(),
        tz,
        lead: Duration::from_secs(600),
        min: 0,
        max: 1000,
    }
}

/// The count in force at `now` with the calendar's occurrences around it.
fn eval(s: &Schedule, cal: &Calendar, now: DateTime<Utc>) -> selfdestruct_schedule::InForce {
    let day = chrono::TimeDelta::days(1);
    let occ = cal.occurrences(now - day, now + day).unwrap();
    s.in_force(&occ, now)
}

fn ics(events: &str) -> String {
    format!("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\n{events}END:VCALENDAR\r\n")
}

fn event(extra: &str) -> String {
    format!("BEGIN:VEVENT\r\nUID:x\r\nDTSTAMP:20260101T000000Z\r\n{extra}END:VEVENT\r\n")
}

#[test]
fn baseline_windows_first_rule_wins() {
    let s = schedule(
        "Mon-Fri 08:00-18:00 = 12; Sat,Sun 10:00-12:00 = 5; * = 2",
        Tz::UTC,
    );
    // 2026-03-02 is a Monday.
    for (at, want) in [
        ("2026-03-02T07:59:00Z", 2),
        ("2026-03-02T08:00:00Z", 12),
        ("2026-03-02T17:59:59Z", 12),
        ("2026-03-02T18:00:00Z", 2),
        ("2026-03-06T12:00:00Z", 12), // Friday
        ("2026-03-07T11:00:00Z", 5),  // Saturday
        ("2026-03-08T12:00:00Z", 2),  // Sunday, after the window
    ] {
        assert_eq!(s.in_force(&[], utc(at)).count, want, "{at}");
    }
    // No rule: 0.
    let s = schedule("Mon 09:00-10:00 = 3", Tz::UTC);
    let f = s.in_force(&[], utc("2026-03-03T09:30:00Z"));
    assert_eq!((f.count, f.cause), (0, Cause::NoRule));
}

#[test]
fn baseline_grammar_round_trips_and_wraps() {
    for (text, shown) in [
        (
            "mon-fri 08:00-18:00=12;*=2",
            "Mon-Fri 08:00-18:00 = 12; * = 2",
        ),
        ("Fri-Mon = 4", "Mon,Fri-Sun = 4"),
        ("* 00:00-24:00 = 1", "* = 1"),
        (
            "Tue 09:00-24:00 = 7\n# comment\nWed = 1",
            "Tue 09:00-24:00 = 7; Wed = 1",
        ),
        ("", ""),
    ] {
        let b = Baseline::parse(text).unwrap();
        assert_eq!(b.to_string(), shown, "{text}");
        assert_eq!(Baseline::parse(shown).unwrap(), b);
    }
}

#[test]
fn baseline_refusals_name_the_rule_and_reason() {
    for (text, number, reason) in [
        ("Mon-Fri 08:00-18:00 12", 1, "expected `DAYS"),
        ("* = 2; Mon 18:00-08:00 = 3", 2, "must end after it starts"),
        ("Mon 8:00-18:00 = 3", 1, "is no time"),
        ("Mon 08:00-24:30 = 3", 1, "is no time"),
        ("Monday = 3", 1, "is no day"),
        ("Mon = -1", 1, "is not a whole number"),
        ("Mon = 100001", 1, "is not a whole number"),
        ("* = +5", 1, "is not a whole number"),
        ("Mon 08:00-09:00 extra = 1", 1, "unexpected"),
        (" = 1", 1, "no days"),
    ] {
        let e = Baseline::parse(text).unwrap_err();
        assert_eq!(e.number, number, "{text}: {e}");
        assert!(e.to_string().contains(reason), "{text}: {e}");
    }
}

#[test]
fn windows_follow_the_zone_across_a_daylight_saving_change() {
    let s = schedule(
        "Mon-Fri 08:00-18:00 = 12; * = 2",
        "Europe/Berlin".parse().unwrap(),
    );
    // Europe/Berlin: CET (UTC+1) until 2026-03-29 02:00, then CEST (UTC+2).
    for (at, want) in [
        ("2026-03-27T07:00:00Z", 12), // Friday 08:00 CET
        ("2026-03-27T06:59:00Z", 2),
        ("2026-03-27T17:00:00Z", 2),  // 18:00 CET
        ("2026-03-30T06:00:00Z", 12), // Monday 08:00 CEST
        ("2026-03-30T05:59:00Z", 2),
        ("2026-03-30T15:59:00Z", 12), // 17:59 CEST
        ("2026-03-30T16:00:00Z", 2),
    ] {
        assert_eq!(s.in_force(&[], utc(at)).count, want, "{at}");
    }
    // New York on the same instants: another zone, another answer.
    let ny = schedule(
        "Mon-Fri 08:00-18:00 = 12; * = 2",
        "America/New_York".parse().unwrap(),
    );
    assert_eq!(ny.in_force(&[], utc("2026-03-27T07:00:00Z")).count, 2);
    assert_eq!(ny.in_force(&[], utc("2026-03-27T12:00:00Z")).count, 12);
}

#[test]
fn recurring_event_in_its_zone_through_a_daylight_saving_change() {
    // Every Monday 09:00-10:30 Berlin time, from 2026-03-16, except 2026-04-06.
    let cal = ics(&event(
        "SUMMARY:Lecture placeholders: 40\r\n\
         DTSTART;TZID=Europe/Berlin:20260316T090000\r\n\
         DTEND;TZID=Europe/Berlin:20260316T103000\r\n\
         RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=10\r\n\
         EXDATE;TZID=Europe/Berlin:20260406T090000\r\n",
    ));
    let cal = Calendar::parse(&cal, Tz::UTC).unwrap();
    let s = schedule("* = 2", Tz::UTC);
    for (at, want) in [
        ("2026-03-16T08:00:00Z", 40), // 09:00 CET
        ("2026-03-16T07:50:00Z", 40), // lead time: 10 minutes before
        ("2026-03-16T07:49:59Z", 2),
        ("2026-03-16T09:29:59Z", 40),
        ("2026-03-16T09:30:00Z", 2),  // its end
        ("2026-03-30T07:00:00Z", 40), // 09:00 CEST after the change
        ("2026-03-30T08:29:00Z", 40),
        ("2026-03-30T08:30:00Z", 2),
        ("2026-04-06T07:30:00Z", 2), // EXDATE
        ("2026-04-13T07:30:00Z", 40),
        ("2026-05-25T07:30:00Z", 2), // after COUNT=10 (the last is 2026-05-18... minus the EXDATE)
        ("2026-03-17T08:00:00Z", 2), // a Tuesday
    ] {
        let f = eval(&s, &cal, utc(at));
        assert_eq!(f.count, want, "{at}: {f}");
        if want == 40 {
            assert!(
                f.to_string().contains("\"Lecture placeholders: 40\""),
                "{f}"
            );
        }
    }
}

#[test]
fn overlapping_events_take_the_largest_and_baseline_the_rest() {
    let cal = ics(&format!(
        "{}{}{}",
        event(
            "SUMMARY:Workshop\r\nDESCRIPTION:room A\\nplaceholders: 30\r\n\
             DTSTART:20260302T090000Z\r\nDTEND:20260302T170000Z\r\n"
        ),
        event(
            "SUMMARY:Exam (Placeholders = 50)\r\n\
             DTSTART:20260302T130000Z\r\nDTEND:20260302T150000Z\r\n"
        ),
        event("SUMMARY:Staff meeting\r\nDTSTART:20260302T100000Z\r\nDTEND:20260302T110000Z\r\n"),
    ));
    let cal = Calendar::parse(&cal, Tz::UTC).unwrap();
    assert_eq!(cal.events.len(), 2, "the event without a count is ignored");
    let s = schedule("Mon-Fri 08:00-18:00 = 12; * = 2", Tz::UTC);
    for (at, want, cause) in [
        (
            "2026-03-02T08:30:00Z",
            12,
            "baseline window `Mon-Fri 08:00-18:00 = 12`",
        ),
        ("2026-03-02T08:50:00Z", 30, "Workshop"),
        ("2026-03-02T12:50:00Z", 50, "Exam"),
        ("2026-03-02T14:59:00Z", 50, "Exam"),
        ("2026-03-02T15:00:00Z", 30, "Workshop"),
        ("2026-03-02T17:00:00Z", 12, "baseline"),
        ("2026-03-02T18:00:00Z", 2, "baseline window `* = 2`"),
    ] {
        let f = eval(&s, &cal, utc(at));
        assert_eq!(f.count, want, "{at}: {f}");
        assert!(f.to_string().contains(cause), "{at}: {f}");
    }
}

#[test]
fn lead_time_is_a_setting() {
    let cal = ics(&event(
        "SUMMARY:placeholders: 8\r\nDTSTART:20260302T090000Z\r\nDTEND:20260302T100000Z\r\n",
    ));
    let cal = Calendar::parse(&cal, Tz::UTC).unwrap();
    let mut s = schedule("", Tz::UTC);
    for (lead, at, want) in [
        (0, "2026-03-02T08:59:59Z", 0),
        (0, "2026-03-02T09:00:00Z", 8),
        (1800, "2026-03-02T08:30:00Z", 8),
        (1800, "2026-03-02T08:29:59Z", 0),
        (1800, "2026-03-02T10:00:00Z", 0),
    ] {
        s.lead = Duration::from_secs(lead);
        assert_eq!(eval(&s, &cal, utc(at)).count, want, "lead {lead}s at {at}");
    }
}

#[test]
fn bounds_raise_and_cap() {
    let cal = ics(&event(
        "SUMMARY:placeholders: 80\r\nDTSTART:20260302T090000Z\r\nDTEND:20260302T100000Z\r\n",
    ));
    let cal = Calendar::parse(&cal, Tz::UTC).unwrap();
    let mut s = schedule("* = 1", Tz::UTC);
    s.min = 3;
    s.max = 50;
    let low = eval(&s, &cal, utc("2026-03-02T11:00:00Z"));
    assert_eq!((low.count, low.bounded_from), (3, Some(1)));
    assert!(low.to_string().contains("raised to the minimum 3"), "{low}");
    let high = eval(&s, &cal, utc("2026-03-02T09:30:00Z"));
    assert_eq!((high.count, high.bounded_from), (50, Some(80)));
    assert!(
        high.to_string().contains("capped at the maximum 50"),
        "{high}"
    );
}

#[test]
fn floating_and_all_day_events_are_in_the_schedule_zone() {
    let cal = ics(&format!(
        "{}{}",
        event("SUMMARY:placeholders: 5\r\nDTSTART:20260302T090000\r\nDTEND:20260302T100000\r\n"),
        event(
            "SUMMARY:Hackathon placeholders: 20\r\n\
             DTSTART;VALUE=DATE:20260304\r\nDTEND;VALUE=DATE:20260306\r\n"
        ),
    ));
    let tz: Tz = "America/Los_Angeles".parse().unwrap();
    let cal = Calendar::parse(&cal, tz).unwrap();
    let s = schedule("", tz);
    // 09:00 in Los Angeles (PST, UTC-8) is 17:00 UTC.
    assert_eq!(eval(&s, &cal, utc("2026-03-02T17:30:00Z")).count, 5);
    assert_eq!(eval(&s, &cal, utc("2026-03-02T09:30:00Z")).count, 0);
    // Two days from local midnight, with the lead time before it.
    assert_eq!(eval(&s, &cal, utc("2026-03-04T07:55:00Z")).count, 20);
    assert_eq!(eval(&s, &cal, utc("2026-03-06T07:59:00Z")).count, 20);
    assert_eq!(eval(&s, &cal, utc("2026-03-06T08:00:00Z")).count, 0);
}

#[test]
fn one_bad_event_is_skipped_with_its_line_and_reason_and_the_others_count() {
    let good = "SUMMARY:placeholders: 5\r\nDTSTART:20260302T090000Z\r\nDTEND:20260302T100000Z\r\n";
    let e = Calendar::parse("<html>502 Bad Gateway</html>", Tz::UTC).unwrap_err();
    assert_eq!(e.line, None, "{e}");
    assert!(e.to_string().contains("no BEGIN:VCALENDAR"), "{e}");
    for (bad, line, reason) in [
        (
            "SUMMARY:placeholders: lots\r\nDTSTART:20260302T090000Z\r\nDTEND:20260302T100000Z\r\n",
            14,
            "not followed by a whole number",
        ),
        (
            "SUMMARY:placeholders: 5\r\nDTSTART:20260302T090000Z\r\n",
            15,
            "no DTEND",
        ),
        (
            "SUMMARY:placeholders: 5\r\nDTSTART:20260302T090000Z\r\nDTEND:20260302T080000Z\r\n",
            16,
            "not after DTSTART",
        ),
        (
            "SUMMARY:placeholders: 5\r\nDTSTART:20260302T090000Z\r\nDTEND:20260302T100000Z\r\nRRULE:FREQ=SOMETIMES\r\n",
            17,
            "recurrence refused",
        ),
        (
            "SUMMARY:placeholders: 5\r\nDTSTART;TZID=Mars/Olympus:20260302T090000\r\nDTEND:20260302T100000Z\r\n",
            15,
            "no IANA or Windows time zone name",
        ),
        (
            "SUMMARY:placeholders: 5\r\nDTSTART:tomorrow\r\nDTEND:20260302T100000Z\r\n",
            15,
            "is no date or date-time",
        ),
    ] {
        // The bad event between two good ones: it alone is skipped.
        let text = ics(&format!("{}{}{}", event(good), event(bad), event(good)));
        let cal = Calendar::parse(&text, Tz::UTC).unwrap();
        assert_eq!(cal.events.len(), 2, "{text}");
        let [e] = &cal.skipped[..] else {
            panic!("{:?}", cal.skipped)
        };
        assert_eq!(e.line, Some(line), "{e}\n{text}");
        assert!(e.to_string().contains(reason), "{e}");
    }
}

#[test]
fn recurrences_are_stepped_through_within_a_bound() {
    // Every minute since 2000: too many occurrences to step through: refused.
    let ancient = ics(&event(
        "SUMMARY:placeholders: 3\r\nDTSTART:20000101T000000Z\r\nDTEND:20000101T000030Z\r\nRRULE:FREQ=MINUTELY\r\n",
    ));
    let cal = Calendar::parse(&ancient, Tz::UTC).unwrap();
    let now = Utc.with_ymd_and_hms(2026, 3, 2, 9, 0, 10).unwrap();
    let e = cal.occurrences(now, now).unwrap_err();
    assert!(e.to_string().contains("occurrences to step through"), "{e}");
    // Every minute since the day before: fine.
    let recent = ics(&event(
        "SUMMARY:placeholders: 3\r\nDTSTART:20260301T000000Z\r\nDTEND:20260301T000030Z\r\nRRULE:FREQ=MINUTELY\r\n",
    ));
    let cal = Calendar::parse(&recent, Tz::UTC).unwrap();
    let s = schedule("", Tz::UTC);
    assert_eq!(eval(&s, &cal, now).count, 3);
    assert_eq!(
        eval(&s, &cal, now + chrono::TimeDelta::seconds(25)).count,
        3
    );
}

#[test]
fn a_large_shared_calendar_is_read_piece_by_piece_keeping_only_events_with_a_count() {
    use selfdestruct_schedule::{Filter, Filtered};
    let feed =
        |text: &str, piece: usize| -> Result<Filtered, selfdestruct_schedule::CalendarError> {
            let mut f = Filter::new();
            for chunk in text.as_bytes().chunks(piece) {
                f.push(chunk)?;
            }
            f.finish()
        };
    // 4 MiB of a shared calendar: a VTIMEZONE, thousands of events without a count, and
    // two with one, the second's mark folded across two lines.
    let filler = "DESCRIPTION:a seminar of the department, room 4, with coffee and cake and a long text to fill the line\r\n";
    let mut body = String::from(
        "BEGIN:VTIMEZONE\r\nTZID:Europe/Berlin\r\nBEGIN:STANDARD\r\nDTSTART:19701025T030000\r\nEND:STANDARD\r\nEND:VTIMEZONE\r\n",
    );
    let mut n = 0;
    while body.len() < 4 << 20 {
        body.push_str(&event(&format!(
            "SUMMARY:Seminar {n}\r\n{filler}DTSTART:20260302T100000Z\r\nDTEND:20260302T110000Z\r\n"
        )));
        n += 1;
        if n == 100 {
            body.push_str(&event(
                "SUMMARY:Lecture placeholders: 40\r\nDTSTART:20260302T090000Z\r\nDTEND:20260302T100000Z\r\n",
            ));
        }
    }
    body.push_str(&event(
        "SUMMARY:Lab place\r\n holders: 30\r\nDTSTART:20260302T140000Z\r\nDTEND:20260302T150000Z\r\n",
    ));
    let text = ics(&body);
    for piece in [1, 7, 4096, 1 << 20] {
        let kept = feed(&text, piece).unwrap();
        let bytes: usize = kept
            .events
            .iter()
            .chain(&kept.zones)
            .map(|k| k.text.len())
            .sum();
        assert!(bytes < 1024, "{bytes} bytes kept");
        let cal = Calendar::parse_filtered(&kept, Tz::UTC).unwrap();
        let names: Vec<&str> = cal.events.iter().map(|e| &*e.name).collect();
        assert_eq!(names, ["Lecture placeholders: 40", "Lab placeholders: 30"]);
        let counts: Vec<u32> = cal.events.iter().map(|e| e.counts[0].1).collect();
        assert_eq!(counts, [40, 30]);
    }
    // A skipped event's line is of the text as read, not of what was kept.
    let bad = text.replace("holders: 30", "holders: lots");
    let line = bad.lines().position(|l| l == "SUMMARY:Lab place").unwrap() + 1;
    let e = &Calendar::parse(&bad, Tz::UTC).unwrap().skipped[0];
    assert_eq!(e.line, Some(line), "{e}");
    assert!(
        e.to_string().contains("not followed by a whole number"),
        "{e}"
    );
}

#[test]
fn the_filter_bounds_an_event_a_line_and_the_events_kept() {
    use selfdestruct_schedule::filter::{MAX_EVENT, MAX_KEPT};
    // One event longer than the bound, with or without a count: refused at its BEGIN line.
    let long = format!("X-NOTE:{}\r\n", "a".repeat(1000)).repeat(MAX_EVENT / 1000 + 1);
    let one = event(
        "SUMMARY:Lecture placeholders: 4\r\nDTSTART:20260302T090000Z\r\nDTEND:20260302T100000Z\r\n",
    );
    let text = ics(&(event(&format!("SUMMARY:Seminar placeholders: 3\r\n{long}")) + &one));
    let cal = Calendar::parse(&text, Tz::UTC).unwrap();
    assert_eq!(cal.events.len(), 1, "the next event counts");
    assert_eq!(cal.skipped[0].line, Some(4), "{:?}", cal.skipped);
    assert!(cal.skipped[0].reason.contains("an event longer than"));
    // One line longer than the bound: in an event with a count, it is skipped; elsewhere
    // (in a component not kept), dropped.
    let long = "a".repeat(MAX_EVENT + 1);
    let text = ics(&(event(&format!("SUMMARY:placeholders: 3\r\nX-A:{long}\r\n")) + &one));
    let cal = Calendar::parse(&text, Tz::UTC).unwrap();
    assert_eq!(cal.events.len(), 1);
    assert!(cal.skipped[0].reason.contains("a line longer than"));
    assert_eq!(cal.skipped[0].line, Some(8), "{:?}", cal.skipped);
    let text = ics(&format!("X-FILLER:{long}\r\n{one}"));
    assert_eq!(Calendar::parse(&text, Tz::UTC).unwrap().events.len(), 1);
    // More events with a count than the bound holds.
    let text = ics(&one.repeat(MAX_KEPT / one.len() + 1));
    let e = Calendar::parse(&text, Tz::UTC).unwrap_err();
    assert!(
        e.to_string().contains("bytes of events with a count"),
        "{e}"
    );
    let text = ics(&one.repeat(MAX_KEPT / one.len() - 1));
    assert!(Calendar::parse(&text, Tz::UTC).is_ok());
    // A byte-order mark before BEGIN:VCALENDAR is read past.
    let text = format!("\u{feff}{}", ics(&one));
    assert_eq!(Calendar::parse(&text, Tz::UTC).unwrap().events.len(), 1);
    // Not UTF-8 in an event: it alone is skipped.
    let mut f = selfdestruct_schedule::Filter::new();
    f.push(b"BEGIN:VCALENDAR\r\nX-A:\xff\r\n").unwrap();
    f.push(ics(&one).as_bytes()).unwrap();
    f.push(b"BEGIN:VEVENT\r\nSUMMARY:placeholders: 3 \xff\r\nEND:VEVENT\r\n")
        .unwrap();
    let kept = f.finish().unwrap();
    assert_eq!(kept.events.len(), 1);
    assert_eq!(kept.skipped[0].line, Some(15), "{:?}", kept.skipped);
    assert!(kept.skipped[0].reason.contains("not UTF-8"));
}

#[test]
fn a_prose_mention_of_the_word_is_no_count() {
    let text = ics(&format!(
        "{}{}",
        event(
            "SUMMARY:Talk: placeholders in Kubernetes\r\nDTSTART:20260302T090000Z\r\nDTEND:20260302T100000Z\r\n"
        ),
        event(
            "SUMMARY:Why placeholders? Lab\r\nDESCRIPTION:more placeholders here\\, placeholders: 6\r\n\
             DTSTART:20260302T090000Z\r\nDTEND:20260302T100000Z\r\n"
        ),
    ));
    let cal = Calendar::parse(&text, Tz::UTC).unwrap();
    let counts: Vec<(&str, u32)> = cal
        .events
        .iter()
        .map(|e| (&*e.name, e.counts[0].1))
        .collect();
    assert_eq!(counts, [("Why placeholders? Lab", 6)]);
}

/// The starts (UTC) of `cal`'s occurrences over `[from, to]`, with each event's name.
fn starts(cal: &Calendar, from: &str, to: &str) -> Vec<(String, String)> {
    let occ = cal.occurrences(utc(from), utc(to)).unwrap();
    occ.iter()
        .map(|o| {
            (
                o.name.to_string(),
                o.start.format("%m-%d %H:%M").to_string(),
            )
        })
        .collect()
}

fn file(name: &str) -> String {
    let path = format!("{}/tests/calendars/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn a_google_calendar_export_is_read() {
    // Google's "secret address in iCal format": an IANA TZID with its VTIMEZONE, a folded
    // DESCRIPTION holding the count, a weekly series with a UTC UNTIL and an EXDATE, and
    // an all-day series with a date UNTIL (RFC 5545 3.3.10: UNTIL takes DTSTART's form).
    let tz: Tz = "America/Los_Angeles".parse().unwrap();
    let cal = Calendar::parse(&file("google.ics"), tz).unwrap();
    assert_eq!(cal.skipped, []);
    let lecture = |from, to| {
        let all = starts(&cal, from, to);
        let days: Vec<String> = all
            .into_iter()
            .filter(|(n, _)| n == "Data 8 lecture")
            .map(|(_, s)| s)
            .collect();
        days
    };
    // 09:00 PST is 17:00 UTC, 09:00 PDT (from March 8) 16:00 UTC; March 23 is excluded.
    assert_eq!(
        lecture("2026-03-02T00:00:00Z", "2026-03-12T00:00:00Z"),
        [
            "03-02 17:00",
            "03-04 17:00",
            "03-06 17:00",
            "03-09 16:00",
            "03-11 16:00"
        ]
    );
    assert_eq!(
        lecture("2026-03-21T00:00:00Z", "2026-03-26T00:00:00Z"),
        ["03-25 16:00"]
    );
    // UNTIL 2026-05-08 06:59:59 UTC: Wednesday May 6 is the last.
    assert_eq!(
        lecture("2026-05-04T00:00:00Z", "2026-05-20T00:00:00Z"),
        ["05-04 16:00", "05-06 16:00"]
    );
    let lab = |from, to| {
        let all = starts(&cal, from, to);
        all.into_iter()
            .filter(|(n, _)| n.starts_with("Lab day"))
            .count()
    };
    // Mondays from September 7 to December 14 (UNTIL=20261218, a date): 15 of them.
    assert_eq!(lab("2026-09-01T00:00:00Z", "2027-01-31T00:00:00Z"), 15);
    let s = schedule("", tz);
    let f = eval(&s, &cal, utc("2026-12-14T20:00:00Z"));
    assert_eq!(
        (f.count, f.to_string().contains("Lab day")),
        (10, true),
        "{f}"
    );
    assert_eq!(eval(&s, &cal, utc("2026-12-21T20:00:00Z")).count, 0);
    // The event without a count is none of the schedule's.
    assert_eq!(cal.events.len(), 2);
    assert_eq!(cal.events[0].counts, [(None, 40)]);
}

#[test]
fn an_outlook_calendar_with_windows_zone_names_is_read() {
    // Exchange's published calendar: Windows zone names (`W. Europe Standard Time`),
    // each defined in a VTIMEZONE of the file, and a custom one ("Customized Time Zone":
    // UTC+3, +4 from the first Sunday of April to the first Sunday of October) that no
    // name maps: its definition is read.
    let cal = Calendar::parse(&file("outlook.ics"), Tz::UTC).unwrap();
    assert_eq!(cal.skipped, []);
    let all = starts(&cal, "2026-03-01T00:00:00Z", "2026-07-31T00:00:00Z");
    let of = |name: &str| -> Vec<String> {
        all.iter()
            .filter(|(n, _)| n.starts_with(name))
            .map(|(_, s)| s.clone())
            .collect()
    };
    let praktikum = of("Praktikum");
    // Tuesdays 09:00 Berlin: 08:00 UTC in winter, 07:00 from March 29; April 14 excluded;
    // UNTIL 2026-07-07 07:00 UTC is the last one's start.
    assert_eq!(
        &praktikum[..5],
        [
            "03-03 08:00",
            "03-10 08:00",
            "03-17 08:00",
            "03-24 08:00",
            "03-31 07:00"
        ]
    );
    assert!(!praktikum.contains(&"04-14 07:00".to_string()));
    assert_eq!(praktikum.last().map(String::as_str), Some("07-07 07:00"));
    assert_eq!(praktikum.len(), 18);
    // 10:00 at UTC+4 (April 6 is after the first Sunday of April).
    assert_eq!(of("Workshop"), ["04-06 06:00"]);
}

#[test]
fn a_thunderbird_calendar_and_zone_names_in_any_case_are_read() {
    // Lightning's `/mozilla.org/20070129_1/Europe/Berlin` TZID, a VALARM in the event, and
    // a lower-case `europe/berlin`.
    let cal = Calendar::parse(&file("thunderbird.ics"), Tz::UTC).unwrap();
    assert_eq!(cal.skipped, []);
    let all = starts(&cal, "2026-03-01T00:00:00Z", "2026-03-31T00:00:00Z");
    assert_eq!(
        all,
        [
            ("Seminar placeholders: 8".into(), "03-02 11:00".into()),
            ("Tutorium placeholders: 3".into(), "03-05 15:00".into()),
            ("Seminar placeholders: 8".into(), "03-09 11:00".into()),
            ("Seminar placeholders: 8".into(), "03-16 11:00".into()),
            ("Seminar placeholders: 8".into(), "03-23 11:00".into()),
            ("Seminar placeholders: 8".into(), "03-30 10:00".into()),
        ]
    );
    // The last Monday before UNTIL 2026-06-29 10:00 UTC, that one included.
    let june = starts(&cal, "2026-06-20T00:00:00Z", "2026-07-31T00:00:00Z");
    assert_eq!(june.last().map(|(_, s)| s.as_str()), Some("06-29 10:00"));
    assert_eq!(june.len(), 2);
}

#[test]
fn a_floating_class_time_with_a_floating_until_is_read() {
    let text = ics(&event(
        "SUMMARY:Class placeholders: 4\r\nDTSTART:20260302T090000\r\nDTEND:20260302T100000\r\n\
         RRULE:FREQ=WEEKLY;UNTIL=20260330T090000\r\n",
    ));
    let cal = Calendar::parse(&text, "Europe/Berlin".parse().unwrap()).unwrap();
    let all = starts(&cal, "2026-03-01T00:00:00Z", "2026-04-30T00:00:00Z");
    let days: Vec<&str> = all.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(
        days,
        [
            "03-02 08:00",
            "03-09 08:00",
            "03-16 08:00",
            "03-23 08:00",
            "03-30 07:00"
        ]
    );
}

#[test]
fn a_time_in_a_daylight_saving_gap_takes_the_offset_before_it() {
    // RFC 5545 3.3.5: 02:30 on 2026-03-29 does not exist in Berlin; it is read with the
    // offset before the gap (+01:00): 01:30 UTC. So is each such time of a series.
    let text = ics(&format!(
        "{}{}",
        event(
            "SUMMARY:Night shift placeholders: 2\r\nDTSTART;TZID=Europe/Berlin:20260329T023000\r\n\
             DTEND;TZID=Europe/Berlin:20260329T043000\r\n"
        ),
        event(
            "SUMMARY:Sunday job placeholders: 3\r\nDTSTART;TZID=Europe/Berlin:20260322T023000\r\n\
             DTEND;TZID=Europe/Berlin:20260322T033000\r\nRRULE:FREQ=WEEKLY;COUNT=3\r\n"
        ),
    ));
    let cal = Calendar::parse(&text, Tz::UTC).unwrap();
    assert_eq!(cal.skipped, []);
    let all = starts(&cal, "2026-03-20T00:00:00Z", "2026-04-30T00:00:00Z");
    let days: Vec<&str> = all.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(
        days,
        ["03-22 01:30", "03-29 01:30", "03-29 01:30", "04-05 00:30"]
    );
    let occ = cal
        .occurrences(utc("2026-03-29T00:00:00Z"), utc("2026-03-29T02:00:00Z"))
        .unwrap();
    let night = occ.iter().find(|o| o.count == 2).unwrap();
    assert_eq!(night.end, utc("2026-03-29T02:30:00Z"));
    // An all-day event on a day whose midnight does not exist (Beirut moves 00:00 to
    // 01:00 on 2026-03-29): from 22:00 UTC the day before (+02:00).
    let beirut: Tz = "Asia/Beirut".parse().unwrap();
    let text = ics(&event(
        "SUMMARY:Open day placeholders: 6\r\nDTSTART;VALUE=DATE:20260329\r\nDTEND;VALUE=DATE:20260330\r\n",
    ));
    let cal = Calendar::parse(&text, beirut).unwrap();
    let occ = cal
        .occurrences(utc("2026-03-28T00:00:00Z"), utc("2026-03-31T00:00:00Z"))
        .unwrap();
    assert_eq!(
        (occ[0].start, occ[0].end),
        (utc("2026-03-28T22:00:00Z"), utc("2026-03-29T21:00:00Z"))
    );
}

#[test]
fn lower_case_and_folded_component_lines_are_read() {
    // RFC 5545: names are case-insensitive (2.1), and a line may be folded anywhere (3.1),
    // inside BEGIN:VEVENT too.
    let text = "begin:vcalendar\r\nversion:2.0\r\nbegin:vevent\r\nuid:a\r\n\
                summary:Lab placeholders: 7\r\ndtstart;tzid=Europe/Berlin:20260302T090000\r\n\
                dtend;tzid=Europe/Berlin:20260302T100000\r\nrrule:freq=daily;count=2\r\n\
                end:vevent\r\nBEGIN:VEV\r\n ENT\r\nUID:b\r\nSUMMARY:Exam placeh\r\n olders: 9\r\n\
                DTSTART:20260303T120000Z\r\nDTE\r\n ND:20260303T130000Z\r\nEND:VEVENT\r\n\
                end:vcalendar\r\n";
    let cal = Calendar::parse(text, Tz::UTC).unwrap();
    assert_eq!(cal.skipped, []);
    let all = starts(&cal, "2026-03-01T00:00:00Z", "2026-03-31T00:00:00Z");
    assert_eq!(
        all,
        [
            ("Lab placeholders: 7".into(), "03-02 08:00".into()),
            ("Lab placeholders: 7".into(), "03-03 08:00".into()),
            ("Exam placeholders: 9".into(), "03-03 12:00".into()),
        ]
    );
}

#[test]
fn a_recurrence_that_never_occurs_is_skipped_at_once() {
    // February 30th, daily: no day ever; `rrule` would step to the year 9999 looking for
    // one (0.35 s a rule in a release build, 114 s for 300 of them). February 29th occurs.
    let never = event(
        "SUMMARY:Never placeholders: 5\r\nDTSTART:20260101T090000Z\r\nDTEND:20260101T100000Z\r\n\
         RRULE:FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30\r\n",
    );
    let leap = event(
        "SUMMARY:Leap placeholders: 1\r\nDTSTART:20260101T090000Z\r\nDTEND:20260101T100000Z\r\n\
         RRULE:FREQ=DAILY;BYMONTH=2;BYMONTHDAY=-1;BYDAY=TU\r\n",
    );
    let cal = Calendar::parse(&ics(&(never.repeat(300) + &leap)), Tz::UTC).unwrap();
    assert_eq!(cal.events.len(), 1);
    assert_eq!(cal.skipped.len(), 300);
    assert!(
        cal.skipped[0].reason.contains("never occurs"),
        "{:?}",
        cal.skipped[0]
    );
    // The leap rule: February 29th on a Tuesday (2028), and the end of February on one.
    let all = starts(&cal, "2026-01-01T00:00:00Z", "2028-12-31T00:00:00Z");
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].1, "02-29 09:00");
}

#[test]
fn each_target_counts_its_own_events_and_the_changes_are_listed() {
    let text = ics(&event(
        "SUMMARY:Data 8 placeholders: 40\r\nDESCRIPTION:placeholders[gpu]: 4\r\n\
         DTSTART:20260302T090000Z\r\nDTEND:20260302T103000Z\r\nRRULE:FREQ=DAILY;COUNT=2\r\n",
    ));
    let cal = Calendar::parse(&text, Tz::UTC).unwrap();
    let (from, to) = (utc("2026-03-02T00:00:00Z"), utc("2026-03-04T00:00:00Z"));
    let occ = cal.occurrences(from, to).unwrap();
    let changes = |s: &Schedule, pool| -> Vec<(String, u32)> {
        let c = s.changes(pool, &occ, from, to);
        c.iter()
            .map(|(t, f)| (t.format("%d %H:%M").to_string(), f.count))
            .collect()
    };
    let day = |d: u32, at: &[(&str, u32)]| -> Vec<(String, u32)> {
        at.iter()
            .map(|(t, c)| (format!("{d:02} {t}"), *c))
            .collect()
    };
    let cpu = schedule("Mon-Fri 08:00-18:00 = 12; * = 2", Tz::UTC);
    let mut want = day(
        2,
        &[
            ("00:00", 2),
            ("08:00", 12),
            ("08:50", 40),
            ("10:30", 12),
            ("18:00", 2),
        ],
    );
    want.extend(day(
        3,
        &[("08:00", 12), ("08:50", 40), ("10:30", 12), ("18:00", 2)],
    ));
    assert_eq!(changes(&cpu, None), want);
    let gpu = schedule("* = 0", Tz::UTC);
    let mut want = day(2, &[("00:00", 0), ("08:50", 4), ("10:30", 0)]);
    want.extend(day(3, &[("08:50", 4), ("10:30", 0)]));
    assert_eq!(changes(&gpu, Some("gpu")), want);
    // The default target's count (as `simulate --schedule` reads it) ignores a named one's.
    let f = gpu.in_force(&occ, utc("2026-03-02T09:00:00Z"));
    assert_eq!(f.count, 40);
    assert_eq!(
        f.to_string(),
        "calendar event \"Data 8 placeholders: 40\" (2026-03-02 09:00 to 2026-03-02 10:30 UTC, placeholders: 40)"
    );
    let f = gpu.in_force_for(Some("gpu"), &occ, utc("2026-03-02T09:00:00Z"));
    assert!(f.to_string().ends_with("placeholders[gpu]: 4)"), "{f}");
    // A change between minutes: an event at 09:00:30 applies at 08:50:30.
    let text = text.replace("T090000Z", "T090030Z");
    let occ = Calendar::parse(&text, Tz::UTC)
        .unwrap()
        .occurrences(from, to)
        .unwrap();
    let c = gpu.changes(Some("gpu"), &occ, from, to);
    assert_eq!(c[1].0, utc("2026-03-02T08:50:30Z"));
}
