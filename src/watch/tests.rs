//! The list bounds ([`Weigh`], [`NODE_LIST_BYTES`]).

use super::*;
use kube::core::Status;
use kube::runtime::watcher;

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

// The watcher errors and how they are handled (from tests/units.rs).

fn status(code: u16) -> Status {
    Status {
        code,
        message: format!("m{code}"),
        ..Status::default()
    }
}

#[test]
fn a_410_on_opening_a_watch_lists_again_and_denials_are_reported() {
    let open = watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(status(410))));
    assert_eq!(classify(&open), Failure::Transient { relist: true });
    let event = watcher::Error::WatchError(Box::new(status(410)));
    assert_eq!(classify(&event), Failure::Transient { relist: false });
    let denied = watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status(403))));
    assert_eq!(classify(&denied), Failure::Denied("m403".into()));
    let denied = watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(status(403))));
    assert_eq!(classify(&denied), Failure::Denied("m403".into()));
    // Expired credentials: kube reads a token file again within a minute.
    let expired = watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status(401))));
    assert_eq!(classify(&expired), Failure::Transient { relist: false });
    // An ERROR in an open watch's stream lists again and keeps the view.
    for code in [401, 403] {
        let event = watcher::Error::WatchError(Box::new(status(code)));
        assert_eq!(classify(&event), Failure::Transient { relist: true });
    }
    assert_eq!(
        classify(&watcher::Error::NoResourceVersion),
        Failure::Transient { relist: false }
    );
}
