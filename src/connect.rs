//! One way to the API for every mode. `lib.rs` finds the access once, before a mode
//! (and a wrapper's child) starts ([`discover`]); each mode then gets its client from it
//! with [`connect`]: a client, no access here (the mode pauses, or the wrapper runs its
//! child without the API), or a configuration error. The pause-or-exit rule is
//! [`pause_or_exit`]'s, for both steps. Under this: `access` (kubeconfig files and the
//! in-cluster account, read with bounds), `client` (the build and the request layer),
//! and under that the one token layer with the caps on token files and exec plugins
//! (`token_file`, `exec_plugin`).

use crate::access::{Access, Discovered};
use crate::client::{ClientError, client_retrying};
use crate::error::Error;
use crate::identity::IdentitySettings;
use crate::logging::Chain;

/// What a mode reaches the API with.
pub(crate) enum Api {
    /// A client, built.
    Client(kube::Client),
    /// No access here, and why.
    NoAccess(ClientError),
}

/// The pause-or-exit rule of every mode, at both steps (finding the access, building
/// the client): what a kubeconfig the user named (`KUBECONFIG`, `--kubeconfig`) cannot
/// give is a configuration error (exit 2); any other missing or unusable access is no
/// access here, and `why` comes back.
fn pause_or_exit<W: Into<ClientError>>(why: W, named: bool) -> Result<W, Error> {
    if named {
        return Err(Error::Client(why.into()));
    }
    Ok(why)
}

/// The API access, found once (kubeconfig files read off the signals' thread).
pub(crate) async fn discover(identity: &IdentitySettings) -> Result<Discovered, Error> {
    let found = crate::access::discover(
        |k| std::env::var_os(k),
        identity.kubeconfig.as_deref(),
        &identity.service_account_dir,
    )
    .await;
    match found {
        Err(e) => {
            let named = e.is_named();
            Ok(Err(pause_or_exit(e, named)?))
        }
        found => Ok(found),
    }
}

/// The client of `access`, with the default namespace `namespace` picks from it; built
/// off the signals' thread and retried while a credential does not answer in time.
/// Cancel-safe: race it with the signals.
pub(crate) async fn connect(
    access: Discovered,
    namespace: impl FnOnce(&Access) -> Result<String, Error>,
) -> Result<Api, Error> {
    let access = match access {
        Ok(access) => access,
        Err(why) => return Ok(Api::NoAccess(why.into())),
    };
    let namespace = namespace(&access)?;
    tracing::debug!(source = %access.source, server = %access.config.cluster_url, "API access");
    match client_retrying(&access, &namespace).await {
        Ok(client) => Ok(Api::Client(client)),
        Err(why) => Ok(Api::NoAccess(pause_or_exit(why, access.named)?)),
    }
}

/// Says why there is no API access, and what the mode does without it (`then`): at
/// info when there is nothing to use, as in a pod without a token; else a warning.
pub(crate) fn no_access(why: &ClientError, then: &str) {
    if matches!(why, ClientError::Access(e) if e.is_missing()) {
        tracing::info!(reason = %Chain(why), "no API access: {then}");
    } else {
        tracing::warn!(reason = %Chain(why), "no API access: {then}");
    }
}

/// [`connect`] for `signals::on_client_or_pause` (the node gate, `schedule`).
impl<N: FnOnce(&Access) -> String> crate::signals::Connect<N, Error> for Discovered {
    type Client = kube::Client;

    async fn client(self, namespace: N, cannot: &str) -> Result<Option<kube::Client>, Error> {
        match connect(self, |a| Ok(namespace(a))).await? {
            Api::Client(client) => Ok(Some(client)),
            Api::NoAccess(why) => {
                no_access(
                    &why,
                    &format!("{cannot}; running as a plain pause container"),
                );
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::AccessError;

    /// Access to `server` whose token file is missing: kube builds no client from it.
    fn unusable(named: bool) -> Access {
        let mut config = kube::Config::new("http://127.0.0.1:1".parse().expect("a URL"));
        config.auth_info.token_file = Some("/nonexistent/selfdestruct/token".into());
        let source = "kubeconfig /nonexistent".into();
        Access {
            config,
            namespace: None,
            source,
            named,
        }
    }

    #[tokio::test]
    async fn the_pause_or_exit_rule_for_every_mode() {
        // Nothing to use: no access here, and the namespace is not even asked for.
        let missing = connect(Err(AccessError::Missing), |_| unreachable!()).await;
        assert!(matches!(
            missing,
            Ok(Api::NoAccess(ClientError::Access(AccessError::Missing)))
        ));
        // Access that gives no client: a configuration error if the user named it.
        let named = connect(Ok(unusable(true)), |_| Ok("ns".into())).await;
        assert!(matches!(
            named,
            Err(Error::Client(ClientError::Credentials(..)))
        ));
        let found = connect(Ok(unusable(false)), |_| Ok("ns".into())).await;
        assert!(matches!(
            found,
            Ok(Api::NoAccess(ClientError::Credentials(..)))
        ));
        // A kubeconfig the user named that cannot be read: the same, one step earlier.
        let identity = IdentitySettings {
            kubeconfig: Some("/nonexistent/selfdestruct/kubeconfig".into()),
            ..IdentitySettings::default()
        };
        let Err(e) = discover(&identity).await else {
            panic!("a configuration error")
        };
        assert!(
            e.chain().to_string().contains("--kubeconfig=/nonexistent"),
            "{}",
            e.chain()
        );
    }
}
