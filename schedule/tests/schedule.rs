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
fn malformed_calendars_are_refused_with_line_and_reason() {
    let good = "SUMMARY:placeholders: 5\r\nDTSTART:20260302T090000Z\r\nDTEND:20260302T100000Z\r\n";
    for (text, line, reason) in [
        (
            "<html>502 Bad Gateway</html>".to_string(),
            None,
            "no BEGIN:VCALENDAR",
        ),
        (
            ics(&event(
                "SUMMARY:placeholders: lots\r\nDTSTART:20260302T090000Z\r\nDTEND:20260302T100000Z\r\n",
            )),
            Some(7),
            "not followed by a whole number",
        ),
        (
            ics(&event(
                "SUMMARY:placeholders: 5\r\nDTSTART:20260302T090000Z\r\n",
            )),
            Some(8),
            "no DTEND",
        ),
        (
            ics(&event(
                "SUMMARY:placeholders: 5\r\nDTSTART:20260302T090000Z\r\nDTEND:20260302T080000Z\r\n",
            )),
            Some(9),
            "not after DTSTART",
        ),
        (
            ics(&format!(
                "{}{}",
                event(good),
                event(
                    "SUMMARY:placeholders: 5\r\nDTSTART:20260302T090000Z\r\nDTEND:20260302T100000Z\r\nRRULE:FREQ=SOMETIMES\r\n"
                )
            )),
            Some(17),
            "recurrence refused",
        ),
        (
            ics(&event(
                "SUMMARY:placeholders: 5\r\nDTSTART;TZID=Mars/Olympus:20260302T090000\r\nDTEND:20260302T100000Z\r\n",
            )),
            Some(8),
            "no IANA time zone",
        ),
    ] {
        let e = Calendar::parse(&text, Tz::UTC).unwrap_err();
        assert_eq!(e.line, line, "{e}\n{text}");
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
        assert!(kept.text.len() < 1024, "{} bytes kept", kept.text.len());
        let cal = Calendar::parse_filtered(&kept, Tz::UTC).unwrap();
        let names: Vec<&str> = cal.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["Lecture placeholders: 40", "Lab placeholders: 30"]);
        let counts: Vec<u32> = cal.events.iter().map(|e| e.count).collect();
        assert_eq!(counts, [40, 30]);
    }
    // A refusal names the line of the text as read, not of what was kept.
    let bad = text.replace("holders: 30", "holders: lots");
    let line = bad.lines().position(|l| l == "SUMMARY:Lab place").unwrap() + 1;
    let e = Calendar::parse(&bad, Tz::UTC).unwrap_err();
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
    let text = ics(&event(&format!("SUMMARY:Seminar\r\n{long}")));
    let e = Calendar::parse(&text, Tz::UTC).unwrap_err();
    assert_eq!(e.line, Some(4), "{e}");
    assert!(e.to_string().contains("an event longer than"), "{e}");
    // One line longer than the bound, anywhere.
    let text = ics(&format!("X-FILLER:{}\r\n", "a".repeat(MAX_EVENT + 1)));
    let e = Calendar::parse(&text, Tz::UTC).unwrap_err();
    assert!(e.to_string().contains("a line longer than"), "{e}");
    // More events with a count than the bound holds.
    let one = event(
        "SUMMARY:Lecture placeholders: 4\r\nDTSTART:20260302T090000Z\r\nDTEND:20260302T100000Z\r\n",
    );
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
    // Not UTF-8.
    let mut f = selfdestruct_schedule::Filter::new();
    let e = f.push(b"BEGIN:VCALENDAR\r\nX-A:\xff\r\n").unwrap_err();
    assert_eq!(e.line, Some(2), "{e}");
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
    let counts: Vec<(&str, u32)> = cal.events.iter().map(|e| (&*e.name, e.count)).collect();
    assert_eq!(counts, [("Why placeholders? Lab", 6)]);
}
