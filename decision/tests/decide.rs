//! Unit tables of the pure decision ([`selfdestruct_decision::decide`] and
//! [`Snapshot::node_verdict`]): every candidate rule alone and combined, the
//! timer, jitter, churn controls, sibling awareness and outcomes, on worlds
//! built with `selfdestruct_decision::builder`.

use std::time::{Duration, SystemTime};

use selfdestruct_decision::builder::{World, at, quiet_policy as policy, ready_node};
use selfdestruct_decision::model::{self, NodeSummary, Readiness, Sibling, Taint, Toleration};
use selfdestruct_decision::selector::Requirement;
use selfdestruct_decision::*;

/// Nothing to do until the watches change something.
const WAIT_FOR_EVENTS: Decision = Decision::Wait {
    until: None,
    hold: None,
};

fn node(name: &str, ready_at: u64) -> NodeSummary {
    ready_node(name, ready_at)
}

fn moves_to(d: &Decision) -> Option<&str> {
    match d {
        Decision::Move {
            trigger: Trigger::NewNode { node, .. },
        } => Some(node),
        _ => None,
    }
}

#[test]
fn each_candidate_rule_alone() {
    let c = World::new();
    let fresh = node("new", 500);
    assert_eq!(c.verdict(&fresh), Ok(Duration::from_secs(500)));
    let taint = |key: &str, effect: &str| Taint {
        key: key.into(),
        value: None,
        effect: effect.into(),
    };
    let table: Vec<(&str, NodeSummary, Reject)> = vec![
        ("own node", node("old", 500), Reject::OwnNode),
        (
            "not ready",
            NodeSummary {
                ready: Readiness {
                    ready: false,
                    since: Some(at(500)),
                },
                ..fresh.clone()
            },
            Reject::NotReady,
        ),
        (
            "ready without time",
            NodeSummary {
                ready: Readiness {
                    ready: true,
                    since: None,
                },
                ..fresh.clone()
            },
            Reject::NotReady,
        ),
        (
            "created before own scheduling",
            NodeSummary {
                created: Some(at(0) - Duration::from_secs(60)),
                ..node("new", 0)
            },
            Reject::NotNewer,
        ),
        (
            "settling",
            node("new", 990),
            Reject::Settling { until: at(1020) },
        ),
        (
            "cordoned",
            NodeSummary {
                unschedulable: true,
                ..fresh.clone()
            },
            Reject::Cordoned,
        ),
        (
            "autoscaler deleting",
            NodeSummary {
                taints: vec![taint("ToBeDeletedByClusterAutoscaler", "NoSchedule")],
                ..fresh.clone()
            },
            Reject::Taint("ToBeDeletedByClusterAutoscaler".into()),
        ),
        (
            "unreachable",
            NodeSummary {
                taints: vec![taint("node.kubernetes.io/unreachable", "NoExecute")],
                ..fresh.clone()
            },
            Reject::Taint("node.kubernetes.io/unreachable".into()),
        ),
        (
            "uninitialized",
            NodeSummary {
                taints: vec![taint(
                    "node.cloudprovider.kubernetes.io/uninitialized",
                    "NoSchedule",
                )],
                ..fresh.clone()
            },
            Reject::Taint("node.cloudprovider.kubernetes.io/uninitialized".into()),
        ),
    ];
    for (name, n, want) in table {
        assert_eq!(c.verdict(&n), Err(want), "{name}");
    }
    // An untolerated PreferNoSchedule taint blocks nothing, but the scheduler's
    // TaintToleration score steers a replacement elsewhere: no target.
    let soft = NodeSummary {
        taints: vec![taint("x", "PreferNoSchedule")],
        ..fresh.clone()
    };
    assert_eq!(c.verdict(&soft), Err(Reject::SoftTaint("x".into())));
    // Exactly at the settle boundary it counts.
    assert!(c.verdict(&node("new", 970)).is_ok());
    // Unknown own scheduling time: no node is a reason.
    let mut unknown = World::new();
    unknown.own.scheduled_at = None;
    assert_eq!(unknown.verdict(&fresh), Err(Reject::OwnScheduleUnknown));
}

#[test]
fn tolerated_taints_and_placement_rules() {
    let mut c = World::new();
    let mut n = node("new", 500);
    n.taints = vec![Taint {
        key: "hub.jupyter.org/dedicated".into(),
        value: Some("user".into()),
        effect: "NoSchedule".into(),
    }];
    n.labels = [("pool".to_string(), "user".to_string())].into();
    assert!(matches!(c.verdict(&n), Err(Reject::Taint(_))));
    c.own.tolerations = vec![Toleration {
        key: Some("hub.jupyter.org/dedicated".into()),
        operator: Some("Equal".into()),
        value: Some("user".into()),
        effect: Some("NoSchedule".into()),
    }];
    assert!(c.verdict(&n).is_ok());
    c.own.node_selector = [("pool".to_string(), "other".to_string())].into();
    assert_eq!(c.verdict(&n), Err(Reject::Placement));
    c.own.node_selector = [("pool".to_string(), "user".to_string())].into();
    assert!(c.verdict(&n).is_ok());
    c.own.affinity = vec![model::NodeTerm {
        labels: vec![Requirement::In("zone".into(), vec!["a".into()])],
        fields: vec![],
    }];
    assert_eq!(c.verdict(&n), Err(Reject::Placement));
    n.labels.insert("zone".into(), "a".into());
    assert!(c.verdict(&n).is_ok());
    c.own.affinity.push(model::NodeTerm {
        labels: vec![],
        fields: vec![Requirement::In("metadata.name".into(), vec!["new".into()])],
    });
    n.labels.remove("zone");
    assert!(
        c.verdict(&n).is_ok(),
        "terms are ORed: the name term matches"
    );
}

#[test]
fn image_gate_present_missing_truncated() {
    let mut c = World::new();
    c.policy.required_images =
        selfdestruct_decision::images::parse_list("jupyter/scipy:1,quay.io/x/y:2").expect("valid");
    let mut n = node("new", 500);
    assert!(matches!(c.verdict(&n), Err(Reject::ImagesMissing(m)) if m.len() == 2));
    n.images_present = vec![0];
    assert_eq!(
        c.verdict(&n),
        Err(Reject::ImagesMissing(vec!["quay.io/x/y:2".into()]))
    );
    n.images_truncated = true;
    assert!(matches!(c.verdict(&n), Err(Reject::ImagesUnconfirmed(_))));
    n.images_present = vec![0, 1];
    assert!(
        c.verdict(&n).is_ok(),
        "all present even in a truncated list"
    );
    c.nodes = Some(vec![node("old", 0), n]);
    let d = c.decide();
    assert_eq!(moves_to(&d), Some("new"));
    let Decision::Move { trigger } = d else {
        unreachable!()
    };
    assert_eq!(
        trigger.to_string(),
        "node new Ready 8m20s ago with images pulled"
    );
}

#[test]
fn combined_rules_pick_the_longest_ready_valid_node() {
    let mut c = World::new();
    c.nodes = Some(vec![
        node("old", 0),
        NodeSummary {
            unschedulable: true,
            ..node("cordoned", 100)
        },
        node("b-new", 600),
        node("a-new", 600),
        node("settling", 995),
    ]);
    assert_eq!(moves_to(&c.decide()), Some("a-new"));
    c.nodes = Some(vec![node("old", 0), node("settling", 995)]);
    assert_eq!(
        c.decide(),
        Decision::Wait {
            until: Some(at(1025)),
            hold: None
        },
        "wakes when the node has settled"
    );
}

#[test]
fn no_node_view_or_trigger_off_means_timer_only() {
    let mut c = World::new();
    c.nodes = None;
    assert_eq!(c.decide(), WAIT_FOR_EVENTS);
    c.nodes = Some(vec![node("new", 500)]);
    c.policy.move_to_new_nodes = false;
    assert_eq!(c.decide(), WAIT_FOR_EVENTS);
}

#[test]
fn lifetime_timer_counts_from_pod_start_and_jitters() {
    let mut c = World::new();
    c.nodes = None;
    c.memory.lifetime = Some(Duration::from_secs(2000));
    assert_eq!(
        c.decide(),
        Decision::Wait {
            until: Some(at(2000)),
            hold: None
        }
    );
    c.now = at(2000);
    c.policy.move_jitter = Duration::from_secs(60);
    c.draw = 0.25;
    let d = c.decide();
    let want = Trigger::Lifetime {
        lifetime: Duration::from_secs(2000),
    };
    assert_eq!(
        d,
        Decision::Arm {
            at: at(2015),
            trigger: want.clone()
        }
    );
    c.memory.apply(c.now, &d);
    c.now = at(2010);
    assert!(
        matches!(c.decide(), Decision::Arm { at: a, .. } if a == at(2015)),
        "keeps its time"
    );
    c.now = at(2015);
    assert_eq!(
        c.decide(),
        Decision::Move {
            trigger: want.clone()
        }
    );
    assert_eq!(want.to_string(), "lifetime 33m20s reached");
    // A restart long after expiry arms with a delay instead of moving at once.
    let mut late = World::new();
    late.nodes = None;
    late.memory.lifetime = Some(Duration::from_secs(10));
    late.policy.move_jitter = Duration::from_secs(60);
    late.draw = 0.9;
    assert!(matches!(late.decide(), Decision::Arm { at: a, .. } if a == at(1054)));
    // Zero lifetime is off.
    late.memory.lifetime = Some(Duration::ZERO);
    assert_eq!(late.decide(), WAIT_FOR_EVENTS);
}

#[test]
fn draw_lifetime_is_uniform_in_range() {
    let mut p = policy();
    assert_eq!(p.draw_lifetime(0.3), None);
    p.lifetime = Some((Duration::from_secs(100), Duration::from_secs(200)));
    assert_eq!(p.draw_lifetime(0.0), Some(Duration::from_secs(100)));
    assert_eq!(p.draw_lifetime(0.5), Some(Duration::from_secs(150)));
    assert_eq!(
        Memory::new(&p, 1.0).lifetime,
        Some(Duration::from_secs(200))
    );
}

#[test]
fn armed_move_is_rechecked_and_dropped_when_the_node_goes() {
    let mut c = World::new();
    c.policy.move_jitter = Duration::from_secs(100);
    c.nodes = Some(vec![node("old", 0), node("new", 500)]);
    let d = c.decide();
    assert!(matches!(d, Decision::Arm { .. }));
    c.memory.apply(c.now, &d);
    c.now = at(1100);
    c.nodes = Some(vec![node("old", 0)]);
    let d = c.decide();
    assert_eq!(d, WAIT_FOR_EVENTS);
    c.memory.apply(c.now, &d);
    assert_eq!(c.memory.armed, None);
}

#[test]
fn churn_controls_hold_moves() {
    let mut c = World::new();
    c.nodes = Some(vec![node("old", 0), node("new", 500)]);
    // min age
    c.policy.min_age = Duration::from_secs(1200);
    assert_eq!(
        c.decide(),
        Decision::Wait {
            until: Some(at(1200)),
            hold: Some(Hold::TooYoung)
        }
    );
    c.policy.min_age = Duration::ZERO;
    // per-hour cap
    c.policy.max_moves_per_hour = 2;
    c.memory.attempts = vec![at(100), at(900)];
    assert_eq!(
        c.decide(),
        Decision::Wait {
            until: Some(at(3700)),
            hold: Some(Hold::MoveCap)
        }
    );
    c.now = at(3700);
    assert!(moves_to(&c.decide()).is_some(), "the old attempt aged out");
    c.now = at(1000);
    c.memory.attempts.clear();
    // backoff
    c.memory.retry_at = Some(at(1500));
    assert_eq!(
        c.decide(),
        Decision::Wait {
            until: Some(at(1500)),
            hold: Some(Hold::Backoff)
        }
    );
    c.memory.retry_at = None;
    // finished
    c.memory.finished = true;
    assert_eq!(
        c.decide(),
        Decision::Wait {
            until: None,
            hold: Some(Hold::Finished)
        }
    );
    c.memory.finished = false;
    c.own.terminating = true;
    assert!(matches!(
        c.decide(),
        Decision::Wait {
            hold: Some(Hold::Finished),
            ..
        }
    ));
}

#[test]
fn min_age_holds_node_moves_but_not_the_lifetime() {
    let mut c = World::new();
    c.policy.min_age = Duration::from_secs(120);
    c.policy.lifetime = Some((Duration::from_secs(3), Duration::from_secs(3)));
    c.memory.lifetime = Some(Duration::from_secs(3));
    // A 3 s lifetime fires at 3 s although the pod is younger than MIN_AGE.
    c.nodes = Some(vec![node("old", 0)]);
    c.now = at(2);
    assert_eq!(
        c.decide(),
        Decision::Wait {
            until: Some(at(3)),
            hold: None
        }
    );
    c.now = at(3);
    assert_eq!(
        c.decide(),
        Decision::Move {
            trigger: Trigger::Lifetime {
                lifetime: Duration::from_secs(3)
            }
        }
    );
    // ... through the move jitter and the sibling discipline like any move.
    c.policy.move_jitter = Duration::from_secs(10);
    assert!(matches!(
        c.decide(),
        Decision::Arm { at: a, trigger: Trigger::Lifetime { .. } } if a == at(8)
    ));
    c.siblings = Some(vec![sibling("placeholder-1", 1, None, true)]);
    assert_eq!(
        c.decide(),
        Decision::Wait {
            until: None,
            hold: Some(Hold::SiblingBusy("placeholder-1".into()))
        }
    );
    // A node move still waits for MIN_AGE, even with the lifetime set.
    let mut c = World::new();
    c.policy.min_age = Duration::from_secs(120);
    c.memory.lifetime = Some(Duration::from_secs(3600));
    c.nodes = Some(vec![node("old", 0), node("new", 10)]);
    c.now = at(60);
    assert_eq!(
        c.decide(),
        Decision::Wait {
            until: Some(at(120)),
            hold: Some(Hold::TooYoung)
        }
    );
    c.now = at(120);
    assert_eq!(moves_to(&c.decide()), Some("new"));
    // Both due while young: the lifetime goes, the node move does not take its place.
    let mut c = World::new();
    c.policy.min_age = Duration::from_secs(120);
    c.memory.lifetime = Some(Duration::from_secs(30));
    c.nodes = Some(vec![node("old", 0), node("new", 10)]);
    c.now = at(60);
    assert!(matches!(
        c.decide(),
        Decision::Move {
            trigger: Trigger::Lifetime { .. }
        }
    ));
}

#[test]
fn an_old_node_whose_ready_condition_blips_is_not_new() {
    let mut c = World::new();
    // node-b exists since before the own pod was scheduled (at 0) and flips
    // NotReady -> Ready at 900 (kubelet restart): a fresh lastTransitionTime.
    let blip = NodeSummary {
        created: Some(at(0) - Duration::from_secs(86_400)),
        ..node("node-b", 900)
    };
    c.nodes = Some(vec![node("old", 0), blip.clone()]);
    assert_eq!(c.verdict(&blip), Err(Reject::NotNewer));
    assert_eq!(c.decide(), WAIT_FOR_EVENTS);
    // No creation time known: not provably new.
    let unknown = NodeSummary {
        created: None,
        ..node("node-c", 900)
    };
    assert_eq!(c.verdict(&unknown), Err(Reject::NotNewer));
    // Created after the own pod was scheduled, Ready for the settle time: new.
    let fresh = node("node-d", 900);
    assert_eq!(c.verdict(&fresh), Ok(Duration::from_secs(100)));
    // Times have second precision: created in the second the own pod was scheduled
    // in, it was not Ready then, so it is new; a second earlier, it is not.
    let same_second = NodeSummary {
        created: Some(at(0)),
        ..node("node-f", 900)
    };
    assert_eq!(c.verdict(&same_second), Ok(Duration::from_secs(100)));
    let second_before = NodeSummary {
        created: Some(at(0) - Duration::from_secs(1)),
        ..node("node-g", 900)
    };
    assert_eq!(c.verdict(&second_before), Err(Reject::NotNewer));
    // A new node that blips settles again from its new Ready time.
    let reblip = NodeSummary {
        created: Some(at(500)),
        ..node("node-e", 990)
    };
    assert_eq!(
        c.verdict(&reblip),
        Err(Reject::Settling { until: at(1020) })
    );
}

fn sibling(name: &str, created: u64, node: Option<&str>, pending: bool) -> Sibling {
    Sibling {
        name: name.into(),
        uid: format!("uid-{name}"),
        created: Some(at(created)),
        node_name: node.map(Into::into),
        pending,
        terminating: false,
    }
}

#[test]
fn sibling_awareness() {
    let mut c = World::new();
    c.nodes = Some(vec![node("old", 0), node("new", 500)]);
    c.siblings = Some(vec![
        sibling("placeholder-0", 0, Some("old"), false),
        sibling("placeholder-1", 0, Some("old"), false),
    ]);
    assert_eq!(moves_to(&c.decide()), Some("new"));
    // a sibling Pending holds every move (also the timer)
    c.siblings = Some(vec![sibling("placeholder-1", 900, None, true)]);
    assert_eq!(
        c.decide(),
        Decision::Wait {
            until: None,
            hold: Some(Hold::SiblingBusy("placeholder-1".into()))
        }
    );
    // a terminating sibling too
    let mut going = sibling("placeholder-1", 0, Some("old"), false);
    going.terminating = true;
    c.siblings = Some(vec![going]);
    assert!(matches!(
        c.decide(),
        Decision::Wait {
            hold: Some(Hold::SiblingBusy(_)),
            ..
        }
    ));
    // the own pod never holds itself, even while it looks Pending
    c.siblings = Some(vec![sibling("placeholder-0", 0, None, true)]);
    assert_eq!(moves_to(&c.decide()), Some("new"));
    // a sibling created after the node was Ready landed on an older node: full
    c.siblings = Some(vec![sibling("placeholder-1", 700, Some("old"), false)]);
    assert_eq!(
        c.verdict(&node("new", 500)),
        Err(Reject::Full {
            sibling: "placeholder-1".into()
        })
    );
    assert_eq!(c.decide(), WAIT_FOR_EVENTS);
    // ... but landing on the new node, or on another newer node, is no evidence
    c.siblings = Some(vec![sibling("placeholder-1", 700, Some("new"), false)]);
    assert!(c.verdict(&node("new", 500)).is_ok());
    c.nodes = Some(vec![node("old", 0), node("new", 500), node("newer", 600)]);
    c.siblings = Some(vec![sibling("placeholder-1", 700, Some("newer"), false)]);
    assert!(c.verdict(&node("new", 500)).is_ok());
    // a sibling created before the node was Ready says nothing about it
    c.siblings = Some(vec![sibling("placeholder-1", 400, Some("old"), false)]);
    assert!(c.verdict(&node("new", 500)).is_ok());
}

/// The "full" rule's evidence: a sibling created after the node became usable
/// that landed on an old node. Other placements say nothing about the node.
#[test]
fn only_a_sibling_on_an_old_node_after_the_node_became_usable_shows_it_full() {
    let old_day = |name: &str| NodeSummary {
        created: Some(at(0) - Duration::from_secs(86_400)),
        ..node(name, 0)
    };
    // Two nodes of one scale-up: n2 Ready at 490 (created 400), new Ready at 500.
    let n2 = NodeSummary {
        created: Some(at(400)),
        ..node("n2", 490)
    };
    let new = node("new", 500);
    let mut c = World::new();
    c.nodes = Some(vec![node("old", 0), old_day("old2"), n2, new.clone()]);
    let full = |s: &str| {
        Err(Reject::Full {
            sibling: s.to_string(),
        })
    };
    let table: Vec<(&str, Sibling, Result<Duration, Reject>)> = vec![
        (
            "on the own node (old: the own pod was scheduled onto it)",
            sibling("placeholder-1", 700, Some("old"), false),
            full("placeholder-1"),
        ),
        (
            "on another old node",
            sibling("placeholder-1", 700, Some("old2"), false),
            full("placeholder-1"),
        ),
        (
            "(a) on a new node that became Ready a little earlier",
            sibling("placeholder-1", 700, Some("n2"), false),
            Ok(Duration::from_secs(500)),
        ),
        (
            "(b) on a node not in the view (deleted, or outside the node selector)",
            sibling("placeholder-1", 700, Some("gone"), false),
            Ok(Duration::from_secs(500)),
        ),
        (
            "on the node itself",
            sibling("placeholder-1", 700, Some("new"), false),
            Ok(Duration::from_secs(500)),
        ),
        (
            "created before the node was Ready",
            sibling("placeholder-1", 400, Some("old2"), false),
            Ok(Duration::from_secs(500)),
        ),
        (
            "created in the second it became Ready",
            sibling("placeholder-1", 500, Some("old2"), false),
            Ok(Duration::from_secs(500)),
        ),
    ];
    let mut wrong = Vec::new();
    for (name, s, want) in table {
        c.siblings = Some(vec![s]);
        let got = c.verdict(&new);
        if got != want {
            wrong.push(format!("{name}: {got:?}, want {want:?}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    // A node of unknown age is not known to be old.
    c.nodes = Some(vec![
        node("old", 0),
        NodeSummary {
            created: None,
            ..node("unknown", 0)
        },
        new.clone(),
    ]);
    c.siblings = Some(vec![sibling("placeholder-1", 700, Some("unknown"), false)]);
    assert!(c.verdict(&new).is_ok());
}

/// (c) The node-gate's startup taint (or a cordon) keeps a Ready node from
/// taking pods; Kubernetes records no time for its removal, so the agent notes
/// when it first saw the node usable, and only siblings created after that count.
#[test]
fn a_sibling_created_while_the_node_was_not_usable_says_nothing() {
    let gated = NodeSummary {
        taints: vec![model::Taint {
            key: model::IMAGES_PENDING_TAINT.into(),
            value: Some("true".into()),
            effect: "NoSchedule".into(),
        }],
        ..node("new", 500)
    };
    let open = node("new", 500);
    let mut c = World::new();
    // Ready at 500, gated: a sibling re-created at 700 had to go to the old node.
    c.nodes = Some(vec![node("old", 0), gated.clone()]);
    c.siblings = Some(vec![sibling("placeholder-1", 700, Some("old"), false)]);
    c.now = at(600);
    c.memory.observe_nodes(c.now, &c.own, c.nodes.as_deref());
    assert_eq!(c.memory.usable_since.get("new"), None, "gated: not usable");
    assert_eq!(c.memory.usable_since.get("old"), Some(&at(600)));
    c.now = at(750);
    c.memory.observe_nodes(c.now, &c.own, c.nodes.as_deref());
    assert_eq!(
        c.verdict(&gated),
        Err(Reject::Taint(model::IMAGES_PENDING_TAINT.into()))
    );
    // The gate opens at 800: the sibling of 700 is no evidence, the node counts.
    c.nodes = Some(vec![node("old", 0), open.clone()]);
    c.now = at(800);
    c.memory.observe_nodes(c.now, &c.own, c.nodes.as_deref());
    assert_eq!(c.memory.usable_since.get("new"), Some(&at(800)));
    assert_eq!(c.verdict(&open), Ok(Duration::from_secs(300)));
    assert_eq!(moves_to(&c.decide()), Some("new"));
    // Later observations keep the first time.
    c.now = at(900);
    c.memory.observe_nodes(c.now, &c.own, c.nodes.as_deref());
    assert_eq!(c.memory.usable_since.get("new"), Some(&at(800)));
    // A sibling created after the gate opened that still went to the old node: full.
    c.siblings = Some(vec![sibling("placeholder-1", 850, Some("old"), false)]);
    assert_eq!(
        c.verdict(&open),
        Err(Reject::Full {
            sibling: "placeholder-1".into()
        })
    );
    // Cordoned and uncordoned: usable again from when that was seen.
    let cordoned = NodeSummary {
        unschedulable: true,
        ..open.clone()
    };
    c.nodes = Some(vec![node("old", 0), cordoned]);
    c.memory.observe_nodes(c.now, &c.own, c.nodes.as_deref());
    assert_eq!(c.memory.usable_since.get("new"), None);
    c.nodes = Some(vec![node("old", 0), open.clone()]);
    c.now = at(950);
    c.memory.observe_nodes(c.now, &c.own, c.nodes.as_deref());
    assert_eq!(c.memory.usable_since.get("new"), Some(&at(950)));
    assert!(c.verdict(&open).is_ok(), "the sibling of 850 predates 950");
    // Nodes that leave the view are forgotten, and so is everything without a view.
    assert!(c.memory.usable_since.contains_key("old"));
    c.nodes = Some(vec![open.clone()]);
    c.memory.observe_nodes(c.now, &c.own, c.nodes.as_deref());
    assert_eq!(
        c.memory.usable_since.keys().collect::<Vec<_>>(),
        vec!["new"]
    );
    c.memory.observe_nodes(c.now, &c.own, None);
    assert!(c.memory.usable_since.is_empty());
    // The own pod's tolerations count: a placeholder that tolerates the gate's
    // taint can use the gated node at once.
    c.own.tolerations = vec![Toleration {
        key: Some(model::IMAGES_PENDING_TAINT.into()),
        operator: Some("Exists".into()),
        value: None,
        effect: Some("NoSchedule".into()),
    }];
    c.memory.observe_nodes(at(600), &c.own, Some(&[gated]));
    assert_eq!(c.memory.usable_since.get("new"), Some(&at(600)));
}

/// Issue 32, 1b: the cluster autoscaler puts `DeletionCandidateOfClusterAutoscaler`
/// (PreferNoSchedule) on an empty new node 2-6 s after it turns Ready. A
/// replacement that does not tolerate it is steered to an old node by the
/// scheduler's TaintToleration score: while the node carries such a taint, a
/// sibling landing elsewhere says nothing about its room, and once the taint is
/// gone only siblings created after count. A pod that tolerates it (every template
/// shipped) sees no difference.
#[test]
fn a_sibling_steered_by_a_soft_taint_does_not_show_the_node_full() {
    let deletion_candidate = model::Taint {
        key: "DeletionCandidateOfClusterAutoscaler".into(),
        value: Some("1732620116".into()),
        effect: "PreferNoSchedule".into(),
    };
    let soft = NodeSummary {
        taints: vec![deletion_candidate],
        ..node("new", 500)
    };
    let open = node("new", 500);
    let tolerates = vec![Toleration {
        key: Some("DeletionCandidateOfClusterAutoscaler".into()),
        operator: Some("Exists".into()),
        value: None,
        effect: Some("PreferNoSchedule".into()),
    }];
    let full = |s: &str| Err(Reject::Full { sibling: s.into() });
    let soft_taint = Err(Reject::SoftTaint(
        "DeletionCandidateOfClusterAutoscaler".into(),
    ));
    // (case, own tolerations, the node as seen at 600 then at 800, sibling created
    // at, verdict at 900 on the node as seen at 800)
    type Row = (
        &'static str,
        bool,
        NodeSummary,
        NodeSummary,
        u64,
        Result<Duration, Reject>,
    );
    let table: Vec<Row> = vec![
        (
            "no soft taint: full",
            false,
            open.clone(),
            open.clone(),
            700,
            full("placeholder-1"),
        ),
        (
            "still tainted: no target, not full",
            false,
            soft.clone(),
            soft.clone(),
            700,
            soft_taint.clone(),
        ),
        (
            "steered while tainted, taint gone since",
            false,
            soft.clone(),
            open.clone(),
            700,
            Ok(Duration::from_secs(400)),
        ),
        (
            "created after the taint went: full",
            false,
            soft.clone(),
            open.clone(),
            850,
            full("placeholder-1"),
        ),
        (
            "tolerated: the taint changes nothing",
            true,
            soft.clone(),
            soft.clone(),
            700,
            full("placeholder-1"),
        ),
        (
            "tolerated, not re-created since Ready",
            true,
            soft.clone(),
            soft.clone(),
            400,
            Ok(Duration::from_secs(400)),
        ),
    ];
    let mut wrong = Vec::new();
    for (case, tolerated, at_600, at_800, created, want) in table {
        let mut c = World::new();
        if tolerated {
            c.own.tolerations = tolerates.clone();
        }
        c.siblings = Some(vec![sibling("placeholder-1", created, Some("old"), false)]);
        for (t, seen) in [(600, &at_600), (800, &at_800)] {
            c.nodes = Some(vec![node("old", 0), seen.clone()]);
            c.now = at(t);
            c.memory.observe_nodes(c.now, &c.own, c.nodes.as_deref());
        }
        c.now = at(900);
        let got = c.verdict(&at_800);
        if got != want {
            wrong.push(format!("{case}: {got:?}, want {want:?}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn no_move_before_the_first_sibling_list() {
    let mut c = World::new();
    c.memory.lifetime = Some(Duration::from_secs(10));
    c.nodes = Some(vec![node("old", 0), node("new", 500)]);
    c.siblings = None;
    c.siblings_loading = true;
    let not_listed = Decision::Wait {
        until: None,
        hold: Some(Hold::SiblingsNotListed),
    };
    assert_eq!(c.decide(), not_listed, "the lifetime and the node are due");
    c.nodes = None;
    assert_eq!(c.decide(), not_listed, "the lifetime alone");
    // The list arrives and shows a Pending sibling: that holds.
    c.siblings_loading = false;
    c.siblings = Some(vec![sibling("placeholder-1", 900, None, true)]);
    assert_eq!(
        c.decide(),
        Decision::Wait {
            until: None,
            hold: Some(Hold::SiblingBusy("placeholder-1".into()))
        }
    );
    c.siblings = Some(vec![sibling("placeholder-1", 0, Some("old"), false)]);
    assert!(matches!(c.decide(), Decision::Move { .. }));
    // Refused or failed (no view, no longer loading): the PDB alone, as before.
    c.siblings = None;
    assert!(matches!(c.decide(), Decision::Move { .. }));
    // Nothing due: nothing held.
    c.memory.lifetime = None;
    c.siblings_loading = true;
    assert_eq!(c.decide(), WAIT_FOR_EVENTS);
    // A backoff or the cap still say when to look again.
    c.memory.lifetime = Some(Duration::from_secs(10));
    c.memory.retry_at = Some(at(1500));
    assert_eq!(
        c.decide(),
        Decision::Wait {
            until: Some(at(1500)),
            hold: Some(Hold::Backoff)
        }
    );
}

/// The clock stepped back: attempts dated in the future count toward the cap,
/// both when deciding and when a move prunes the record.
#[test]
fn attempts_dated_in_the_future_count_until_an_hour_after_them() {
    let mut c = World::new();
    c.nodes = Some(vec![node("old", 0), node("new", 10)]);
    c.policy.max_moves_per_hour = 12;
    let mv = Decision::Move {
        trigger: Trigger::Lifetime {
            lifetime: Duration::from_secs(1),
        },
    };
    let table: Vec<(&str, Vec<u64>, u64, usize)> = vec![
        ("all in the future", (1000..1012).collect(), 500, 13),
        ("an hour old is pruned", vec![0, 100], 3600, 2),
        ("just under an hour is kept", vec![1, 100], 3600, 3),
        ("a mix", vec![0, 3000, 9000], 3700, 3),
    ];
    for (name, attempts, now, kept) in table {
        let mut m = Memory {
            attempts: attempts.iter().map(|t| at(*t)).collect(),
            ..Memory::default()
        };
        m.apply(at(now), &mv);
        assert_eq!(m.attempts.len(), kept, "{name}: {:?}", m.attempts);
    }
    // After a move at 500, twelve attempts dated 1000..1011 still hold the next one.
    c.memory.attempts = (1000..1012).map(at).collect();
    c.now = at(500);
    c.memory.apply(c.now, &mv);
    assert_eq!(
        c.decide(),
        Decision::Wait {
            until: Some(at(500 + 3600)),
            hold: Some(Hold::MoveCap)
        }
    );
}

#[test]
fn a_replacement_never_chases_a_node_that_was_already_there() {
    let mut c = World::new();
    c.nodes = Some(vec![node("old", 0), node("new", 500)]);
    // the moved pod's successor was scheduled after "new" became Ready
    c.own.node_name = Some("old".into());
    c.own.scheduled_at = Some(at(800));
    c.own.started_at = Some(at(800));
    assert_eq!(c.verdict(&node("new", 500)), Err(Reject::NotNewer));
    assert_eq!(c.decide(), WAIT_FOR_EVENTS);
}

#[test]
fn extreme_durations_saturate_instead_of_panicking() {
    let mut c = World::new();
    c.nodes = Some(vec![node("old", 0), node("new", 500)]);
    c.memory.lifetime = Some(Duration::MAX);
    c.policy.node_settle = Duration::MAX;
    c.policy.min_age = Duration::MAX;
    c.policy.move_jitter = Duration::MAX;
    c.draw = f64::NAN;
    assert!(matches!(c.decide(), Decision::Wait { .. }));
    c.policy.node_settle = Duration::ZERO;
    c.policy.min_age = Duration::ZERO;
    c.draw = 1.0;
    assert!(matches!(c.decide(), Decision::Arm { .. }));
    let mut m = Memory::default();
    m.record(
        SystemTime::UNIX_EPOCH + Duration::from_secs(u64::from(u32::MAX) << 20),
        &Outcome::Failed,
        1.0,
    );
    assert!(m.retry_at.is_some());
    assert_eq!(scaled(Duration::MAX, 1.0), Duration::MAX);
    assert_eq!(
        scaled(Duration::from_secs(10), f64::INFINITY),
        Duration::ZERO
    );
    let mut p = policy();
    p.lifetime = Some((Duration::ZERO, Duration::MAX));
    assert!(p.draw_lifetime(0.999_999).is_some());
}

#[test]
fn outcomes_update_memory() {
    let now = at(0);
    let mut m = Memory::default();
    m.record(now, &Outcome::Busy { retry_after: None }, 0.0);
    assert_eq!(m.retry_at, Some(at(5)));
    m.record(now, &Outcome::Busy { retry_after: None }, 1.0);
    assert_eq!(m.retry_at, Some(at(20)));
    m.record(
        now,
        &Outcome::Busy {
            retry_after: Some(Duration::from_secs(7)),
        },
        0.0,
    );
    assert_eq!(
        m.retry_at,
        Some(at(20)),
        "Retry-After is a floor, not a way around the backoff"
    );
    // Retry-After: 0 (seen on hostile servers) still backs off, and keeps doubling.
    let mut zero = Memory::default();
    let busy0 = Outcome::Busy {
        retry_after: Some(Duration::ZERO),
    };
    zero.record(now, &busy0, 0.0);
    assert_eq!(zero.retry_at, Some(at(5)));
    zero.record(now, &busy0, 0.0);
    assert_eq!(zero.retry_at, Some(at(10)));
    // A Retry-After longer than the backoff is honoured (up to the cap).
    let mut long = Memory::default();
    long.record(
        now,
        &Outcome::Busy {
            retry_after: Some(Duration::from_secs(100)),
        },
        0.0,
    );
    assert_eq!(long.retry_at, Some(at(100)));
    long.record(
        now,
        &Outcome::Busy {
            retry_after: Some(Duration::from_secs(100_000)),
        },
        0.0,
    );
    assert_eq!(long.retry_at, Some(at(300)), "capped");
    let mut denied = Memory::default();
    denied.record(now, &Outcome::Denied, 0.0);
    assert!(denied.retry_at >= Some(at(300)), "403 retries rarely");
    let mut failed = Memory::default();
    failed.record(now, &Outcome::Failed, 0.0);
    assert_eq!(failed.retry_at, Some(now + Duration::from_millis(500)));
    m.record(now, &Outcome::Gone, 0.0);
    assert!(m.finished && m.retry_at.is_none());
    let mut done = Memory::default();
    done.record(now, &Outcome::Done, 0.0);
    assert!(done.finished);
    // attempts are recorded by apply(Move) and old ones pruned
    let mut m = Memory {
        attempts: vec![at(0)],
        ..Memory::default()
    };
    let mv = Decision::Move {
        trigger: Trigger::Lifetime {
            lifetime: Duration::from_secs(1),
        },
    };
    m.apply(at(4000), &mv);
    assert_eq!(m.attempts, vec![at(4000)]);
}

/// The nodes the agent reads in full (`OwnPod::is_candidate`).
#[test]
fn candidates_are_new_nodes_the_placement_rules_accept_other_than_the_own() {
    let scheduled = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    let own = model::OwnPod {
        node_name: Some("own".into()),
        scheduled_at: Some(scheduled),
        node_selector: [("pool".to_string(), "user".to_string())].into(),
        ..model::OwnPod::default()
    };
    let node = |name: &str, created: u64, pool: &str| NodeSummary {
        name: name.into(),
        created: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(created)),
        labels: [("pool".to_string(), pool.to_string())].into(),
        ..NodeSummary::default()
    };
    assert!(
        own.is_candidate(&node("new", 1_000, "user")),
        "same second counts as new"
    );
    assert!(own.is_candidate(&node("new", 2_000, "user")));
    assert!(!own.is_candidate(&node("old", 999, "user")));
    assert!(!own.is_candidate(&node("new", 2_000, "system")));
    assert!(!own.is_candidate(&node("own", 2_000, "user")));
    let unscheduled = model::OwnPod {
        scheduled_at: None,
        ..own
    };
    assert!(!unscheduled.is_candidate(&node("new", 2_000, "user")));
}

/// Issue 45: with `avoid_deletion_candidates`, a node the cluster autoscaler marks as a
/// deletion candidate is no target even when the pod tolerates the soft taint (every shipped
/// template does), and is one again once the autoscaler takes the taint off.
#[test]
fn a_deletion_candidate_is_no_target_when_the_policy_avoids_it() {
    let marked = NodeSummary {
        taints: vec![model::Taint {
            key: model::DELETION_CANDIDATE_TAINT.into(),
            value: Some("1732620116".into()),
            effect: "PreferNoSchedule".into(),
        }],
        ..node("new", 500)
    };
    let mut c = World::new();
    c.own.tolerations = vec![Toleration {
        key: Some(model::DELETION_CANDIDATE_TAINT.into()),
        operator: Some("Exists".into()),
        value: None,
        effect: Some("PreferNoSchedule".into()),
    }];
    assert_eq!(
        c.verdict(&marked),
        Ok(Duration::from_secs(500)),
        "off: tolerated"
    );
    c.policy.avoid_deletion_candidates = true;
    assert_eq!(c.verdict(&marked), Err(Reject::DeletionCandidate));
    assert_eq!(c.verdict(&node("new", 500)), Ok(Duration::from_secs(500)));
    assert!(moves_to(&decide(&c.clone().with_node(marked).snapshot())).is_none());
}
