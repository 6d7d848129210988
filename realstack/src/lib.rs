//! A real Kubernetes control plane for tests: etcd, kube-apiserver, kube-controller-manager
//! and kube-scheduler on loopback (free ports, generated certificates, a temporary folder),
//! optionally the cluster-autoscaler with its kwok provider, and a stand-in kubelet
//! ([`kubelet`]) that runs the real `selfdestruct` binary as the container of pods that use
//! its image.
//!
//! The binaries come from the folder named by `SELFDESTRUCT_KUBE_BIN` ([`KUBE_BIN_VAR`]);
//! etcd from `PATH` (Debian's `etcd-server`). Everything started is stopped on drop, and by
//! the kernel when the test process dies ([`proc`]).

pub mod autoscaler;
pub mod control_plane;
pub mod kubelet;
pub mod pool;
pub mod proc;
pub mod wait;

pub use autoscaler::{Autoscaler, AutoscalerOptions, group_template};
pub use control_plane::{ControlPlane, ControlPlaneOptions};
pub use kubelet::{Kubelet, KubeletOptions, KubeletStats, node};
pub use pool::{POOL, in_pool, placeholder_set, set_env};

/// `e` and its causes, `: `-separated (for a test's panic message).
pub fn chain(e: &dyn std::error::Error) -> String {
    std::iter::successors(Some(e), |c| c.source())
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}

/// The value of `r`, or a panic naming the error and its causes (tests and the bench).
pub fn ok<T>(r: Result<T, Error>) -> T {
    r.unwrap_or_else(|e| panic!("{}", chain(&e)))
}

/// The variable naming the folder with `kube-apiserver`, `kube-controller-manager`,
/// `kube-scheduler`, `kubectl` (and `cluster-autoscaler` for the autoscaler scenarios).
pub const KUBE_BIN_VAR: &str = "SELFDESTRUCT_KUBE_BIN";

/// What went wrong starting or driving the stack.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `SELFDESTRUCT_KUBE_BIN` is unset or names no usable folder.
    #[error(
        "{KUBE_BIN_VAR} is {0}: set it to a folder holding kube-apiserver, kube-controller-manager, \
         kube-scheduler, kubectl and cluster-autoscaler (docs/testing.md, \"The real-stack tier\": \
         the Kubernetes release downloads, e.g. https://dl.k8s.io/v1.36.2/bin/linux/amd64/kube-apiserver, \
         and a cluster-autoscaler built with `-tags kwok`; on the project's machine: \
         tar -xJf ../shared/k8s/kube-v1.36.2-linux-amd64.tar.xz -C DIR, then {KUBE_BIN_VAR}=DIR/bin)"
    )]
    NoBinaries(String),
    /// A process could not be started.
    #[error("cannot start {what}")]
    Spawn {
        /// Which.
        what: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A process exited while it should be running.
    #[error("{what} exited ({status}) while starting; the end of its log ({log}):\n{tail}")]
    Exited {
        /// Which.
        what: String,
        /// How.
        status: String,
        /// Its log file.
        log: String,
        /// Its last lines.
        tail: String,
    },
    /// A condition was not met in time.
    #[error("timed out after {secs}s waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        secs: u64,
    },
    /// File system trouble.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Certificate generation.
    #[error("certificates")]
    Certs(#[from] rcgen::Error),
    /// The Kubernetes API.
    #[error("{what}")]
    Kube {
        /// What was being done.
        what: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// A command (kubectl) failed.
    #[error("{what} failed: {stderr}")]
    Command {
        /// Which.
        what: String,
        /// Its stderr.
        stderr: String,
    },
}

impl Error {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }
    pub(crate) fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
        let what = what.into();
        move |source| Error::Kube { what, source }
    }
}

/// The folder of the Kubernetes binaries, from [`KUBE_BIN_VAR`]: an error naming the
/// variable (and how to get the binaries) when it is unset or lacks `kube-apiserver`.
pub fn kube_bin() -> Result<std::path::PathBuf, Error> {
    let dir = std::env::var_os(KUBE_BIN_VAR).ok_or_else(|| Error::NoBinaries("unset".into()))?;
    let dir = std::path::PathBuf::from(dir);
    if !dir.join("kube-apiserver").is_file() {
        return Err(Error::NoBinaries(format!(
            "{} (no kube-apiserver there)",
            dir.display()
        )));
    }
    Ok(dir)
}

/// Runs `f` to completion on a new multi-threaded runtime (tests are plain `#[test]`s, so a
/// shared control plane can be started from any of them without nesting runtimes).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(f)
}
