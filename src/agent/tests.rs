//! Unit tests of `agent` (a child module: they see its private items).

use super::decide::report_full_nodes;
use selfdestruct_decision::builder::{World, at, ready_node, running_sibling};
use selfdestruct_decision::evaluate;
use std::collections::BTreeSet;

/// A new node reported full is reported once, and forgotten when it leaves the
/// node view: the set of reported names does not grow with every node ever seen.
#[test]
fn full_nodes_are_reported_once_and_forgotten_with_the_node() {
    let mut w = World::new();
    w.nodes = Some(vec![
        ready_node("old", 0),
        ready_node("new-a", 500),
        ready_node("new-b", 500),
    ]);
    // Created after both were Ready, it still went to the old node: both are full.
    let mut late = running_sibling("placeholder-1", "old");
    late.created = Some(at(700));
    w.siblings = Some(vec![late]);
    // As the agent's loop does: the nodes found full by the one evaluation.
    let report = |w: &World, reported: &mut BTreeSet<String>| {
        let s = w.snapshot();
        report_full_nodes(s.nodes, &evaluate(&s).full, reported);
    };
    let mut reported = BTreeSet::new();
    report(&w, &mut reported);
    assert_eq!(reported, BTreeSet::from(["new-a".into(), "new-b".into()]));
    // new-a is scaled down: its name goes too.
    w.nodes = Some(vec![ready_node("old", 0), ready_node("new-b", 500)]);
    report(&w, &mut reported);
    assert_eq!(reported, BTreeSet::from(["new-b".to_string()]));
    // Also when nothing else is reported (siblings no longer watched) or the
    // node view is gone.
    w.siblings = None;
    w.nodes = Some(vec![ready_node("old", 0)]);
    report(&w, &mut reported);
    assert!(reported.is_empty(), "{reported:?}");
    reported.insert("new-c".into());
    w.nodes = None;
    report(&w, &mut reported);
    assert!(reported.is_empty(), "{reported:?}");
}
