//! `selfdestruct`: a pause-style container for Kubernetes placeholder pods that
//! evicts its own pod when moving it helps: on a jittered lifetime, or when a
//! newer node is ready for it.
//!
//! The decision (`selfdestruct_decision::decide`, in the `decision/` crate) is a
//! pure function over a snapshot; the agent ([`agent`]) is a thin I/O shell around it.
//!
//! A module or item is public only if the binary (`src/main.rs`) or the tests use
//! it; everything else is `pub(crate)`.
#![warn(missing_docs)]

pub mod agent;
pub mod api;
mod candidates;
pub mod clock;
pub mod config;
pub mod connect;
mod exec_plugin;
pub mod identity;
mod jitter;
pub mod logging;
mod malloc_trim;
pub mod node_gate;
pub mod pdb;
pub mod schedule;
pub mod signals;
pub mod summarize;
mod token_file;
mod watch;
pub mod wrapper;
