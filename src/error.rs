//! Why a binary of the image stops other than on SIGTERM/SIGINT: one [`Error`], each
//! cause kept as its source. Every mode returns it; `exit_code` (lib.rs), called by each
//! binary's `main`, alone maps it to an exit code.

use selfdestruct_decision::settings::SettingError;

use crate::client::ClientError;

/// How a mode ends: `Ok` on SIGTERM/SIGINT.
pub(crate) type Result<T = (), E = Error> = std::result::Result<T, E>;

/// Why a mode ended other than on SIGTERM/SIGINT (which is `Ok`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--` with nothing after it (a configuration error).
    #[error("nothing to run after -- (usage: selfdestruct [OPTIONS] -- CMD [ARGS...])")]
    NothingToRun,
    /// A setting is invalid (a configuration error, naming the variable).
    #[error(transparent)]
    Setting(#[from] SettingError),
    /// `check-settings` refuses a setting (a configuration error).
    #[error(transparent)]
    Check(#[from] CheckError),
    /// A kubeconfig the user named cannot be used, or gives no client (a
    /// configuration error).
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The own pod cannot be identified (a configuration error, logged where found).
    #[error("the own pod cannot be identified")]
    OwnPod,
    /// The runtime or the signal handlers cannot be set up.
    #[error("cannot {0}")]
    Setup(&'static str, #[source] std::io::Error),
    /// The entrypoint wrapper's command cannot be started (logged where found).
    #[error("cannot start the command")]
    Spawn(#[source] std::io::Error),
    /// An old subcommand (`selfdestruct schedule`, `selfdestruct node-gate`) names a
    /// binary that cannot be run from beside this one (a configuration error: an image
    /// without it).
    #[error("`selfdestruct {subcommand}` runs {}, which cannot be run", .path.display())]
    Moved {
        /// The old subcommand.
        subcommand: &'static str,
        /// The binary it runs.
        path: std::path::PathBuf,
        /// Why it cannot be run.
        #[source]
        source: std::io::Error,
    },
    /// The entrypoint wrapper's command exited with this code, not 0 (logged where found).
    #[error("the command exited with code {0}")]
    Child(i32),
}

impl Error {
    /// The error with its causes, on one line.
    pub fn chain(&self) -> impl std::fmt::Display + '_ {
        crate::logging::Chain(self)
    }
}

/// Why `check-settings` refuses its arguments.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// Not `VARIABLE=VALUE`.
    #[error("expected VARIABLE=VALUE, not {0:?}")]
    NotASetting(String),
    /// No setting has this variable.
    #[error("unknown setting {0}: no agent setting has this variable")]
    Unknown(String),
    /// The variable is the own pod's identity or an internal folder.
    #[error(
        "{0} is not an agent setting: the own pod's identity and its service-account and \
         podinfo folders come from the pod (the Downward API and its volumes), not from settings"
    )]
    NotOperators(String),
    /// The variable is given twice.
    #[error("{0} is given twice")]
    Twice(String),
    /// The command line they make is refused (clap's message).
    #[error("{}", .0.to_string().trim_end().trim_start_matches("error: "))]
    Parse(#[source] clap::Error),
}
