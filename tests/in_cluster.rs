//! The path every shipped placeholder takes: the in-cluster service account
//! over TLS (`KUBERNETES_SERVICE_HOST`/`_PORT`, the token file, the cluster CA),
//! through a TLS front (a generated CA, as a cluster has) to the fake API server.

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::cluster::{NS, Scene};
use common::*;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A self-signed server certificate for `127.0.0.1`: (cert PEM, cert DER, key DER).
fn certificate() -> (String, CertificateDer<'static>, PrivateKeyDer<'static>) {
    let c = rcgen::generate_simple_self_signed(vec![
        "127.0.0.1".to_string(),
        "kubernetes.default.svc".to_string(),
    ])
    .expect("certificate");
    let key = PrivatePkcs8KeyDer::from(c.signing_key.serialize_der()).into();
    (c.cert.pem(), c.cert.der().clone(), key)
}

/// Serves TLS on a free port and forwards every connection to `backend`.
fn tls_front(
    backend: SocketAddr,
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
) -> u16 {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    listener.set_nonblocking(true).expect("nonblocking");
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let Ok(mut plain) = tokio::net::TcpStream::connect(backend).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
    });
    port
}

/// A service-account folder as the kubelet mounts it.
fn service_account(s: &Scene, token: &str, ca_pem: &str) -> PathBuf {
    let dir = s.home.join("serviceaccount");
    std::fs::create_dir_all(&dir).expect("mkdir");
    // As the kubelet writes it: no trailing newline (kube-rs, unlike client-go,
    // sends a token file's content untrimmed).
    std::fs::write(dir.join("token"), token).expect("token");
    std::fs::write(dir.join("ca.crt"), ca_pem).expect("ca");
    std::fs::write(dir.join("namespace"), NS).expect("namespace");
    dir
}

fn in_cluster_agent(s: &Scene, pod: &str, port: u16, sa: &std::path::Path) -> Proc {
    let (port, sa) = (port.to_string(), sa.display().to_string());
    let env = [
        ("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
        ("KUBERNETES_SERVICE_PORT", port.as_str()),
        ("SELFDESTRUCT_SERVICE_ACCOUNT_DIR", sa.as_str()),
        // The namespace comes from the service account, the name from POD_NAME.
        ("POD_NAME", pod),
        ("SELFDESTRUCT_MIN_LIFETIME", "1s"),
        ("SELFDESTRUCT_MAX_LIFETIME", "2s"),
        ("SELFDESTRUCT_MOVE_TO_NEW_NODES", "false"),
        ("SELFDESTRUCT_MIN_AGE", "0"),
        ("SELFDESTRUCT_START_JITTER", "0"),
        ("SELFDESTRUCT_LOG_LEVEL", "debug"),
    ];
    Proc::spawn(command(bin(), &[], &env, &s.home))
}

#[test]
fn in_cluster_over_tls_with_the_service_account_token_file() {
    let s = Scene::placeholders(2);
    let uid = s.uid("placeholder-0");
    let token = "sa-token-placeholder-0";
    s.fake.add_token(token);
    let (pem, cert, key) = certificate();
    let port = tls_front(s.fake.addr(), cert, key);
    let sa = service_account(&s, token, &pem);
    let mut agent = in_cluster_agent(&s, "placeholder-0", port, &sa);
    let ev = s
        .fake
        .wait_for_request(|r| r.is_eviction(), Duration::from_secs(15))
        .unwrap_or_else(|| panic!("no eviction:\n{}", agent.log()));
    assert_eq!(ev.status, 201, "{}", agent.log());
    assert_eq!(
        ev.path,
        format!("/api/v1/namespaces/{NS}/pods/placeholder-0/eviction")
    );
    let body = ev.body.clone().expect("eviction body");
    assert_eq!(body["deleteOptions"]["preconditions"]["uid"], uid.as_str());
    s.assert_only_own_mutations(&[("placeholder-0", &uid)]);
    let (status, _) = agent.terminate();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", agent.log());
}

#[test]
fn a_server_certificate_the_cluster_ca_did_not_sign_is_refused() {
    let s = Scene::placeholders(1);
    let token = "sa-token-placeholder-0";
    s.fake.add_token(token);
    let (_, cert, key) = certificate();
    let (other_ca, _, _) = certificate();
    let port = tls_front(s.fake.addr(), cert, key);
    let sa = service_account(&s, token, &other_ca);
    let before = s.fake.requests().len();
    let mut agent = in_cluster_agent(&s, "placeholder-0", port, &sa);
    assert!(
        agent.wait_for_log("cannot read own pod", Duration::from_secs(10)),
        "{}",
        agent.log()
    );
    assert!(
        agent.log().contains("certificate"),
        "the log names the certificate problem:\n{}",
        agent.log()
    );
    assert_eq!(s.fake.requests().len(), before, "no request got through");
    assert!(agent.is_running(), "holds its place and retries");
    let (status, _) = agent.terminate();
    assert_eq!(status.and_then(|s| s.code()), Some(0));
}
