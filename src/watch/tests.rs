//! The list bounds ([`Weigh`], [`NODE_LIST_BYTES`]).

use super::*;
use k8s_openapi::api::core::v1::ConfigMap;
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
fn a_410_or_400_on_opening_a_watch_lists_again_and_denials_are_reported() {
    // A 400: a resourceVersion the server refuses (issue 46, item 14).
    for code in [400, 410] {
        let open = watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(status(code))));
        assert_eq!(classify(&open), Failure::Transient { relist: true });
    }
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

// `Follower::on_event`: what `follow` does after each event, without I/O.

/// A summary of `WEIGHT` bytes.
#[derive(Debug)]
struct Named(String);

const WEIGHT: usize = 100;

impl Weigh for Named {
    fn weight(&self) -> usize {
        WEIGHT
    }
}

type Seen = watcher::Result<Event<ConfigMap>>;

fn object(name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm
}

fn init_apply(name: &str) -> Seen {
    Ok(Event::InitApply(object(name)))
}

fn apply(name: &str) -> Seen {
    Ok(Event::Apply(object(name)))
}

fn list_failed(code: u16) -> Seen {
    Err(watcher::Error::InitialListFailed(kube::Error::Api(
        Box::new(status(code)),
    )))
}

fn watch_start_failed(code: u16) -> Seen {
    Err(watcher::Error::WatchStartFailed(kube::Error::Api(
        Box::new(status(code)),
    )))
}

fn watch_error(code: u16) -> Seen {
    Err(watcher::Error::WatchError(Box::new(status(code))))
}

/// An action in a few words: `read`, `send reset a,b`, `back off transient #3
/// relist tell unlisted`.
fn short(action: &Action<Named>) -> String {
    let update = |u: &Update<Named>| match u {
        Update::Reset(all) => {
            let names: Vec<&str> = all.iter().map(|n| n.0.as_str()).collect();
            format!("reset {}", names.join(","))
        }
        Update::Upsert(n) => format!("upsert {}", n.0),
        Update::Remove(name) => format!("remove {name}"),
        Update::Forbidden(_) => "forbidden".into(),
        Update::Unlisted(_) => "unlisted".into(),
    };
    match action {
        Action::Read => "read".into(),
        Action::Send(u) => format!("send {}", update(u)),
        Action::BackOff {
            relist,
            tell,
            backoff,
            failures,
        } => {
            let policy = if *backoff == Backoff::DENIED {
                "denied"
            } else {
                assert_eq!(*backoff, Backoff::TRANSIENT);
                "transient"
            };
            let relist = if *relist { " relist" } else { "" };
            let tell = tell.as_ref().map(|u| format!(" tell {}", update(u)));
            format!(
                "back off {policy} #{failures}{relist}{}",
                tell.unwrap_or_default()
            )
        }
    }
}

/// Feeds `steps` (an event, the seconds since the start, the action expected)
/// to one follower that holds at most `max_bytes` of a list.
fn table(max_bytes: usize, steps: Vec<(Seen, u64, &str)>) {
    let target = Target {
        selector: String::new(),
        fields: String::new(),
        what: "objects",
        max_bytes,
    };
    let mut follower = Follower::new(&target);
    let t0 = Instant::now();
    for (i, (event, secs, expected)) in steps.into_iter().enumerate() {
        let at = t0 + Duration::from_secs(secs);
        let action = follower.on_event(event, |cm: ConfigMap| Named(cm.name_any()), at);
        assert_eq!(short(&action), expected, "step {i}");
    }
}

#[test]
fn a_list_is_sent_whole_and_changes_one_by_one() {
    table(
        10 * WEIGHT,
        vec![
            (Ok(Event::Init), 0, "read"),
            (init_apply("a"), 0, "read"),
            (init_apply("b"), 0, "read"),
            (Ok(Event::InitDone), 0, "send reset a,b"),
            (apply("c"), 1, "send upsert c"),
            (Ok(Event::Delete(object("a"))), 2, "send remove a"),
            // An InitApply or InitDone without Init is no list.
            (init_apply("d"), 3, "read"),
            (Ok(Event::InitDone), 3, "read"),
        ],
    );
}

#[test]
fn a_list_that_repeats_an_object_or_outgrows_its_bound_is_abandoned() {
    table(
        2 * WEIGHT,
        vec![
            (Ok(Event::Init), 0, "read"),
            (init_apply("a"), 0, "read"),
            // An object twice: the continue token never ends. Backs off from
            // the 4-8 s step, lists again, tells the agent (no view yet).
            (
                init_apply("a"),
                0,
                "back off transient #3 relist tell unlisted",
            ),
            // The rest of the abandoned list is not sent.
            (init_apply("b"), 1, "read"),
            (Ok(Event::InitDone), 1, "read"),
            (Ok(Event::Init), 5, "read"),
            (init_apply("a"), 5, "read"),
            (init_apply("b"), 5, "read"),
            // Three summaries hold more than the bound; the agent was told once.
            (init_apply("c"), 5, "back off transient #4 relist"),
            (Ok(Event::Init), 20, "read"),
            (init_apply("a"), 20, "read"),
            (Ok(Event::InitDone), 20, "send reset a"),
        ],
    );
}

#[test]
fn failures_back_off_further_until_an_object_arrives_or_a_quiet_spell() {
    table(
        10 * WEIGHT,
        vec![
            // The first list fails: the agent hears once that there is no view.
            (list_failed(500), 0, "back off transient #0 tell unlisted"),
            (list_failed(500), 1, "back off transient #1"),
            (Ok(Event::Init), 3, "read"),
            (init_apply("a"), 3, "read"),
            // An interrupted list is read again from its start, not sent.
            (watch_error(500), 3, "back off transient #2"),
            (Ok(Event::InitDone), 4, "read"),
            (Ok(Event::Init), 8, "read"),
            (Ok(Event::InitDone), 8, "send reset "),
            // A re-list is no recovery: a watch that keeps answering 410 lists
            // less and less often.
            (watch_error(410), 9, "back off transient #3"),
            (watch_start_failed(410), 20, "back off transient #4 relist"),
            // An object delivered: back to the first step.
            (apply("b"), 40, "send upsert b"),
            (watch_error(500), 41, "back off transient #0"),
            (watch_error(500), 42, "back off transient #1"),
            // Ten minutes without an error: the first step again.
            (watch_error(500), 42 + 600, "back off transient #0"),
            (watch_error(500), 42 + 601, "back off transient #1"),
        ],
    );
}

#[test]
fn a_denial_is_told_once_until_a_list_succeeds() {
    table(
        10 * WEIGHT,
        vec![
            (list_failed(403), 0, "back off denied #0 tell forbidden"),
            (watch_start_failed(403), 60, "back off denied #1"),
            (Ok(Event::Init), 200, "read"),
            (Ok(Event::InitDone), 200, "send reset "),
            // In an open watch a 403 lists again (the view is kept).
            (watch_error(403), 300, "back off transient #2 relist"),
            (list_failed(403), 301, "back off denied #3 tell forbidden"),
            (list_failed(403), 400, "back off denied #4"),
        ],
    );
}

/// Issue 46, item 13: a list page over the client's size cap was asked for the same way
/// for good. Each one over it halves the objects a page (down to one) and lists again.
#[test]
fn a_list_page_over_the_cap_is_asked_for_again_with_half_the_objects() {
    let target = Target {
        selector: String::new(),
        fields: String::new(),
        what: "objects",
        max_bytes: WEIGHT,
    };
    let mut follower = Follower::new(&target);
    let now = Instant::now();
    let mut sizes = Vec::new();
    for _ in 0..8 {
        let refused = ApiError::TooLarge {
            limit: crate::client::MAX_LIST_ANSWER,
        };
        let page = Err(watcher::Error::InitialListFailed(kube::Error::Service(
            Box::new(refused),
        )));
        let action = follower.on_event(page, |cm: ConfigMap| Named(cm.name_any()), now);
        assert!(matches!(action, Action::BackOff { relist: true, .. }));
        sizes.push(follower.page_size);
    }
    assert_eq!(sizes, [50, 25, 12, 6, 3, 1, 1, 1]);
}
