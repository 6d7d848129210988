//! The two-tier node watch (issue 24): every Node as metadata only, the
//! candidates (nodes created after the own pod was scheduled that pass its
//! placement rules) in full, one field-selected watch each; and the node
//! watch's time limits (issue 27, items 4 and 10). In-process, on virtual time
//! (`common::vtime`).

mod common;

use std::time::{Duration, SystemTime};

use common::vtime::{self, Logs};
use fake_apiserver::{FaultResponse, Matcher, NodeBuilder, PodTemplate, RecordedRequest};
use serde_json::json;

/// A list or watch of Nodes in full, of any node.
fn full_node_read(r: &RecordedRequest) -> bool {
    r.is_full_node_read()
}

/// The full watch (or list) of the node `name`.
fn full_read_of(r: &RecordedRequest, name: &str) -> bool {
    r.is_full_node_read()
        && r.query_param("fieldSelector").as_deref() == Some(&format!("metadata.name={name}"))
}

/// Old nodes' kubelet status updates (Ready flaps, new images) reach the agent
/// through the metadata watch only: no Node is read in full, and the agent
/// lists and watches Nodes as `PartialObjectMetadata`.
#[tokio::test(start_paused = true)]
async fn an_old_nodes_status_changes_cause_no_full_read() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::with_nodes(
        1,
        &[
            NodeBuilder::new("old-a").cpu("4").memory("16Gi"),
            NodeBuilder::new("old-b").cpu("4").memory("16Gi"),
        ],
        PodTemplate::placeholder("placeholder", "1", "4Gi"),
    )
    .await;
    // Both were created an hour before the placeholder was scheduled.
    for name in ["old-a", "old-b"] {
        s.fake.modify_node(name, |n| {
            let created = n.metadata.creation_timestamp.as_ref().expect("created");
            let earlier = SystemTime::from(created.0) - Duration::from_secs(3600);
            n.metadata.creation_timestamp = Some(fake_apiserver::objects::time_of(earlier));
        });
    }
    let _agent = vtime::agent(&s, "placeholder-0", &[("SELFDESTRUCT_NODE_SETTLE", "1s")]);
    assert!(
        logs.show("watching nodes", Duration::from_secs(10)).await,
        "{}",
        logs.text()
    );
    assert!(
        vtime::request(&s, Duration::from_secs(10), |r| {
            r.path == "/api/v1/nodes" && r.watch && r.metadata_only
        })
        .await
        .is_some(),
        "no metadata-only node watch"
    );
    for round in 0..5 {
        for name in ["old-a", "old-b"] {
            s.fake.set_node_ready(name, round % 2 == 1);
            s.fake.set_node_images(name, Vec::new());
        }
        vtime::pass(Duration::from_secs(20)).await;
    }
    let full: Vec<String> = s
        .fake
        .requests()
        .iter()
        .filter(|r| full_node_read(r))
        .map(|r| format!("{} {}", r.path, r.query))
        .collect();
    assert!(full.is_empty(), "old nodes read in full: {full:?}");
    assert!(s.evictions().is_empty(), "an old node is no reason to move");
}

/// A new node is read in full through its own field-selected watch; when it
/// stops being a candidate (it leaves SELFDESTRUCT_NODE_SELECTOR) that watch
/// ends, and a node that was never a candidate is never read in full.
#[tokio::test(start_paused = true)]
async fn a_candidate_that_stops_qualifying_ends_its_full_watch() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::with_nodes(
        1,
        &[NodeBuilder::new("node-a")
            .cpu("4")
            .memory("16Gi")
            .label("pool", "user")],
        PodTemplate::placeholder("placeholder", "1", "4Gi"),
    )
    .await;
    let _agent = vtime::agent(
        &s,
        "placeholder-0",
        &[("SELFDESTRUCT_NODE_SELECTOR", "pool=user")],
    );
    assert!(
        logs.show("watching nodes", Duration::from_secs(10)).await,
        "{}",
        logs.text()
    );
    let watches_before = s.fake.open_watches();
    // Not Ready: a candidate the agent must follow until it is.
    s.fake.add_node(
        NodeBuilder::new("node-new")
            .cpu("4")
            .memory("16Gi")
            .label("pool", "user")
            .ready(false),
    );
    assert!(
        vtime::request(&s, Duration::from_secs(10), |r| full_read_of(r, "node-new")
            && r.watch)
        .await
        .is_some(),
        "the candidate was never watched in full:\n{}",
        logs.text()
    );
    assert!(
        vtime::until(Duration::from_secs(5), || s.fake.open_watches()
            > watches_before)
        .await,
        "the candidate's watch is not open"
    );
    let open = s.fake.open_watches();
    // It leaves the node selector: no longer a candidate.
    s.fake.modify_node("node-new", |n| {
        n.metadata
            .labels
            .get_or_insert_default()
            .insert("pool".into(), "system".into());
    });
    assert!(
        vtime::until(Duration::from_secs(5), || s.fake.open_watches() < open).await,
        "the full watch of a node that is no longer a candidate stays open:\n{}",
        logs.text()
    );
    let reads = s.fake.count_requests(|r| full_read_of(r, "node-new"));
    // Its status changes are not read any more, and it is no reason to move.
    s.fake.set_node_ready("node-new", true);
    vtime::pass(Duration::from_secs(60)).await;
    assert_eq!(
        s.fake.count_requests(|r| full_read_of(r, "node-new")),
        reads,
        "the former candidate is still read in full"
    );
    assert!(
        s.fake.count_requests(|r| full_read_of(r, "node-a")) == 0,
        "an old node was read in full"
    );
    assert!(s.evictions().is_empty(), "{}", logs.text());
}

/// A watch over which nothing arrives is re-opened within the 11 minutes
/// docs/reliability.md promises (the agent asks for `timeoutSeconds` of 10-11
/// minutes; it asked for 15-30).
#[tokio::test(start_paused = true)]
async fn a_silent_watch_is_reopened_within_eleven_minutes() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::with_nodes(
        1,
        &[NodeBuilder::new("node-a").cpu("4").memory("16Gi")],
        PodTemplate::placeholder("placeholder", "1", "4Gi"),
    )
    .await;
    let _agent = vtime::agent(&s, "placeholder-0", &[]);
    let node_watch = |r: &RecordedRequest| r.path == "/api/v1/nodes" && r.watch;
    let first = vtime::request(&s, Duration::from_secs(60), node_watch)
        .await
        .expect("a node watch");
    let sibling_watch = |r: &RecordedRequest| r.path.ends_with("/pods") && r.watch;
    let first_sibling = vtime::request(&s, Duration::from_secs(60), sibling_watch)
        .await
        .expect("a sibling watch");
    for r in [&first, &first_sibling] {
        let timeout: u64 = r
            .query_param("timeoutSeconds")
            .and_then(|t| t.parse().ok())
            .expect("timeoutSeconds");
        assert!(timeout <= 660, "{} asks for {timeout} s", r.path);
    }
    // Nothing changes; bookmarks are not events the agent sees.
    vtime::pass(Duration::from_secs(661)).await;
    let reopened = |pred: &dyn Fn(&RecordedRequest) -> bool, after: &RecordedRequest| {
        s.fake.count_requests(|r| pred(r) && r.at > after.at) > 0
    };
    assert!(
        reopened(&node_watch, &first),
        "the node watch was not re-opened within 11 minutes:\n{}",
        logs.text()
    );
    assert!(
        reopened(&sibling_watch, &first_sibling),
        "the sibling watch was not re-opened within 11 minutes"
    );
}

/// A server whose node list pages never end, each page with a new node and a
/// `continue` token: the list stops at 100 pages and backs off (it used to run
/// to 100,000 objects: as many requests with one object a page).
#[tokio::test(start_paused = true)]
async fn a_list_whose_pages_never_end_is_bounded_and_backs_off() {
    const PAGES: usize = 2_000;
    const WINDOW: Duration = Duration::from_secs(16);
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(1).await;
    let node_list = |r: &fake_apiserver::RequestInfo<'_>| r.path == "/api/v1/nodes" && !r.watch;
    for i in 0..PAGES {
        s.fake.fail_next(
            Matcher::custom(node_list),
            FaultResponse::json(
                200,
                json!({"kind": "NodeList", "apiVersion": "v1",
                       "metadata": {"resourceVersion": "5", "continue": format!("page-{i}")},
                       "items": [{"metadata": {"name": format!("node-{i}"), "resourceVersion": "5"}}]}),
            ),
            1,
        );
    }
    let agent = vtime::agent(
        &s,
        "placeholder-0",
        &[
            ("SELFDESTRUCT_LOG_LEVEL", "info"),
            ("SELFDESTRUCT_MAX_LIFETIME", "1h"),
        ],
    );
    let first = vtime::request(&s, Duration::from_secs(60), |r| {
        r.path == "/api/v1/nodes" && !r.watch
    })
    .await
    .expect("a node list");
    let lists = || {
        s.fake.count_requests(|r| {
            r.path == "/api/v1/nodes" && !r.watch && r.at >= first.at && r.at < first.at + WINDOW
        })
    };
    // At most three attempts fit in the window: at 0, after 4-8 s, after 8-16 s more.
    let bound = 3 * 100;
    let over = vtime::until(WINDOW, || lists() > bound).await;
    eprintln!("{} node LIST requests in {WINDOW:?}", lists());
    assert!(
        !over,
        "{} LIST requests in {WINDOW:?} (at most {bound})",
        lists()
    );
    assert!(
        lists() >= 100,
        "the list was stopped before its 100th page: {}",
        lists()
    );
    assert!(
        logs.text().contains("never ends"),
        "no log line about the endless list:\n{}",
        logs.text()
    );
    assert!(agent.is_running(), "died");
}
