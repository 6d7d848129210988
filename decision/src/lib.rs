//! The pure core of `selfdestruct`: whether a placeholder pod should move now.
//!
//! [`decide`] maps a [`Snapshot`] (now, the own pod, nodes, siblings, the
//! policy, memory of past attempts, one random draw) to a [`Decision`]. There is
//! no I/O, no clock and no randomness here: the agent's I/O shell and the
//! simulator both call it with what they observed, and tests build snapshots
//! with [`builder`].
#![warn(missing_docs)]

pub mod backoff;
pub mod builder;
mod decide;
pub mod duration;
pub mod images;
pub mod model;
pub mod selector;
#[cfg(feature = "clap")]
pub mod settings;

pub use decide::*;
