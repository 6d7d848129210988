//! Property tests of the pure decision (`selfdestruct_decision::decide`) over
//! arbitrary worlds built from `selfdestruct_decision::model` types (run by
//! `cargo test -p selfdestruct-decision`).
//!
//! The `Decision` type carries no target: a move is always of the own pod. So
//! these check the structural guarantees instead: nothing once finished or
//! terminating, a node trigger is never the own node nor a node created before
//! the own pod was scheduled, no move while a sibling is Pending or terminating,
//! the move cap, `min_age` and the backoff hold, every time-based wake-up lies in
//! the future (no hot loop), and the same snapshot always gives the same
//! decision. Case counts are small for CI (`PROPTEST_CASES` raises them for a
//! longer local run).

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use common::proptest_config;
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use selfdestruct_decision::builder::{HOUR, OWN, OWN_UID, World, at};
use selfdestruct_decision::images::ImageRef;
use selfdestruct_decision::model::{NodeSummary, OwnPod, Readiness, Sibling, Taint, Toleration};
use selfdestruct_decision::{
    Armed, Decision, Hold, Memory, Outcome, Policy, Reject, SiblingNodes, Snapshot, Trigger,
    decide, decide_placed, evaluate,
};

/// Times within about six hours of T0: enough to cross every boundary
/// (settle, min age, an hour of attempts) without overflowing.
fn time() -> impl Strategy<Value = SystemTime> {
    (0u64..20_000).prop_map(at)
}

fn small_duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        (0u64..4000).prop_map(Duration::from_secs),
        (0u64..5000).prop_map(Duration::from_millis),
    ]
}

fn node_name() -> impl Strategy<Value = String> {
    (0u8..6).prop_map(|i| format!("node-{i}"))
}

fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(
        prop_oneof![Just("pool".to_string()), Just("zone".to_string())],
        prop_oneof![Just("user".to_string()), Just("a".to_string())],
        0..2,
    )
}

fn taint() -> impl Strategy<Value = Taint> {
    (
        prop_oneof![
            Just("dedicated".to_string()),
            Just("node.kubernetes.io/not-ready".to_string()),
            Just("ToBeDeletedByClusterAutoscaler".to_string()),
        ],
        prop::option::of(Just("user".to_string())),
        prop_oneof![
            Just("NoSchedule".to_string()),
            Just("NoExecute".to_string()),
            Just("PreferNoSchedule".to_string()),
        ],
    )
        .prop_map(|(key, value, effect)| Taint { key, value, effect })
}

fn toleration() -> impl Strategy<Value = Toleration> {
    (
        prop::option::of(Just("dedicated".to_string())),
        prop::option::of(prop_oneof![
            Just("Exists".to_string()),
            Just("Equal".to_string())
        ]),
        prop::option::of(Just("user".to_string())),
        prop::option::of(Just("NoSchedule".to_string())),
    )
        .prop_map(|(key, operator, value, effect)| Toleration {
            key,
            operator,
            value,
            effect,
        })
}

fn node() -> impl Strategy<Value = NodeSummary> {
    (
        node_name(),
        labels(),
        any::<bool>(),
        prop::collection::vec(taint(), 0..2),
        any::<bool>(),
        prop::option::of(time()),
        prop::collection::vec(0usize..3, 0..3),
        any::<bool>(),
    )
        .prop_map(
            |(name, labels, unschedulable, taints, ready, since, images_present, trunc)| {
                NodeSummary {
                    name,
                    // Registered around the time it first became Ready (None now and then).
                    created: since.filter(|_| !trunc || ready),
                    labels,
                    unschedulable: unschedulable && trunc, // cordoned now and then
                    taints,
                    ready: Readiness { ready, since },
                    images_present,
                    images_truncated: trunc,
                }
            },
        )
}

fn sibling() -> impl Strategy<Value = Sibling> {
    (
        0u8..5,
        any::<bool>(),
        prop::option::of(time()),
        prop::option::of(node_name()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(i, own_uid, created, node_name, pending, terminating)| Sibling {
                name: format!("placeholder-{i}"),
                // now and then the own uid under another name (a stale view)
                uid: if own_uid && i == 4 {
                    OWN_UID.into()
                } else {
                    format!("uid-{i}")
                },
                created,
                node_name,
                pending,
                terminating,
            },
        )
}

fn own() -> impl Strategy<Value = OwnPod> {
    (
        prop::option::of(node_name()),
        prop::option::of(time()),
        prop::option::of(time()),
        labels(),
        prop::collection::vec(toleration(), 0..2),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(node_name, started_at, scheduled_at, node_selector, tolerations, terminating)| {
                OwnPod {
                    name: OWN.into(),
                    namespace: "placeholders".into(),
                    uid: OWN_UID.into(),
                    node_name,
                    started_at,
                    scheduled_at,
                    labels: BTreeMap::new(),
                    node_selector,
                    affinity: Vec::new(),
                    tolerations,
                    terminating,
                }
            },
        )
}

fn images() -> Vec<ImageRef> {
    ["quay.io/jupyter/scipy-notebook:1", "nginx", "busybox:1.36"]
        .iter()
        .map(|s| ImageRef::parse(s).expect("valid image"))
        .collect()
}

fn policy() -> impl Strategy<Value = Policy> {
    (
        prop::option::of((small_duration(), small_duration())),
        prop::bool::weighted(0.8),
        small_duration(),
        0usize..3,
        small_duration(),
        0u32..4,
        small_duration(),
        prop::bool::weighted(0.2),
    )
        .prop_map(
            |(
                lifetime,
                move_to_new_nodes,
                node_settle,
                n_images,
                move_jitter,
                cap,
                min_age,
                avoid,
            )| {
                Policy {
                    lifetime: lifetime.map(|(a, b)| (a.min(b), a.max(b))),
                    move_to_new_nodes,
                    node_settle,
                    required_images: images()[..n_images].to_vec(),
                    move_jitter,
                    max_moves_per_hour: cap,
                    min_age,
                    avoid_deletion_candidates: avoid,
                }
            },
        )
}

fn trigger() -> impl Strategy<Value = Trigger> {
    prop_oneof![
        small_duration().prop_map(|lifetime| Trigger::Lifetime { lifetime }),
        (node_name(), small_duration(), any::<bool>()).prop_map(
            |(node, ready_for, images_pulled)| Trigger::NewNode {
                node,
                ready_for,
                images_pulled
            }
        ),
    ]
}

fn memory() -> impl Strategy<Value = Memory> {
    (
        prop::option::of(small_duration()),
        prop::option::of((time(), trigger())),
        prop::collection::vec(time(), 0..5),
        prop::option::of(time()),
        0u32..6,
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(lifetime, armed, attempts, retry_at, failures, finished)| Memory {
                lifetime,
                armed: armed.map(|(at, trigger)| Armed { at, trigger }),
                attempts,
                retry_at,
                failures,
                finished,
                usable_since: Default::default(),
            },
        )
}

fn world() -> impl Strategy<Value = World> {
    (
        time(),
        own(),
        prop::option::of(prop::collection::vec(node(), 0..6)),
        prop::option::of(prop::collection::vec(sibling(), 0..5)),
        policy(),
        memory(),
        0.0f64..1.0,
        prop::bool::weighted(0.2),
    )
        .prop_map(
            |(now, own, nodes, siblings, policy, memory, draw, siblings_loading)| World {
                now,
                own,
                nodes,
                siblings,
                siblings_loading,
                policy,
                memory,
                draw,
            },
        )
}

fn trigger_of(d: &Decision) -> Option<&Trigger> {
    match d {
        Decision::Move { trigger } | Decision::Arm { trigger, .. } => Some(trigger),
        Decision::Wait { .. } => None,
    }
}

/// Checks every structural property of one decision; `Err` names the broken one.
fn check(w: &World) -> Result<Decision, String> {
    let d = w.decide();
    // Same snapshot, same decision (also from an independent copy).
    if d != w.decide() || d != w.clone().decide() {
        return Err("not deterministic".into());
    }
    let acting = !matches!(d, Decision::Wait { .. });
    if (w.memory.finished || w.own.terminating) && acting {
        return Err("acts although finished or terminating".into());
    }
    let finished_wait = Decision::Wait {
        until: None,
        hold: Some(Hold::Finished),
    };
    if (w.memory.finished || w.own.terminating) && d != finished_wait {
        return Err("finished must wait on events only".into());
    }
    if let Some(Trigger::NewNode { node, .. }) = trigger_of(&d) {
        if w.own.node_name.as_deref() == Some(node.as_str()) {
            return Err(format!("trigger names the own node {node}"));
        }
        if !w.policy.move_to_new_nodes {
            return Err("node trigger with moving to new nodes off".into());
        }
        let nodes = w.nodes.as_deref().unwrap_or_default();
        let Some(n) = nodes.iter().find(|n| n.name == *node) else {
            return Err(format!("trigger names unknown node {node}"));
        };
        let Some(scheduled) = w.own.scheduled_at else {
            return Err("node trigger without a known own scheduling time".into());
        };
        // Several summaries may carry one name; one of them must qualify.
        let ok = nodes.iter().filter(|x| x.name == *node).any(|x| {
            x.ready.ready
                && x.created.is_some_and(|c| c >= scheduled)
                && x.ready
                    .since
                    .is_some_and(|s| s + w.policy.node_settle <= w.now)
                && !x.unschedulable
        });
        if !ok {
            return Err(format!(
                "node {node} (created {:?}, Ready since {:?}) is no newer than the own scheduling {scheduled:?} or not settled: {n:?}",
                n.created, n.ready.since
            ));
        }
    }
    if let Some(Trigger::Lifetime { lifetime }) = trigger_of(&d) {
        let (Some(l), Some(start)) = (w.memory.lifetime, w.own.started_at) else {
            return Err("lifetime trigger without a lifetime or start".into());
        };
        if l != *lifetime || l.is_zero() || start + l > w.now {
            return Err("lifetime trigger before the lifetime is up".into());
        }
    }
    if let Decision::Move { .. } = d {
        if w.sibling_busy() {
            return Err("moves while a sibling is Pending or terminating".into());
        }
        if w.siblings_loading {
            return Err("moves before the first list of siblings arrived".into());
        }
        if w.policy.max_moves_per_hour > 0
            && w.recent_attempts() >= w.policy.max_moves_per_hour as usize
        {
            return Err("moves beyond SELFDESTRUCT_MAX_MOVES_PER_HOUR".into());
        }
        // MIN_AGE holds node moves only; the lifetime is the user's explicit promise.
        if let (Some(start), Some(Trigger::NewNode { .. })) = (w.own.started_at, trigger_of(&d))
            && w.now < start + w.policy.min_age
        {
            return Err("moves to a node while younger than SELFDESTRUCT_MIN_AGE".into());
        }
        if w.memory.retry_at.is_some_and(|r| r > w.now) {
            return Err("moves during a backoff".into());
        }
        if let Some(armed) = &w.memory.armed
            && armed.at > w.now
        {
            return Err("moves before the armed (jittered) time".into());
        }
    }
    match &d {
        Decision::Wait {
            until: Some(until), ..
        } if *until <= w.now => {
            return Err(format!("wakes at {until:?}, not after now: a hot loop"));
        }
        Decision::Arm { at, .. } => {
            if *at < w.now {
                return Err("arms in the past".into());
            }
            if w.memory.armed.is_none() && *at > w.now + w.policy.move_jitter {
                return Err("arms later than SELFDESTRUCT_MOVE_JITTER".into());
            }
            if let Some(armed) = &w.memory.armed
                && armed.at != *at
            {
                return Err("an armed move does not keep its time".into());
            }
        }
        _ => {}
    }
    Ok(d)
}

#[test]
fn every_decision_keeps_the_structural_guarantees() {
    // 2,048 worlds: a move is about 1 in 80 of them (4 to 9 in 512 seen), so 512 missed every
    // move about once in 400 runs, and the coverage check below failed.
    let mut runner = TestRunner::new(proptest_config(2048));
    let seen = std::cell::RefCell::new(BTreeMap::<&str, u32>::new());
    runner
        .run(&world(), |w| {
            let d = check(&w).map_err(|why| TestCaseError::fail(format!("{why}: {w:#?}")))?;
            let kind = match d {
                Decision::Move { .. } => "move",
                Decision::Arm { .. } => "arm",
                Decision::Wait { hold: Some(_), .. } => "hold",
                Decision::Wait { .. } => "wait",
            };
            *seen.borrow_mut().entry(kind).or_default() += 1;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    let seen = seen.into_inner();
    eprintln!("decisions seen: {seen:?}");
    // The generator must reach every kind of decision, or the checks prove little.
    for kind in ["move", "arm", "hold", "wait"] {
        assert!(seen.contains_key(kind), "no {kind} generated: {seen:?}");
    }
}

/// The full rule as first written: for every sibling, a scan of every node to see
/// whether the sibling's node is old. The reference of the indexed rule.
fn full_by_scanning(w: &World, node: &NodeSummary) -> Option<String> {
    let (siblings, nodes) = (w.siblings.as_ref()?, w.nodes.as_ref()?);
    let scheduled = w.own.scheduled_at?;
    let since = node.ready.since?;
    let usable = w
        .memory
        .usable_since
        .get(&node.name)
        .map_or(since, |t| since.max(*t));
    let old = |name: &str| {
        w.own.node_name.as_deref() == Some(name)
            || nodes
                .iter()
                .any(|o| o.name == name && o.created.is_some_and(|c| c < scheduled))
    };
    let is_self = |s: &Sibling| s.name == w.own.name || (!s.uid.is_empty() && s.uid == w.own.uid);
    siblings
        .iter()
        .find(|s| {
            !is_self(s)
                && s.created.is_some_and(|c| c > usable)
                && s.node_name
                    .as_deref()
                    .is_some_and(|n| n != node.name && old(n))
        })
        .map(|s| s.name.clone())
}

/// `w` with its nodes Ready, schedulable and settled, no placement rule or image to
/// pass, the own pod scheduled at `scheduled` (or when its node `with` was created),
/// and its siblings created late: most verdicts reach the full rule.
fn reaching_the_full_rule(mut w: World, scheduled: SystemTime, with: Option<usize>) -> World {
    w.now = at(25_000);
    w.own.scheduled_at = Some(scheduled);
    w.own.node_selector.clear();
    w.own.affinity.clear();
    w.policy.required_images.clear();
    for n in w.nodes.iter_mut().flatten() {
        n.ready.ready = true;
        n.ready.since = n.ready.since.or(n.created);
        n.created = n.created.or(n.ready.since);
        n.taints.clear();
        n.unschedulable = false;
    }
    // Or in the second a node was created (that node is new, not old).
    let node_at = |i: usize| w.nodes.as_ref()?.get(i)?.created;
    if let Some(created) = with.and_then(node_at) {
        w.own.scheduled_at = Some(created);
    }
    // Mostly created after the nodes became usable (by t=20,000), now and then not;
    // those on no node of the view placed on the own node (old by definition).
    w.own.node_name = w.own.node_name.or(Some("node-5".into()));
    let in_view: Vec<String> = w.nodes.iter().flatten().map(|n| n.name.clone()).collect();
    for s in w.siblings.iter_mut().flatten() {
        s.created = Some(
            s.created
                .map_or(at(24_000), |c| c + Duration::from_secs(5_000)),
        );
        if !s.node_name.as_ref().is_some_and(|n| in_view.contains(n)) {
            s.node_name = w.own.node_name.clone();
        }
    }
    w
}

/// The full rule looks its siblings up once per evaluation: on random worlds (nodes
/// seen usable from a random time) every node's verdict names the sibling the
/// reference scan finds, a node it passes has none, and the evaluation reports as
/// full exactly the nodes whose verdict is full, with the decision of [`decide`].
#[test]
fn the_indexed_full_rule_agrees_with_a_scan_of_every_node() {
    let mut runner = TestRunner::new(proptest_config(512));
    let seen = std::cell::RefCell::new(BTreeMap::<&str, u32>::new());
    runner
        .run(
            &(
                world(),
                time(),
                prop::option::of(0usize..6),
                time(),
                prop::bool::weighted(0.8),
            ),
            |(mut w, scheduled, with, observed, focus)| {
                if focus {
                    w = reaching_the_full_rule(w, scheduled, with);
                }
                w.memory.observe_nodes(observed, &w.own, w.nodes.as_deref());
                let snap = w.snapshot();
                let mut full = Vec::new();
                for node in w.nodes.iter().flatten() {
                    let verdict = snap.node_verdict(node);
                    let kind = match &verdict {
                        Ok(_) => {
                            prop_assert_eq!(full_by_scanning(&w, node), None, "{:#?}", w);
                            "passed"
                        }
                        Err(Reject::Full { sibling }) => {
                            let reference = full_by_scanning(&w, node);
                            prop_assert_eq!(reference.as_ref(), Some(sibling), "{:#?}", w);
                            full.push((node.name.as_str(), sibling.clone()));
                            "full"
                        }
                        Err(_) => "other",
                    };
                    *seen.borrow_mut().entry(kind).or_default() += 1;
                }
                let evaluation = evaluate(&snap);
                prop_assert_eq!(&evaluation.decision, &decide(&snap));
                // The siblings' nodes looked up once for the view: the same decision.
                let (nodes, siblings) = (w.nodes.as_deref(), w.siblings.as_deref());
                let placed =
                    SiblingNodes::new(nodes.unwrap_or_default(), siblings.unwrap_or_default());
                prop_assert_eq!(
                    &decide_placed(&snap, &placed),
                    &evaluation.decision,
                    "{:#?}",
                    w
                );
                // Built from a view whose siblings differed at every third position (other
                // creation times, nodes, names): updated there, it is the one built anew.
                let (nodes, siblings) = (nodes.unwrap_or_default(), siblings.unwrap_or_default());
                let changed: Vec<usize> = (0..siblings.len()).step_by(3).collect();
                let before: Vec<Sibling> = (siblings.iter().enumerate())
                    .map(|(i, s)| match i % 3 {
                        0 => Sibling {
                            name: format!("{}-before", s.name),
                            uid: format!("{}-before", s.uid),
                            created: s.created.map(|c| c - Duration::from_secs(1 + i as u64)),
                            node_name: (i % 2 == 0)
                                .then(|| nodes.get(i % nodes.len().max(1)))
                                .flatten()
                                .map(|n| n.name.clone()),
                            ..s.clone()
                        },
                        _ => s.clone(),
                    })
                    .collect();
                prop_assert_eq!(
                    SiblingNodes::new(nodes, &before).with_changes(nodes, siblings, &changed),
                    SiblingNodes::new(nodes, siblings),
                    "{:#?}",
                    w
                );
                let looked = w.policy.move_to_new_nodes && !w.memory.finished && !w.own.terminating;
                let reported: Vec<(&str, String)> = evaluation
                    .full
                    .iter()
                    .map(|f| (f.node.name.as_str(), f.sibling.clone()))
                    .collect();
                if looked {
                    prop_assert_eq!(reported, full, "{:#?}", w);
                } else {
                    prop_assert!(reported.is_empty());
                }
                Ok(())
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let seen = seen.into_inner();
    eprintln!("verdicts seen: {seen:?}");
    for kind in ["passed", "full"] {
        assert!(
            seen.contains_key(kind),
            "no {kind} verdict generated: {seen:?}"
        );
    }
}

proptest! {
    #![proptest_config(proptest_config(512))]

    /// A snapshot that would move: holding any one guard back stops the move.
    #[test]
    fn each_guard_alone_stops_a_move(mut w in world(), which in 0u8..6) {
        // Clear every guard and add a settled, newer, fitting node: it must move.
        w.memory.finished = false;
        w.memory.retry_at = None;
        w.memory.attempts.clear();
        w.memory.armed = None;
        w.own.terminating = false;
        w.own.node_selector.clear();
        w.policy.min_age = Duration::ZERO;
        w.policy.move_jitter = Duration::ZERO;
        w.policy.move_to_new_nodes = true;
        w.policy.required_images.clear();
        w.siblings = Some(vec![]);
        w.siblings_loading = false;
        let scheduled = *w.own.scheduled_at.get_or_insert(at(0));
        w.now = w.now.max(scheduled + w.policy.node_settle + Duration::from_secs(1));
        w.now = w.now.max(w.own.started_at.unwrap_or(w.now));
        w.nodes.get_or_insert_with(Vec::new).push(NodeSummary {
            name: "node-fresh".into(),
            created: Some(scheduled + Duration::from_secs(1)),
            ready: Readiness { ready: true, since: Some(scheduled + Duration::from_secs(1)) },
            ..NodeSummary::default()
        });
        let d = w.decide();
        prop_assert!(matches!(d, Decision::Move { .. }), "a free snapshot must move: {:?}", d);
        let mut held = w.clone();
        match which {
            0 => held.memory.finished = true,
            1 => held.own.terminating = true,
            2 => held.siblings = Some(vec![Sibling {
                name: "placeholder-9".into(),
                uid: "uid-9".into(),
                pending: true,
                ..Sibling::default()
            }]),
            3 => held.memory.retry_at = Some(w.now + Duration::from_secs(1)),
            4 => {
                held.siblings = None;
                held.siblings_loading = true;
            }
            _ => {
                held.policy.max_moves_per_hour = 1;
                held.memory.attempts = vec![w.now];
            }
        }
        let d2 = held.decide();
        prop_assert!(matches!(d2, Decision::Wait { hold: Some(_), .. }), "guard {which}: {d2:?}");
    }

    /// A placeholder scheduled after a node was created never moves towards it,
    /// however recently its Ready condition changed (a kubelet restart, an upgrade),
    /// and never towards its own node, whatever else holds.
    #[test]
    fn an_older_or_own_node_is_never_a_trigger(
        mut w in world(),
        node in node(),
        lag in 0u64..5000,
        blip in 0u64..100_000,
        own_node in any::<bool>(),
    ) {
        let mut node = node;
        node.ready.ready = true;
        let since = node.created.or(node.ready.since).unwrap_or(at(100));
        node.created = Some(since);
        node.ready.since = Some(since + Duration::from_secs(blip));
        if own_node {
            w.own.node_name = Some(node.name.clone());
            w.own.scheduled_at = Some(since - Duration::from_secs(lag.min(100) + 1));
        } else {
            w.own.scheduled_at = Some(since + Duration::from_secs(lag + 1));
        }
        w.own.node_name = w.own.node_name.clone().or(Some("node-own".into()));
        if !own_node && w.own.node_name.as_deref() == Some(node.name.as_str()) {
            w.own.node_name = Some("node-own".into());
        }
        // the only node summary under that name
        w.nodes = Some(
            w.nodes.clone().unwrap_or_default().into_iter()
                .filter(|n| n.name != node.name)
                .chain([node.clone()])
                .collect(),
        );
        w.memory.finished = false;
        w.own.terminating = false;
        let d = w.decide();
        if let Some(Trigger::NewNode { node: named, .. }) = trigger_of(&d) {
            prop_assert_ne!(named, &node.name, "{:?}", d);
        }
        let snap = w.snapshot();
        prop_assert!(snap.node_verdict(&node).is_err());
    }

    /// Moves into a loop of failures are capped per hour and backed off: replaying
    /// decide/apply/record over simulated time never exceeds the cap in any hour.
    #[test]
    fn failing_moves_respect_the_cap_and_back_off(
        cap in 1u32..6,
        outcomes in prop::collection::vec(0u8..4, 1..60),
        step in 1u64..120,
        draws in prop::collection::vec(0.0f64..1.0, 60),
    ) {
        let own = OwnPod {
            name: OWN.into(),
            uid: OWN_UID.into(),
            started_at: Some(at(0)),
            scheduled_at: Some(at(0)),
            node_name: Some("node-old".into()),
            ..OwnPod::default()
        };
        let nodes = vec![NodeSummary {
            name: "node-new".into(),
            created: Some(at(10)),
            ready: Readiness { ready: true, since: Some(at(10)) },
            ..NodeSummary::default()
        }];
        let policy = Policy {
            lifetime: None,
            move_to_new_nodes: true,
            node_settle: Duration::ZERO,
            required_images: vec![],
            move_jitter: Duration::ZERO,
            max_moves_per_hour: cap,
            min_age: Duration::ZERO,
            avoid_deletion_candidates: false,
        };
        let mut memory = Memory::default();
        let mut now = at(20);
        let mut moves: Vec<SystemTime> = Vec::new();
        let mut i = 0usize;
        for _ in 0..600 {
            let d = decide(&Snapshot {
                now, own: &own, nodes: Some(&nodes), siblings: Some(&[]), siblings_loading: false,
                policy: &policy, memory: &memory, draw: draws[i % draws.len()],
            });
            memory.apply(now, &d);
            match d {
                Decision::Move { .. } => {
                    if let Some(prev) = moves.last() {
                        prop_assert!(now > *prev, "two moves at one instant");
                    }
                    moves.push(now);
                    let outcome = match outcomes[i % outcomes.len()] {
                        0 => Outcome::Failed,
                        1 => Outcome::Busy { retry_after: None },
                        2 => Outcome::Busy { retry_after: Some(Duration::from_secs(1)) },
                        _ => Outcome::Denied,
                    };
                    memory.record(now, &outcome, draws[(i + 7) % draws.len()]);
                    i += 1;
                    if i >= outcomes.len() { break; }
                }
                Decision::Wait { until: Some(u), .. } => {
                    prop_assert!(u > now, "wake-up not in the future");
                    now = u.min(now + Duration::from_secs(step));
                }
                _ => now += Duration::from_secs(step),
            }
        }
        for (k, t) in moves.iter().enumerate() {
            let in_hour = moves[k..].iter().take_while(|u| u.duration_since(*t).is_ok_and(|d| d < HOUR)).count();
            prop_assert!(in_hour <= cap as usize, "{in_hour} moves within an hour, cap {cap}");
        }
    }
}

/// `SystemTime + Duration` panics on overflow. The configuration caps durations
/// (100 years), but the decision must not rely on it: a lifetime, node settle,
/// min age or jitter of `300000000000y` (which `duration::parse` accepts) must
/// not make `decide` panic.
#[test]
fn extreme_configured_durations_never_panic() {
    let huge =
        selfdestruct_decision::duration::parse("300000000000y").expect("the config accepts it");
    let base = World {
        now: at(1000),
        own: OwnPod {
            name: OWN.into(),
            uid: OWN_UID.into(),
            node_name: Some("node-old".into()),
            started_at: Some(at(0)),
            scheduled_at: Some(at(0)),
            ..OwnPod::default()
        },
        nodes: Some(vec![NodeSummary {
            name: "node-new".into(),
            created: Some(at(10)),
            ready: Readiness {
                ready: true,
                since: Some(at(10)),
            },
            ..NodeSummary::default()
        }]),
        siblings: Some(vec![]),
        siblings_loading: false,
        policy: Policy {
            lifetime: None,
            move_to_new_nodes: true,
            node_settle: Duration::ZERO,
            required_images: vec![],
            move_jitter: Duration::ZERO,
            max_moves_per_hour: 0,
            min_age: Duration::ZERO,
            avoid_deletion_candidates: false,
        },
        memory: Memory::default(),
        draw: 0.99,
    };
    let mut failures = Vec::new();
    type Set = Box<dyn Fn(&mut World)>;
    let variants: Vec<(&str, Set)> = vec![
        (
            "SELFDESTRUCT_MAX_LIFETIME",
            Box::new(move |w: &mut World| {
                w.policy.lifetime = Some((huge, huge));
                w.memory.lifetime = Some(huge);
            }),
        ),
        (
            "SELFDESTRUCT_NODE_SETTLE",
            Box::new(move |w: &mut World| w.policy.node_settle = huge),
        ),
        (
            "SELFDESTRUCT_MIN_AGE",
            Box::new(move |w: &mut World| w.policy.min_age = huge),
        ),
        (
            "SELFDESTRUCT_MOVE_JITTER",
            Box::new(move |w: &mut World| w.policy.move_jitter = huge),
        ),
    ];
    for (var, set) in &variants {
        let mut w = base.clone();
        set(&mut w);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.decide()));
        match r {
            Ok(d) => eprintln!("{var}=300000000000y: {d:?}"),
            Err(_) => failures.push(*var),
        }
    }
    assert!(
        failures.is_empty(),
        "decide panics (SystemTime overflow) with a huge {failures:?}: use checked_add in decision.rs"
    );
}
