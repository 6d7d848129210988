//! The slot ranking ([`next_opening`]) as a pure function.

use super::*;

fn at(secs: u64) -> Option<SystemTime> {
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
}

/// `n` watched seats `w0..`, created at 100.., of `standing`.
fn watched(names: &[String], standing: Standing) -> Vec<Seat<'_>> {
    names
        .iter()
        .enumerate()
        .map(|(i, name)| Seat {
            name,
            created: at(100 + i as u64),
            standing,
            watched: true,
        })
        .collect()
}

fn waiting(name: &str, created: Option<SystemTime>) -> Seat<'_> {
    Seat {
        name,
        created,
        standing: Standing::Wanted,
        watched: false,
    }
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("w{i}")).collect()
}

#[test]
fn a_free_slot_goes_to_the_newest_waiting_node() {
    let all = names(3);
    let mut seats = watched(&all, Standing::NoTarget);
    seats.extend([
        waiting("older", at(50)),
        waiting("newer", at(500)),
        waiting("unknown-age", None),
    ]);
    assert_eq!(
        next_opening(seats, 16),
        Some(Opening {
            open: "newer",
            stop: None
        })
    );
    // Nothing waits: nothing to open.
    assert_eq!(next_opening(watched(&all, Standing::Wanted), 16), None);
}

#[test]
fn a_node_that_is_no_target_gives_its_slot_to_a_usable_one() {
    // 16 tainted (or NotReady, cordoned, full) new nodes hold every slot, and one
    // more node, older than all of them, joins: the oldest of them gives way.
    let all = names(16);
    let mut seats = watched(&all, Standing::NoTarget);
    seats.push(waiting("usable", at(10)));
    assert_eq!(
        next_opening(seats, 16),
        Some(Opening {
            open: "usable",
            stop: Some("w0")
        })
    );
}

#[test]
fn when_slots_run_short_the_newest_usable_nodes_win() {
    let all = names(16);
    // An older node waits behind 16 newer usable (or not yet read) ones.
    let mut seats = watched(&all, Standing::Wanted);
    seats.push(waiting("older", at(10)));
    assert_eq!(next_opening(seats, 16), None);
    // A newer one takes the slot of the oldest.
    let mut seats = watched(&all, Standing::Wanted);
    seats.push(waiting("newest", at(1_000)));
    assert_eq!(
        next_opening(seats, 16),
        Some(Opening {
            open: "newest",
            stop: Some("w0")
        })
    );
    // Usable nodes outrank no-targets whatever their age: with both watched, the
    // newest no-target gives way before the oldest usable one.
    let (usable, none) = (
        names(8),
        (8..16).map(|i| format!("n{i}")).collect::<Vec<_>>(),
    );
    let mut seats = watched(&usable, Standing::Wanted);
    seats.extend(watched(&none, Standing::NoTarget).into_iter().map(|mut s| {
        s.created = at(900);
        s
    }));
    seats.push(waiting("waiting", at(1)));
    let opening = next_opening(seats, 16).expect("an opening");
    assert_eq!(opening.open, "waiting");
    assert!(
        opening.stop.is_some_and(|s| s.starts_with('n')),
        "{opening:?}"
    );
}

#[test]
fn rank_orders_standing_then_age_then_name() {
    let seat = |name, created, standing| Seat {
        name,
        created,
        standing,
        watched: true,
    };
    let mut seats = [
        seat("b", at(5), Standing::Wanted),
        seat("x", at(9), Standing::NoTarget),
        seat("a", at(5), Standing::Wanted),
        seat("n", None, Standing::Wanted),
        seat("c", at(7), Standing::Wanted),
    ];
    seats.sort_by_key(rank);
    let order: Vec<&str> = seats.iter().map(|s| s.name).collect();
    assert_eq!(order, ["c", "a", "b", "n", "x"]);
}

#[test]
fn twenty_tainted_nodes_joining_one_by_one_then_a_usable_one() {
    // Replays the slots over the pure planner: each joining node waits, is opened
    // (perhaps in the place of an older no-target), is read tainted.
    #[derive(Clone, Copy, PartialEq)]
    enum Where {
        Waiting,
        Watched(Standing),
        Parked,
    }
    let names: Vec<String> = (0..21).map(|i| format!("node-{i:02}")).collect();
    let mut state: Vec<Where> = Vec::new();
    let step = |state: &mut Vec<Where>| loop {
        let seats = state.iter().enumerate().filter_map(|(i, w)| {
            let (standing, watched) = match w {
                Where::Waiting => (Standing::Wanted, false),
                Where::Watched(s) => (*s, true),
                Where::Parked => return None,
            };
            Some(Seat {
                name: names[i].as_str(),
                created: at(i as u64),
                standing,
                watched,
            })
        });
        let Some(o) = next_opening(seats, 16) else {
            return;
        };
        let index = |n: &str| names.iter().position(|x| x == n).expect("a name");
        if let Some(stop) = o.stop {
            state[index(stop)] = Where::Parked;
        }
        let i = index(o.open);
        // The last node is usable; the others tainted.
        let standing = if i == 20 {
            Standing::Wanted
        } else {
            Standing::NoTarget
        };
        state[i] = Where::Watched(standing);
    };
    for _ in 0..21 {
        state.push(Where::Waiting);
        step(&mut state);
    }
    assert!(matches!(state[20], Where::Watched(Standing::Wanted)));
    let watched = state
        .iter()
        .filter(|w| matches!(w, Where::Watched(_)))
        .count();
    assert_eq!(watched, 16);
    // The newest tainted nodes kept their slots; the oldest five gave theirs up.
    assert!(state[..5].iter().all(|w| *w == Where::Parked));
}
