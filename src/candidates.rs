//! The full tier of the two-tier node watch. Every Node is watched as metadata only
//! (see `agent`); only the *candidates* (`OwnPod::is_candidate`: nodes created at or
//! after the own pod was scheduled that its placement rules accept) are read in full,
//! as they are the only nodes whose readiness, taints and images the decision reads.
//!
//! Each candidate read in full has its own watch (`fieldSelector=metadata.name=NAME`);
//! RBAC stays `nodes` `list`, `watch`. At most [`MAX_CANDIDATE_WATCHES`] run at once
//! (the *slots*), and at most one is opened per [`CANDIDATE_PACE`] (a fleet that sees
//! five nodes join at once does not open 5 watches per agent in the same second).
//! A candidate waits in a queue until the pace allows; nothing is opened ahead of
//! its time, so a candidate that leaves before its turn costs no pace.
//!
//! When there are more candidates than slots, the slots go by rank ([`rank`]):
//!
//! 1. nodes not read yet, or read and a node a re-created placeholder would land
//!    on (`OwnPod::would_land_on`), newest first;
//! 2. nodes read and found no target (an untolerated taint, NotReady, cordoned, or
//!    shown full by a sibling), newest first.
//!
//! The best-ranked waiting node takes a free slot, or the slot of the worst-ranked
//! watched node if that ranks below it. A node of rank 2 that gives up its slot is
//! *parked*: its last state stays known through the metadata watch, which reports
//! every change of the object; a change (a taint lifted, Ready) puts it back in the
//! queue as not read. A node shown full stays parked for good. A node of rank 1 that
//! gives up its slot (to a newer one) waits in the queue.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use kube::Api;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::summarize::{self, NodeObject};
use crate::watch::{self, Target, Update};
use selfdestruct_decision::images::ImageRef;
use selfdestruct_decision::model::{NodeSummary, OwnPod};

/// The most candidates read in full at once; more wait for a free slot (a
/// node not read in full is never Ready to the decision).
pub(crate) const MAX_CANDIDATE_WATCHES: usize = 16;
/// At most one candidate watch is opened per this interval.
pub(crate) const CANDIDATE_PACE: Duration = Duration::from_secs(3);
/// The most a candidate's full list may hold: one node (a field-selected list).
const CANDIDATE_LIST_BYTES: usize = 1 << 20;

/// What a candidate is to the slots, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Standing {
    /// Not read in full (yet, or since it changed), or read and a node a
    /// re-created placeholder would land on.
    Wanted,
    /// Read in full and no target: an untolerated taint, NotReady, cordoned, or
    /// shown full by a sibling.
    NoTarget,
}

/// One candidate as the slots see it.
#[derive(Clone, Copy, Debug)]
struct Seat<'a> {
    name: &'a str,
    created: Option<SystemTime>,
    standing: Standing,
    /// Its full watch runs (it holds a slot).
    watched: bool,
}

/// The rank of a candidate, lower first: [`Standing`], then newest first (an
/// unknown creation time last), then by name.
fn rank<'a>(s: &Seat<'a>) -> (Standing, Reverse<Option<SystemTime>>, &'a str) {
    (s.standing, Reverse(s.created), s.name)
}

/// What the next opening does: opens the full watch of `open`, after stopping
/// that of `stop` (no slot is free).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Opening<'a> {
    open: &'a str,
    stop: Option<&'a str>,
}

/// The next opening among `seats` (the candidates watched or waiting; parked ones
/// take no part) with `slots` slots: the best-ranked waiting candidate, if a slot
/// is free or the worst-ranked watched one ranks below it; `None` otherwise.
fn next_opening<'a>(
    seats: impl IntoIterator<Item = Seat<'a>>,
    slots: usize,
) -> Option<Opening<'a>> {
    let (mut best, mut worst, mut watched): (Option<Seat>, Option<Seat>, usize) = (None, None, 0);
    for s in seats {
        if s.watched {
            watched += 1;
            if worst.is_none_or(|w| rank(&s) > rank(&w)) {
                worst = Some(s);
            }
        } else if best.is_none_or(|b| rank(&s) < rank(&b)) {
            best = Some(s);
        }
    }
    let best = best?;
    if watched < slots {
        return Some(Opening {
            open: best.name,
            stop: None,
        });
    }
    let worst = worst.filter(|w| rank(w) > rank(&best))?;
    Some(Opening {
        open: best.name,
        stop: Some(worst.name),
    })
}

/// A candidate's full watch, which ends when dropped.
struct Task(JoinHandle<()>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One candidate's full watch and what it last said.
struct Watched {
    _task: Task,
    /// The node as last read in full (`None` until the first read).
    read: Option<NodeSummary>,
    /// What the last read says (`Wanted` until the first).
    standing: Standing,
}

/// Where a candidate is.
enum Slot {
    /// In the queue for a slot.
    Waiting,
    /// Read in full.
    Watched(Watched),
    /// Gave up its slot as no target: waits for the metadata watch to report a
    /// change (for good if shown full).
    Parked,
}

struct Entry {
    created: Option<SystemTime>,
    slot: Slot,
    /// A sibling showed it full: no target for good.
    shown_full: bool,
}

/// The candidates' full watches.
pub(crate) struct Candidates {
    client: kube::Client,
    label_keys: BTreeSet<String>,
    required_images: Vec<ImageRef>,
    entries: BTreeMap<String, Entry>,
    next_open: Instant,
    /// Every candidate watch sends here (one channel: a stopped watch's last
    /// updates arrive before those of a later watch of the same name).
    tx: mpsc::Sender<Update<NodeSummary>>,
    rx: mpsc::Receiver<Update<NodeSummary>>,
    /// A candidate watch was refused (told once until one lists again).
    told_forbidden: bool,
    /// There are more candidates than slots (told once per change).
    short: bool,
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
            entries: BTreeMap::new(),
            next_open: Instant::now(),
            tx,
            rx,
            told_forbidden: false,
            short: false,
        }
    }

    /// After the metadata view changed (`touched`: the node of that name; `None`:
    /// the whole view, after a list or when the view was lost): queues each node
    /// that became a candidate (and each parked one that changed), stops the full
    /// watch of each node that is no longer one (or left the view), and lays what
    /// the full reads said over the view's metadata-only entries.
    pub(crate) fn sync(
        &mut self,
        own: &OwnPod,
        view: &mut Option<Vec<NodeSummary>>,
        touched: Option<&str>,
    ) {
        let is_touched = |name: &str| touched.is_none_or(|t| t == name);
        let wanted: BTreeMap<&str, Option<SystemTime>> = view
            .iter()
            .flatten()
            .filter(|n| is_touched(&n.name) && own.is_candidate(n))
            .map(|n| (n.name.as_str(), n.created))
            .collect();
        // No longer a candidate, or gone: forgotten, its full watch stopped.
        self.entries.retain(|name, e| {
            let keep = !is_touched(name) || wanted.contains_key(name.as_str());
            if !keep && matches!(e.slot, Slot::Watched(_)) {
                tracing::debug!(node = name, "no longer a candidate: its full watch ends");
            }
            keep
        });
        // The metadata watch reported it (changed, or listed again: a list says
        // nothing of what changed): a parked node is read again, unless shown full.
        for (name, created) in wanted {
            let e = self.entries.entry(name.to_string()).or_insert(Entry {
                created,
                slot: Slot::Waiting,
                shown_full: false,
            });
            e.created = created;
            if matches!(e.slot, Slot::Parked) && !e.shown_full {
                e.slot = Slot::Waiting;
            }
        }
        for (name, e) in &self.entries {
            if let Slot::Watched(w) = &e.slot
                && let Some(full) = &w.read
                && is_touched(name)
            {
                show(view, name, Some(full));
            }
        }
        self.tell_shortage();
    }

    /// Notes the nodes a sibling showed full (`full`: the agent's report, every
    /// node ever shown full that is still in the view): no targets for good.
    pub(crate) fn shown_full(&mut self, full: &BTreeSet<String>) {
        for name in full {
            if let Some(e) = self.entries.get_mut(name) {
                e.shown_full = true;
            }
        }
    }

    /// Waits for the next update of a candidate watch (and applies it to `view`),
    /// or for the time of the next opening (and opens it).
    pub(crate) async fn next(&mut self, own: &OwnPod, view: &mut Option<Vec<NodeSummary>>) {
        let due = self.plan().map(|_| self.next_open);
        tokio::select! {
            // `self` holds a sender: the channel never closes.
            u = self.rx.recv() => match u {
                Some(u) => self.apply(own, view, u),
                None => std::future::pending().await,
            },
            () = tokio::time::sleep_until(due.unwrap_or(self.next_open)), if due.is_some() => self.open_next(view),
        }
    }

    /// The next opening, by rank.
    fn plan(&self) -> Option<Opening<'_>> {
        let seats = self.entries.iter().filter_map(|(name, e)| {
            let standing = match &e.slot {
                Slot::Parked => return None,
                _ if e.shown_full => Standing::NoTarget,
                Slot::Waiting => Standing::Wanted,
                Slot::Watched(w) => w.standing,
            };
            let watched = matches!(e.slot, Slot::Watched(_));
            Some(Seat {
                name,
                created: e.created,
                standing,
                watched,
            })
        });
        next_opening(seats, MAX_CANDIDATE_WATCHES)
    }

    /// Opens the best-ranked waiting candidate's full watch if the pace allows,
    /// taking the slot of the worst-ranked watched one if none is free.
    fn open_next(&mut self, view: &mut Option<Vec<NodeSummary>>) {
        let now = Instant::now();
        if now < self.next_open {
            return;
        }
        let Some(Opening { open, stop }) = self.plan() else {
            return;
        };
        let (open, stop) = (open.to_string(), stop.map(str::to_string));
        if let Some(stop) = stop {
            self.give_up(&stop, view, &open);
        }
        self.spawn(&open);
        self.next_open = now + CANDIDATE_PACE;
    }

    /// Stops the full watch of `name` to free its slot for `to`: parked if it is
    /// no target, back in the queue otherwise. The view forgets its full read.
    fn give_up(&mut self, name: &str, view: &mut Option<Vec<NodeSummary>>, to: &str) {
        let Some(e) = self.entries.get_mut(name) else {
            return;
        };
        let Slot::Watched(w) = std::mem::replace(&mut e.slot, Slot::Parked) else {
            return;
        };
        let parked = e.shown_full || w.standing == Standing::NoTarget;
        if !parked {
            e.slot = Slot::Waiting;
        }
        show(view, name, None);
        tracing::debug!(
            node = name,
            for_ = to,
            parked,
            "a new node gives up its full watch to a newer or usable one"
        );
    }

    /// Starts the full watch of `name`.
    fn spawn(&mut self, name: &str) {
        let Some(e) = self.entries.get_mut(name) else {
            return;
        };
        let target = Target {
            selector: String::new(),
            fields: format!("metadata.name={name}"),
            what: "new node (in full)",
            max_bytes: CANDIDATE_LIST_BYTES,
        };
        let (keys, images) = (self.label_keys.clone(), self.required_images.clone());
        let follow = watch::follow(
            Api::<NodeObject<false>>::all(self.client.clone()),
            target,
            self.tx.clone(),
            Duration::ZERO,
            move |n| summarize::node(n, &keys, &images),
        );
        let task = tokio::spawn(summarize::keeping_labels(self.label_keys.clone(), follow));
        tracing::debug!(node = name, "reading a new node in full");
        e.slot = Slot::Watched(Watched {
            _task: Task(task),
            read: None,
            standing: Standing::Wanted,
        });
    }

    /// Applies an update of a candidate watch to the view (updates of a watch
    /// already stopped are dropped).
    fn apply(
        &mut self,
        own: &OwnPod,
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
                if let Some(w) = self.watched_mut(&name) {
                    (w.read, w.standing) = (None, Standing::Wanted);
                    show(view, &name, None);
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
        let Some(w) = self.watched_mut(&full.name) else {
            return;
        };
        w.standing = if own.would_land_on(&full) {
            Standing::Wanted
        } else {
            Standing::NoTarget
        };
        show(view, &full.name, Some(&full));
        w.read = Some(full);
    }

    fn watched_mut(&mut self, name: &str) -> Option<&mut Watched> {
        match &mut self.entries.get_mut(name)?.slot {
            Slot::Watched(w) => Some(w),
            _ => None,
        }
    }

    /// Says when the candidates start and stop outnumbering the slots.
    fn tell_shortage(&mut self) {
        let count = self.entries.len();
        let short = count > MAX_CANDIDATE_WATCHES;
        if short == std::mem::replace(&mut self.short, short) {
            return;
        }
        if short {
            tracing::warn!(
                candidates = count,
                slots = MAX_CANDIDATE_WATCHES,
                "more new nodes than full-watch slots: the newest that a placeholder could \
                 move to are read in full first; nodes that cannot be a target (a taint, \
                 NotReady, cordoned, shown full) give up their slot and are read again \
                 when they change"
            );
        } else {
            tracing::info!(
                candidates = count,
                "every new node fits the full-watch slots again"
            );
        }
    }
}

/// Lays `full` (a full read; `None`: none) over what the metadata watch knows of
/// the node `name` in `view`: its name, creation time and labels.
fn show(view: &mut Option<Vec<NodeSummary>>, name: &str, full: Option<&NodeSummary>) {
    if let Some(node) = view.iter_mut().flatten().find(|n| n.name == name) {
        *node = NodeSummary {
            name: std::mem::take(&mut node.name),
            created: node.created,
            labels: std::mem::take(&mut node.labels),
            ..full.cloned().unwrap_or_default()
        };
    }
}

#[cfg(test)]
mod tests;
