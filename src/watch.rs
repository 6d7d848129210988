//! Nodes and sibling pods through `kube::runtime::watcher` (paged initial
//! lists, bookmarks, re-list after 410), each in its own task that maps every
//! object to a small summary as it arrives and sends the summaries to the
//! agent loop. What is added here is the retry discipline the agent needs:
//!
//! - every error backs off (capped, jittered, [`Backoff::TRANSIENT`]; a 403 on a list
//!   or on opening a watch [`Backoff::DENIED`]; an ERROR 401/403 in an open watch's
//!   stream lists again, which checks the permission). A re-list is no recovery: the
//!   failure count resets only once a watch delivered an object, or after [`QUIET`]
//!   without an error, so a watch that keeps answering 410 Gone lists less and less;
//! - a 410 or 400 on opening a watch lists again (kube's watcher would re-open
//!   the watch from the same expired or refused resourceVersion, for good);
//! - a list page over the client's cap ([`MAX_LIST_ANSWER`](crate::client::MAX_LIST_ANSWER))
//!   is asked for again with half the objects a page, down to one (kept for later lists);
//! - a list that returns an object twice (a `continue` token that never ends),
//!   or whose summaries would hold more than its target's bytes
//!   ([`Target::max_bytes`], as [`Weigh`] counts them), is abandoned, and backs
//!   off; so is one of more than [`MAX_LIST_PAGES`](crate::client::MAX_LIST_PAGES) pages (the client layer).

use std::collections::HashSet;
use std::fmt::Debug;
use std::time::Duration;

use tokio::time::Instant;

use futures_util::StreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

use crate::api::ApiError;
use crate::client::EndlessList;
use crate::jitter::draw;
use selfdestruct_decision::backoff::Backoff;
use selfdestruct_decision::model::{NodeSummary, Sibling, Taint};

/// Objects per list page: kube's watcher deserialises a whole page at once, so a
/// small page keeps the heap small. 100 Nodes are about 1 MiB of JSON; a
/// 5,000-Node list is 50 requests, at start-up and after a 410 only.
pub(crate) const PAGE_SIZE: u32 = 100;
/// The most the node list's summaries may hold (name, creation time and the
/// label keys the placement rules read: 285 bytes for a GKE node with one label
/// of interest, `watch/tests.rs`): some 115,000 nodes, more than any provider
/// supports in one cluster (GKE: 65,000).
pub(crate) const NODE_LIST_BYTES: usize = 32 << 20;
/// The most the sibling list's summaries may hold (189 bytes a pod): some
/// 20,000 placeholders.
pub(crate) const SIBLING_LIST_BYTES: usize = 4 << 20;

/// What a summary holds, in bytes (its own size and its strings'), to bound a list.
pub(crate) trait Weigh {
    /// Bytes held, roughly.
    fn weight(&self) -> usize;
}

/// Bytes a map entry costs beside its strings (a B-tree node's share).
const ENTRY_BYTES: usize = 64;

impl Weigh for NodeSummary {
    fn weight(&self) -> usize {
        let labels: usize = self
            .labels
            .iter()
            .map(|(k, v)| ENTRY_BYTES + k.len() + v.len())
            .sum();
        let taints: usize = self
            .taints
            .iter()
            .map(|t| {
                std::mem::size_of::<Taint>()
                    + t.key.len()
                    + t.value.as_ref().map_or(0, String::len)
                    + t.effect.len()
            })
            .sum();
        std::mem::size_of::<NodeSummary>()
            + self.name.len()
            + labels
            + taints
            + self.images_present.len() * std::mem::size_of::<usize>()
    }
}

impl Weigh for Sibling {
    fn weight(&self) -> usize {
        std::mem::size_of::<Sibling>()
            + self.name.len()
            + self.uid.len()
            + self.node_name.as_ref().map_or(0, String::len)
    }
}
/// The longest a watch asks for (`timeoutSeconds`, less up to [`WATCH_JITTER`]): a
/// silent watch is re-opened within 11 minutes (docs/reliability.md), ~11.4 requests/h.
pub(crate) const WATCH_TIMEOUT: Duration = Duration::from_secs(660);
/// The most taken off [`WATCH_TIMEOUT`] at random (a fleet's watches do not end together).
const WATCH_JITTER: Duration = Duration::from_secs(60);
/// An endless list (more than [`MAX_LIST_PAGES`](crate::client::MAX_LIST_PAGES) pages, or an object twice)
/// backs off from this step of [`Backoff::TRANSIENT`] at least (4-8 s): each
/// attempt cost up to [`MAX_LIST_PAGES`](crate::client::MAX_LIST_PAGES) requests.
const ENDLESS_LIST_STEP: u32 = 3;
/// After this long without an error, the next error backs off from the start again.
pub(crate) const QUIET: Duration = Duration::from_secs(600);

/// What a watcher tells the agent, with the objects summarised.
#[derive(Debug)]
pub(crate) enum Update<T> {
    /// The full current set (after a list).
    Reset(Vec<T>),
    /// An object was added or changed.
    Upsert(T),
    /// An object was deleted.
    Remove(String),
    /// The service account may not read these objects (the message says what is missing).
    Forbidden(String),
    /// The first list failed (any other error): no view yet, and none until a
    /// retry succeeds (the message says why). Sent once, and only before the
    /// first [`Update::Reset`].
    Unlisted(String),
}

/// What to watch: a label selector, a field selector and a name for the log.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    /// Label selector (empty: all).
    pub(crate) selector: String,
    /// Field selector (empty: none), e.g. `metadata.name=node-a`.
    pub(crate) fields: String,
    /// Human name for logs ("nodes", "sibling pods").
    pub(crate) what: &'static str,
    /// The most one list's summaries may hold ([`Weigh`]): more is a server
    /// whose list never ends.
    pub(crate) max_bytes: usize,
}

/// How an error of the watcher is handled.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// 403 on a list or on opening a watch: the message.
    Denied(String),
    /// Anything else.
    Transient {
        /// Start again with a list.
        relist: bool,
    },
}

fn api_status(e: &watcher::Error) -> Option<(u16, String)> {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s))
        | watcher::Error::WatchError(s) => Some((s.code, crate::logging::quote(&s.message))),
        _ => None,
    }
}

/// How the watcher error `e` is handled.
pub(crate) fn classify(e: &watcher::Error) -> Failure {
    let opening = matches!(
        e,
        watcher::Error::InitialListFailed(_) | watcher::Error::WatchStartFailed(_)
    );
    match api_status(e) {
        Some((403, message)) if opening => Failure::Denied(message),
        // In an open watch, a 401/403 is no answer about the permission: list
        // again (a list that is denied is reported then), keeping the view.
        Some((401 | 403, _)) => Failure::Transient { relist: !opening },
        // kube's watcher lists again after a 410 in the stream, but re-opens the
        // watch from the same resourceVersion after a 410 on opening it, or a 400
        // (a version the server cannot parse, as from a broken bookmark).
        Some((400 | 410, _)) => Failure::Transient {
            relist: matches!(e, watcher::Error::WatchStartFailed(_)),
        },
        _ => Failure::Transient { relist: false },
    }
}

/// Runs list+watch forever, sending the `summarize`d objects to `tx`. Ends only
/// when `tx` closes. `start_delay` spreads the first list of a fleet that starts
/// together. With a `K` of the metadata API (`NodeObject<true>`), kube lists and
/// watches the objects' metadata only (`as=PartialObjectMetadata`). The I/O only: what each
/// event means is [`Follower::on_event`]'s.
pub(crate) async fn follow<K, S>(
    api: Api<K>,
    target: Target,
    tx: mpsc::Sender<Update<S>>,
    start_delay: Duration,
    summarize: impl Fn(K) -> S + Send + 'static,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    S: Weigh + Send + 'static,
{
    tokio::time::sleep(start_delay).await;
    // Each watch asks for 10-11 min (kube's default is 290 s); a watch that
    // stays silent is then re-opened within 11 minutes.
    let timeout = (WATCH_TIMEOUT.as_secs_f64() - WATCH_JITTER.as_secs_f64() * draw()) as u32;
    let mut wc = watcher::Config::default().timeout(timeout);
    if !target.selector.is_empty() {
        wc = wc.labels(&target.selector);
    }
    if !target.fields.is_empty() {
        wc = wc.fields(&target.fields);
    }
    let start = |page| watcher(api.clone(), wc.clone().page_size(page)).boxed();
    let mut state = Follower::new(&target);
    let mut stream = start(state.page_size);
    loop {
        // The watcher's stream does not end; if it did, start it again.
        let Some(event) = stream.next().await else {
            stream = start(state.page_size);
            continue;
        };
        let (send, wait) = match state.on_event(event, &summarize, Instant::now()) {
            Action::Read => continue,
            Action::Send(update) => (Some(update), None),
            Action::BackOff {
                relist,
                tell,
                backoff,
                failures,
            } => {
                if relist {
                    stream = start(state.page_size);
                }
                (tell, Some(backoff.delay(failures, draw())))
            }
        };
        if let Some(update) = send
            && tx.send(update).await.is_err()
        {
            return;
        }
        if let Some(wait) = wait {
            if tx.is_closed() {
                return;
            }
            tracing::debug!(what = target.what, retry_in = ?wait, "backing off");
            tokio::time::sleep(wait).await;
        }
    }
}

/// What [`follow`] does after an event ([`Follower::on_event`]).
#[derive(Debug)]
enum Action<S> {
    /// Nothing: read the next event.
    Read,
    /// Send this to the agent.
    Send(Update<S>),
    /// A failure: start again with a list if `relist`, send `tell`, then wait
    /// `backoff`'s delay after `failures` failures.
    BackOff {
        relist: bool,
        tell: Option<Update<S>>,
        backoff: Backoff,
        failures: u32,
    },
}

/// What [`follow`] remembers between events: the list being read and the
/// failures. No I/O: the time comes in with each event.
struct Follower<S> {
    what: &'static str,
    max_bytes: usize,
    /// Failures since the last object a watch delivered (or the last [`QUIET`]).
    failures: u32,
    last_failure: Option<Instant>,
    /// The agent was told of a denial, and no list succeeded since.
    told_denied: bool,
    /// A list reached the agent, or the agent was told the first one failed:
    /// no [`Update::Unlisted`] any more.
    listed: bool,
    /// The list being read: summaries, the names seen and the bytes they hold.
    listing: Option<(Vec<S>, HashSet<String>, usize)>,
    /// Objects a list page asks for ([`PAGE_SIZE`], halved after a page over the cap).
    page_size: u32,
}

impl<S: Weigh> Follower<S> {
    fn new(target: &Target) -> Self {
        Follower {
            what: target.what,
            max_bytes: target.max_bytes,
            failures: 0,
            last_failure: None,
            told_denied: false,
            listed: false,
            listing: None,
            page_size: PAGE_SIZE,
        }
    }

    /// What to do after `event`, at `now`.
    fn on_event<K: Resource>(
        &mut self,
        event: watcher::Result<Event<K>>,
        summarize: impl Fn(K) -> S,
        now: Instant,
    ) -> Action<S> {
        let e = match event {
            Ok(Event::Init) => {
                self.listing = Some((Vec::new(), HashSet::new(), 0));
                return Action::Read;
            }
            Ok(Event::InitApply(obj)) => {
                let Some((items, names, held)) = self.listing.as_mut() else {
                    return Action::Read;
                };
                if names.insert(obj.name_any()) {
                    let summary = summarize(obj);
                    *held += summary.weight();
                    if *held <= self.max_bytes {
                        items.push(summary);
                        return Action::Read;
                    }
                }
                tracing::warn!(
                    what = self.what,
                    objects = items.len(),
                    held_bytes = *held,
                    "the list repeats an object or never ends (a continue token that \
                     never runs out?): abandoning it, retrying with backoff"
                );
                self.listing = None;
                let why = "the list repeats an object or never ends".into();
                return self.failed(Failure::Transient { relist: true }, why, true, now);
            }
            Ok(Event::InitDone) => {
                let Some((items, _, _)) = self.listing.take() else {
                    return Action::Read;
                };
                (self.told_denied, self.listed) = (false, true);
                return Action::Send(Update::Reset(items));
            }
            Ok(Event::Apply(obj)) => {
                self.failures = 0;
                return Action::Send(Update::Upsert(summarize(obj)));
            }
            Ok(Event::Delete(obj)) => {
                self.failures = 0;
                return Action::Send(Update::Remove(obj.name_any()));
            }
            Err(e) => e,
        };
        // The client layer's refusals: a list stopped at its page limit
        // ([`EndlessList`]), a page over its size cap.
        let e_ref: &(dyn std::error::Error + 'static) = &e;
        let chain = || std::iter::successors(Some(e_ref), |c| c.source());
        let endless = chain().any(|c| c.is::<EndlessList>());
        let too_large =
            chain().any(|c| matches!(c.downcast_ref(), Some(ApiError::TooLarge { .. })));
        let mut f = classify(&e);
        if too_large {
            self.page_size = (self.page_size / 2).max(1);
            tracing::warn!(
                what = self.what,
                page_size = self.page_size,
                "a list page is over the size cap: listing again with fewer objects a page"
            );
            f = Failure::Transient { relist: true };
        }
        let error = crate::logging::Chain(&e).to_string();
        match (&f, &e) {
            (Failure::Denied(_), _) => {}
            (_, watcher::Error::InitialListFailed(_)) => {
                tracing::warn!(what = self.what, error = %error, "list failed, retrying")
            }
            _ if api_status(&e).is_some_and(|(code, _)| code == 410) => {
                tracing::info!(what = self.what, "watch expired (410 Gone), listing again")
            }
            _ => tracing::warn!(what = self.what, error = %error, "watch failed, retrying"),
        }
        // An interrupted list is read again from its start.
        self.listing = None;
        self.failed(f, error, endless, now)
    }

    /// The backoff after a failure `f` (`endless`: a list that never ends).
    fn failed(&mut self, f: Failure, why: String, endless: bool, now: Instant) -> Action<S> {
        if self
            .last_failure
            .is_some_and(|t| now.duration_since(t) >= QUIET)
        {
            self.failures = 0;
        }
        self.last_failure = Some(now);
        if endless {
            self.failures = self.failures.max(ENDLESS_LIST_STEP);
        }
        let failures = self.failures;
        self.failures = failures.saturating_add(1);
        let (relist, tell, backoff) = match f {
            Failure::Denied(msg) if !self.told_denied => {
                self.told_denied = true;
                (false, Some(Update::Forbidden(msg)), Backoff::DENIED)
            }
            Failure::Denied(_) => (false, None, Backoff::DENIED),
            Failure::Transient { relist } if !self.listed => {
                self.listed = true;
                (relist, Some(Update::Unlisted(why)), Backoff::TRANSIENT)
            }
            Failure::Transient { relist } => (relist, None, Backoff::TRANSIENT),
        };
        Action::BackOff {
            relist,
            tell,
            backoff,
            failures,
        }
    }
}

#[cfg(test)]
mod tests;
