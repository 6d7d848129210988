//! The list bounds ([`Weigh`], [`NODE_LIST_BYTES`]).

use super::*;

/// A GKE node as the metadata watch keeps it: its name, creation time and one
/// label the placement rules read.
fn gke_node(i: usize) -> NodeSummary {
    NodeSummary {
        name: format!("gke-prod-default-pool-4f6d0c2e-{i:05}"),
        created: Some(std::time::SystemTime::UNIX_EPOCH),
        labels: [(
            "cloud.google.com/gke-nodepool".to_string(),
            "default-pool".to_string(),
        )]
        .into(),
        ..NodeSummary::default()
    }
}

#[test]
fn the_node_list_bound_holds_more_nodes_than_any_cluster() {
    let one = gke_node(0).weight();
    eprintln!(
        "a node summary: {} bytes, {one} with its name and a label",
        std::mem::size_of::<NodeSummary>()
    );
    assert!(one <= 320, "{one} bytes");
    // GKE's largest clusters hold 65,000 nodes.
    let held: usize = (0..65_000).map(|i| gke_node(i).weight()).sum();
    assert!(held <= NODE_LIST_BYTES, "{held} bytes for 65,000 nodes");
}

#[test]
fn the_sibling_list_bound_holds_thousands_of_placeholders() {
    let pod = Sibling {
        name: "user-placeholder-1234".into(),
        uid: "3b0a5c1e-0000-4000-8000-000000001234".into(),
        created: Some(std::time::SystemTime::UNIX_EPOCH),
        node_name: Some("gke-prod-default-pool-4f6d0c2e-00001".into()),
        pending: false,
        terminating: false,
    };
    eprintln!("a sibling summary: {} bytes", pod.weight());
    assert!(SIBLING_LIST_BYTES / pod.weight() >= 10_000);
}
