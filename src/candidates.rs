//! The full tier of the two-tier node watch. Every Node is watched as metadata only
//! (see `agent`); only the *candidates* (`OwnPod::is_candidate`: nodes created at or
//! after the own pod was scheduled that its placement rules accept) are read in full,
//! as they are the only nodes whose readiness, taints and images the decision reads.
//!
//! Each candidate gets its own watch (`fieldSelector=metadata.name=NAME`), started when
//! the node becomes a candidate and stopped when it stops being one. RBAC stays `nodes`
//! `list`, `watch`; at most [`MAX_CANDIDATE_WATCHES`] run at once, and at most one is
//! opened per [`CANDIDATE_PACE`] (a fleet that sees five nodes join at once does not
//! open 5 watches per agent in the same second).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::watch::{self, Target, Update};
use selfdestruct_decision::images::ImageRef;
use selfdestruct_decision::model::{NodeSummary, OwnPod};

/// The most candidates read in full at once; more wait for a free slot (a
/// node not read in full is never Ready to the decision).
pub(crate) const MAX_CANDIDATE_WATCHES: usize = 16;
/// At most one candidate watch is opened per this interval.
pub(crate) const CANDIDATE_PACE: Duration = Duration::from_secs(3);

/// One candidate's full watch and what it last said.
struct Watched {
    task: JoinHandle<()>,
    /// The node as last read in full (`None` until the first read).
    full: Option<NodeSummary>,
}

/// Which nodes of the view a metadata update touched.
pub(crate) enum Touched<'a> {
    /// The whole view (a list, or the view was lost).
    All,
    /// One node, by name.
    One(&'a str),
}

/// The candidates' full watches.
pub(crate) struct Candidates {
    client: kube::Client,
    label_keys: BTreeSet<String>,
    required_images: Vec<ImageRef>,
    watched: BTreeMap<String, Watched>,
    /// When the next candidate watch may open.
    next_open: Instant,
    /// Every candidate watch sends here (one channel: a stopped watch's last
    /// updates arrive before those of a later watch of the same name).
    tx: mpsc::Sender<Update<NodeSummary>>,
    rx: mpsc::Receiver<Update<NodeSummary>>,
    /// A candidate watch was refused (told once until one lists again).
    told_forbidden: bool,
}

impl Drop for Candidates {
    fn drop(&mut self) {
        for w in self.watched.values() {
            w.task.abort();
        }
    }
}

impl Candidates {
    pub(crate) fn new(
        client: kube::Client,
        label_keys: BTreeSet<String>,
        required_images: Vec<ImageRef>,
    ) -> Self {
        let (tx, rx) = mpsc::channel(64);
        Candidates {
            client,
            label_keys,
            required_images,
            watched: BTreeMap::new(),
            next_open: Instant::now(),
            tx,
            rx,
            told_forbidden: false,
        }
    }

    /// After the metadata view changed (`touched`): starts the full watch of
    /// each node that became a candidate, stops that of each node that is no
    /// longer one (or left the view), and lays what the full reads said over
    /// the view's metadata-only entries.
    pub(crate) fn sync(
        &mut self,
        own: &OwnPod,
        view: &mut Option<Vec<NodeSummary>>,
        touched: Touched<'_>,
    ) {
        let nodes = view.as_deref_mut().unwrap_or_default();
        let freed = match touched {
            Touched::All => {
                let wanted: BTreeSet<&str> = nodes
                    .iter()
                    .filter(|n| own.is_candidate(n))
                    .map(|n| n.name.as_str())
                    .collect();
                let gone: Vec<String> = self
                    .watched
                    .keys()
                    .filter(|n| !wanted.contains(n.as_str()))
                    .cloned()
                    .collect();
                for name in &gone {
                    self.stop(name);
                }
                for node in nodes.iter_mut() {
                    self.overlay(node);
                }
                true
            }
            Touched::One(name) => match nodes.iter_mut().find(|n| n.name == name) {
                Some(node) if own.is_candidate(node) => {
                    self.watch(&node.name);
                    self.overlay(node);
                    false
                }
                _ => self.stop(name),
            },
        };
        if freed {
            for node in nodes.iter().filter(|n| own.is_candidate(n)) {
                if self.watched.len() >= MAX_CANDIDATE_WATCHES {
                    break;
                }
                self.watch(&node.name);
            }
        }
    }

    /// The next update of a candidate watch.
    pub(crate) async fn recv(&mut self) -> Update<NodeSummary> {
        // `self` holds a sender: the channel never closes.
        match self.rx.recv().await {
            Some(u) => u,
            None => std::future::pending().await,
        }
    }

    /// Applies an update of a candidate watch to the view (updates of a watch
    /// already stopped are dropped).
    pub(crate) fn apply(
        &mut self,
        view: &mut Option<Vec<NodeSummary>>,
        update: Update<NodeSummary>,
    ) {
        let full = match update {
            Update::Reset(list) => {
                self.told_forbidden = false;
                // Empty: the node is gone; the metadata watch removes it.
                match list.into_iter().next() {
                    Some(n) => n,
                    None => return,
                }
            }
            Update::Upsert(n) => n,
            Update::Remove(name) => {
                if let Some(w) = self.watched.get_mut(&name) {
                    w.full = None;
                    if let Some(node) = view.iter_mut().flatten().find(|n| n.name == name) {
                        *node = metadata_only(node);
                    }
                }
                return;
            }
            Update::Forbidden(msg) => {
                if !std::mem::replace(&mut self.told_forbidden, true) {
                    tracing::warn!(
                        error = %msg,
                        "cannot list/watch a new node in full: it cannot count as Ready; \
                         grant list/watch on nodes (rbac/node-reader); retrying rarely"
                    );
                }
                return;
            }
            Update::Unlisted(_) => return,
        };
        let Some(w) = self.watched.get_mut(&full.name) else {
            return;
        };
        if let Some(node) = view.iter_mut().flatten().find(|n| n.name == full.name) {
            lay_over(node, &full);
        }
        w.full = Some(full);
    }

    /// Starts the full watch of `name` unless it runs or no slot is free.
    fn watch(&mut self, name: &str) {
        if self.watched.contains_key(name) || self.watched.len() >= MAX_CANDIDATE_WATCHES {
            return;
        }
        let now = Instant::now();
        let delay = self.next_open.saturating_duration_since(now);
        self.next_open = self.next_open.max(now) + CANDIDATE_PACE;
        let target = Target {
            selector: String::new(),
            fields: format!("metadata.name={name}"),
            what: "new node (in full)",
        };
        let (keys, images) = (self.label_keys.clone(), self.required_images.clone());
        let task = tokio::spawn(watch::follow(
            Api::<Node>::all(self.client.clone()),
            target,
            self.tx.clone(),
            delay,
            move |n: Node| crate::summarize::node(n, &keys, &images),
        ));
        tracing::debug!(node = name, in_ = ?delay, "reading a new node in full");
        self.watched
            .insert(name.to_string(), Watched { task, full: None });
    }

    /// Stops the full watch of `name`, if any; `true` if one was stopped.
    fn stop(&mut self, name: &str) -> bool {
        let Some(w) = self.watched.remove(name) else {
            return false;
        };
        w.task.abort();
        tracing::debug!(node = name, "no longer a candidate: its full watch ends");
        true
    }

    /// Lays the last full read of `node` (if it is watched) over its metadata.
    fn overlay(&self, node: &mut NodeSummary) {
        if let Some(full) = self.watched.get(&node.name).and_then(|w| w.full.as_ref()) {
            lay_over(node, full);
        }
    }
}

/// `node` (from the metadata watch) with what only `full` (a full read) knows;
/// the metadata watch keeps the name, creation time and labels.
fn lay_over(node: &mut NodeSummary, full: &NodeSummary) {
    *node = NodeSummary {
        name: std::mem::take(&mut node.name),
        created: node.created,
        labels: std::mem::take(&mut node.labels),
        ..full.clone()
    };
}

/// What the metadata watch knows of `node`.
fn metadata_only(node: &NodeSummary) -> NodeSummary {
    NodeSummary {
        name: node.name.clone(),
        created: node.created,
        labels: node.labels.clone(),
        ..NodeSummary::default()
    }
}
