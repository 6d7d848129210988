//! What the agent knows of the nodes and its sibling pods: the views the
//! watches keep (`watch::follow`, the candidates' full watches), updated as
//! their updates arrive.

use std::collections::BTreeSet;

use kube::Api;
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::candidates::Candidates;
use crate::config::{Config, Siblings};
use crate::summarize::{self, NodeObject};
use crate::watch::{self, Target, Update};
use selfdestruct_decision::model::{NodeSummary, OwnPod, Sibling};
use selfdestruct_decision::selector::Selector;

/// The node and sibling views, and the watches that keep them.
#[derive(Default)]
pub(super) struct View {
    /// Every node the watches show (`None`: not listed, or not allowed).
    pub(super) nodes: Option<Vec<NodeSummary>>,
    pub(super) siblings: Option<Vec<Sibling>>,
    /// The sibling watch runs but has neither listed nor failed yet: moves wait for it.
    pub(super) siblings_loading: bool,
    /// The metadata-only watch of every node (the view's first tier).
    node_rx: Option<mpsc::Receiver<Update<NodeSummary>>>,
    /// The full watches of the candidate nodes (the view's second tier).
    candidates: Option<Candidates>,
    sibling_rx: Option<mpsc::Receiver<Update<Sibling>>>,
    /// The lifetime timer is on (a node watch that is denied says what still works).
    timer: bool,
    /// Start-up or a list ran: give memory back before the next wait.
    release_pending: bool,
}

impl View {
    /// Starts the watches `cfg` asks for, on `client`, for the pod `own`.
    pub(super) fn start(cfg: &Config, client: &kube::Client, own: &OwnPod, timer: bool) -> Self {
        let mut view = View {
            timer,
            release_pending: true,
            ..View::default()
        };
        // One delay for both lists: a fleet that starts together spreads out.
        let start_delay = selfdestruct_decision::scaled(cfg.start_jitter, crate::jitter::draw());
        if cfg.policy.move_to_new_nodes {
            let (tx, rx) = mpsc::channel(64);
            let target = Target {
                selector: cfg.node_selector.to_string(),
                fields: String::new(),
                what: "nodes",
                max_bytes: watch::NODE_LIST_BYTES,
            };
            // Every node as metadata only; the candidates in full (src/candidates.rs).
            let keys = own.label_keys_of_interest();
            view.candidates = Some(Candidates::new(
                client.clone(),
                keys.clone(),
                cfg.policy.required_images.clone(),
            ));
            let kept = keys.clone();
            let follow = watch::follow(
                Api::<NodeObject<true>>::all(client.clone()),
                target,
                tx,
                start_delay,
                move |n| summarize::node_metadata(n.metadata, &kept),
            );
            tokio::spawn(summarize::keeping_labels(keys, follow));
            view.node_rx = Some(rx);
        }
        let selector = match &cfg.siblings {
            Siblings::Off => None,
            Siblings::Selector(s) => Some(s.clone()),
            Siblings::FromLabels => {
                let keys = ["app.kubernetes.io/name", "app.kubernetes.io/instance"];
                let labels: std::collections::BTreeMap<String, String> = own
                    .labels
                    .iter()
                    .filter(|(k, _)| keys.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if labels.is_empty() {
                    info!(
                        "own pod has no app.kubernetes.io/name or app.kubernetes.io/instance label: \
                         sibling awareness off (set SELFDESTRUCT_SIBLING_SELECTOR), relying on the PodDisruptionBudget"
                    );
                    None
                } else {
                    Some(Selector::from_labels(&labels))
                }
            }
        };
        if let Some(sel) = selector {
            let (tx, rx) = mpsc::channel(64);
            let target = Target {
                selector: sel.to_string(),
                fields: String::new(),
                what: "sibling pods",
                max_bytes: watch::SIBLING_LIST_BYTES,
            };
            tokio::spawn(watch::follow(
                Api::<summarize::PodObject>::namespaced(
                    client.clone(),
                    &crate::api::segment(&own.namespace),
                ),
                target,
                tx,
                start_delay,
                summarize::sibling,
            ));
            view.sibling_rx = Some(rx);
            view.siblings_loading = true;
        }
        view
    }

    /// Waits for the next update of a watch and applies it (`own` notes its own
    /// pod terminating in the sibling list).
    pub(super) async fn changed(&mut self, own: &mut OwnPod) {
        tokio::select! {
            u = recv(&mut self.node_rx) => match u {
                Some(u) => self.on_node(own, u),
                None => self.node_rx = None,
            },
            () = candidates_next(&mut self.candidates, own, &mut self.nodes) => {}
            u = recv(&mut self.sibling_rx) => match u {
                Some(u) => self.on_sibling(own, u),
                None => {
                    self.sibling_rx = None;
                    self.siblings_loading = false;
                }
            },
        }
    }

    /// The nodes a sibling showed full (reported once each): no candidates' slots for them.
    pub(super) fn shown_full(&mut self, full: &BTreeSet<String>) {
        if let Some(c) = &mut self.candidates {
            c.shown_full(full);
        }
    }

    /// Gives memory back if a list ran since the last time.
    pub(super) fn release_idle(&mut self) {
        if std::mem::take(&mut self.release_pending) {
            crate::malloc_trim::release_idle();
        }
    }

    fn on_node(&mut self, own: &OwnPod, update: Update<NodeSummary>) {
        let touched = match &update {
            Update::Upsert(n) => Some(n.name.clone()),
            Update::Remove(name) => Some(name.clone()),
            Update::Reset(_) | Update::Forbidden(_) => None,
            Update::Unlisted(_) => Some(String::new()),
        };
        match &update {
            Update::Reset(list) if self.nodes.is_none() => {
                info!(
                    count = list.len(),
                    "watching nodes: moving to newer nodes is on"
                )
            }
            Update::Forbidden(msg) if self.timer => warn!(
                error = %msg,
                "cannot list/watch nodes: moving to newer nodes is off, the lifetime timer still works; \
                 grant list/watch on nodes (rbac/node-reader) to enable it; retrying rarely"
            ),
            Update::Forbidden(msg) => warn!(
                error = %msg,
                "cannot list/watch nodes, and no SELFDESTRUCT_MAX_LIFETIME is set: this placeholder \
                 will not move until nodes can be read; grant list/watch on nodes \
                 (rbac/node-reader) or set a lifetime; retrying rarely"
            ),
            _ => {}
        }
        self.release_pending |= matches!(update, Update::Reset(_));
        apply_update(&mut self.nodes, update, |n| &n.name);
        if let Some(candidates) = &mut self.candidates {
            candidates.sync(own, &mut self.nodes, touched.as_deref());
        }
    }

    fn on_sibling(&mut self, own: &mut OwnPod, update: Update<Sibling>) {
        // The own pod is in the sibling list too: notice when it starts terminating.
        let is_own = |s: &Sibling| s.name == own.name && s.uid == own.uid && s.terminating;
        own.terminating |= match &update {
            Update::Reset(all) => all.iter().any(is_own),
            Update::Upsert(s) => is_own(s),
            Update::Remove(_) | Update::Forbidden(_) | Update::Unlisted(_) => false,
        };
        match &update {
            Update::Reset(list) if self.siblings.is_none() => info!(
                count = list.len(),
                "watching sibling placeholders: no move while one is Pending"
            ),
            Update::Forbidden(msg) => warn!(
                error = %msg,
                "cannot list/watch sibling pods: relying on the PodDisruptionBudget alone to move one at a time"
            ),
            Update::Unlisted(msg) if self.siblings.is_none() => warn!(
                error = %msg,
                "the first list of sibling pods failed: relying on the PodDisruptionBudget alone \
                 to move one at a time until a retry succeeds"
            ),
            _ => {}
        }
        // Listed, or failed: moves wait no longer.
        self.siblings_loading &= matches!(update, Update::Upsert(_) | Update::Remove(_));
        self.release_pending |= matches!(update, Update::Reset(_));
        apply_update(&mut self.siblings, update, |s| &s.name);
    }
}

/// Applies a watch update to a view of summaries kept by name (`None`: no view;
/// a denied watch loses it, a failed first list leaves it as it is).
fn apply_update<S>(view: &mut Option<Vec<S>>, update: Update<S>, name: impl Fn(&S) -> &str) {
    match update {
        Update::Reset(list) => *view = Some(list),
        Update::Upsert(s) => {
            let list = view.get_or_insert_with(Vec::new);
            match list.iter_mut().find(|x| name(x) == name(&s)) {
                Some(x) => *x = s,
                None => list.push(s),
            }
        }
        Update::Remove(gone) => {
            if let Some(list) = view {
                list.retain(|x| name(x) != gone);
            }
        }
        Update::Forbidden(_) => *view = None,
        Update::Unlisted(_) => {}
    }
}

async fn candidates_next(
    candidates: &mut Option<Candidates>,
    own: &OwnPod,
    nodes: &mut Option<Vec<NodeSummary>>,
) {
    match candidates {
        Some(c) => c.next(own, nodes).await,
        None => std::future::pending().await,
    }
}

async fn recv<T>(rx: &mut Option<mpsc::Receiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}
