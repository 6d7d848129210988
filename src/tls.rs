//! The TLS crypto provider: *ring*, cut to what a kube-apiserver needs.
//!
//! `rustls::crypto::ring::default_provider()` links every suite *ring* has.
//! Every kube-apiserver (Go's crypto/tls) speaks TLS 1.3 with AES-GCM and
//! X25519 or P-256, so ChaCha20-Poly1305 and P-384 key exchange are left out
//! (about 40 KiB of code). Certificates are still verified with every RSA,
//! ECDSA and Ed25519 algorithm *ring* offers, as rustls does by default.

use std::sync::Arc;

use rand::TryRngCore;
use rustls::SignatureScheme;
use rustls::crypto::ring::{cipher_suite, kx_group, sign};
use rustls::crypto::{
    CryptoProvider, GetRandomFailed, KeyProvider, SecureRandom, WebPkiSupportedAlgorithms,
};
use rustls::pki_types::PrivateKeyDer;
use rustls::sign::SigningKey;
use webpki::ring as alg;

/// The provider for every connection to the API server.
pub fn provider() -> CryptoProvider {
    CryptoProvider {
        cipher_suites: vec![
            cipher_suite::TLS13_AES_128_GCM_SHA256,
            cipher_suite::TLS13_AES_256_GCM_SHA384,
        ],
        kx_groups: vec![kx_group::X25519, kx_group::SECP256R1],
        signature_verification_algorithms: SIGNATURES,
        secure_random: &OsRandom,
        key_provider: &Keys,
    }
}

/// rustls' own table for *ring* (rustls 0.23, `crypto::ring::SUPPORTED_SIG_ALGS`).
static SIGNATURES: WebPkiSupportedAlgorithms = WebPkiSupportedAlgorithms {
    all: &[
        alg::ECDSA_P256_SHA256,
        alg::ECDSA_P256_SHA384,
        alg::ECDSA_P384_SHA256,
        alg::ECDSA_P384_SHA384,
        alg::ED25519,
        alg::RSA_PSS_2048_8192_SHA256_LEGACY_KEY,
        alg::RSA_PSS_2048_8192_SHA384_LEGACY_KEY,
        alg::RSA_PSS_2048_8192_SHA512_LEGACY_KEY,
        alg::RSA_PKCS1_2048_8192_SHA256,
        alg::RSA_PKCS1_2048_8192_SHA384,
        alg::RSA_PKCS1_2048_8192_SHA512,
        alg::RSA_PKCS1_2048_8192_SHA256_ABSENT_PARAMS,
        alg::RSA_PKCS1_2048_8192_SHA384_ABSENT_PARAMS,
        alg::RSA_PKCS1_2048_8192_SHA512_ABSENT_PARAMS,
    ],
    mapping: &[
        (
            SignatureScheme::ECDSA_NISTP384_SHA384,
            &[alg::ECDSA_P384_SHA384, alg::ECDSA_P256_SHA384],
        ),
        (
            SignatureScheme::ECDSA_NISTP256_SHA256,
            &[alg::ECDSA_P256_SHA256, alg::ECDSA_P384_SHA256],
        ),
        (SignatureScheme::ED25519, &[alg::ED25519]),
        (
            SignatureScheme::RSA_PSS_SHA512,
            &[alg::RSA_PSS_2048_8192_SHA512_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PSS_SHA384,
            &[alg::RSA_PSS_2048_8192_SHA384_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PSS_SHA256,
            &[alg::RSA_PSS_2048_8192_SHA256_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA512,
            &[alg::RSA_PKCS1_2048_8192_SHA512],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA384,
            &[alg::RSA_PKCS1_2048_8192_SHA384],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA256,
            &[alg::RSA_PKCS1_2048_8192_SHA256],
        ),
    ],
};

/// Randomness for TLS from the operating system (getrandom).
#[derive(Debug)]
struct OsRandom;

impl SecureRandom for OsRandom {
    fn fill(&self, buf: &mut [u8]) -> Result<(), GetRandomFailed> {
        rand::rngs::OsRng
            .try_fill_bytes(buf)
            .map_err(|_| GetRandomFailed)
    }
}

/// Client keys (kubeconfig `client-key-data`): RSA, ECDSA or Ed25519.
#[derive(Debug)]
struct Keys;

impl KeyProvider for Keys {
    fn load_private_key(
        &self,
        key_der: PrivateKeyDer<'static>,
    ) -> Result<Arc<dyn SigningKey>, rustls::Error> {
        sign::any_supported_type(&key_der)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_only_tls13_aes_gcm_and_checks_every_signature_rustls_does() {
        let p = provider();
        let names: Vec<String> = p
            .cipher_suites
            .iter()
            .map(|s| format!("{:?}", s.suite()))
            .collect();
        assert_eq!(
            names,
            ["TLS13_AES_128_GCM_SHA256", "TLS13_AES_256_GCM_SHA384"]
        );
        let groups: Vec<String> = p
            .kx_groups
            .iter()
            .map(|g| format!("{:?}", g.name()))
            .collect();
        assert_eq!(groups, ["X25519", "secp256r1"]);
        // The same verification table as rustls' own ring provider.
        let ring = rustls::crypto::ring::default_provider();
        assert_eq!(
            p.signature_verification_algorithms.supported_schemes(),
            ring.signature_verification_algorithms.supported_schemes()
        );
        assert_eq!(
            format!("{:?}", p.signature_verification_algorithms),
            format!("{:?}", ring.signature_verification_algorithms)
        );
        let mut buf = [0u8; 32];
        p.secure_random.fill(&mut buf).expect("random");
        assert_ne!(buf, [0u8; 32]);
    }

    #[test]
    fn loads_a_client_key() {
        let c = rcgen::generate_simple_self_signed(vec!["me".into()]).expect("cert");
        let der = PrivateKeyDer::Pkcs8(c.signing_key.serialize_der().into());
        let key = provider()
            .key_provider
            .load_private_key(der)
            .expect("an ECDSA P-256 client key");
        assert_eq!(key.algorithm(), rustls::SignatureAlgorithm::ECDSA);
        let junk = PrivateKeyDer::Pkcs8(vec![1, 2, 3].into());
        assert!(provider().key_provider.load_private_key(junk).is_err());
    }
}
