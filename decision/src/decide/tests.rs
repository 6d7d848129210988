use super::*;
use crate::builder::{OWN, World, at, ready_node, running_sibling};

/// A sibling running on `node`, created at t=`created` seconds.
fn sibling(name: &str, node: Option<&str>, created: u64) -> Sibling {
    Sibling {
        created: Some(at(created)),
        node_name: node.map(str::to_string),
        ..running_sibling(name, "")
    }
}

/// The full rule with the siblings' nodes looked up once per view reports the same
/// nodes and the same sibling per node (the first witness in the view's order, not the
/// newest) as the scan of [`evaluate`]: several witnesses created after the new nodes
/// became usable, out of creation order; the own pod, a sibling on a new node and a
/// Pending one among them.
#[test]
fn the_looked_up_full_rule_names_the_same_sibling_as_the_scan() {
    let mut w = World::new();
    // Scheduled after the old nodes were created (a node of the same second is new).
    w.own.scheduled_at = Some(at(10));
    w.nodes = Some(vec![
        ready_node("old", 0),
        ready_node("old2", 0),
        ready_node("new-a", 100),
        ready_node("new-b", 100),
    ]);
    w.siblings = Some(vec![
        sibling(OWN, Some("old"), 500),
        sibling("placeholder-1", Some("new-a"), 600),
        sibling("placeholder-2", None, 650),
        sibling("placeholder-3", Some("old2"), 300),
        sibling("placeholder-4", Some("old"), 700),
        sibling("placeholder-5", Some("old"), 200),
    ]);
    let full = |w: &World| {
        let snap = w.snapshot();
        let (nodes, siblings) = (snap.nodes.unwrap(), snap.siblings.unwrap());
        let placed = SiblingNodes::new(nodes, siblings);
        let names = |e: Evaluation| -> Vec<(String, String)> {
            (e.full.iter())
                .map(|f| (f.node.name.clone(), f.sibling.clone()))
                .collect()
        };
        let scanned = evaluate(&snap);
        let looked_up = evaluate_placed(&snap, Some(&placed));
        assert_eq!(looked_up.decision, scanned.decision);
        (names(scanned), names(looked_up))
    };
    let (scanned, looked_up) = full(&w);
    let want = |s: &str| vec![("new-a".into(), s.into()), ("new-b".into(), s.into())];
    assert_eq!(scanned, want("placeholder-3"));
    assert_eq!(looked_up, scanned);
    // Usable only from t=650: the one witness created after it names both.
    w.memory
        .observe_nodes(at(650), &w.own.clone(), w.nodes.as_deref());
    let (scanned, looked_up) = full(&w);
    assert_eq!(scanned, want("placeholder-4"));
    assert_eq!(looked_up, scanned);
    // From t=700: none is newer, neither node is full.
    w.memory = Memory::default();
    w.memory
        .observe_nodes(at(700), &w.own.clone(), w.nodes.as_deref());
    let (scanned, looked_up) = full(&w);
    assert_eq!(scanned, vec![]);
    assert_eq!(looked_up, scanned);
}
