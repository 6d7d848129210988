//! Container image references, normalised the way the kubelet reports them in
//! `status.images[].names`, so `jupyter/scipy-notebook:2024` in the config matches
//! `docker.io/jupyter/scipy-notebook:2024` on the node.

use std::fmt;

/// A parsed, normalised image reference: `domain/path[:tag][@digest]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageRef {
    /// Registry host, `docker.io` when none is given.
    pub domain: String,
    /// Repository path, with `library/` added for official Docker Hub images.
    pub path: String,
    /// The tag; `latest` when neither tag nor digest is given.
    pub tag: Option<String>,
    /// `algorithm:hex`, when the reference pins a digest.
    pub digest: Option<String>,
}

impl ImageRef {
    /// Parses an image reference such as `nginx`, `quay.io/org/app:v1` or
    /// `registry:5000/app@sha256:...`.
    pub fn parse(input: &str) -> Result<Self, String> {
        let s = input.trim();
        if s.is_empty() {
            return Err("empty image reference".into());
        }
        if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("{s:?} contains white space"));
        }
        let (rest, digest) = match s.split_once('@') {
            Some((name, digest)) => {
                let (algo, hex) = digest
                    .split_once(':')
                    .ok_or_else(|| format!("digest {digest:?} is not algorithm:hex"))?;
                let algo_ok = !algo.is_empty()
                    && algo.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || "+._-".contains(c)
                    });
                let hex_ok =
                    (32..=128).contains(&hex.len()) && hex.chars().all(|c| c.is_ascii_hexdigit());
                if !algo_ok || !hex_ok {
                    return Err(format!("digest {digest:?} is not algorithm:hex"));
                }
                (name, Some(digest.to_ascii_lowercase()))
            }
            None => (s, None),
        };
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => {
                let tag = &rest[last_slash + i + 1..];
                let tag_ok = !tag.is_empty()
                    && tag.len() <= 128
                    && tag
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
                    && !tag.starts_with(['.', '-']);
                if !tag_ok {
                    return Err(format!("tag {tag:?} is not valid"));
                }
                (&rest[..last_slash + i], Some(tag.to_string()))
            }
            None => (rest, None),
        };
        if name.len() > MAX_NAME {
            return Err(format!("the name is longer than {MAX_NAME} characters"));
        }
        let mut parts: Vec<&str> = name.split('/').collect();
        let domain = if parts.len() > 1
            && (parts[0].contains('.') || parts[0].contains(':') || parts[0] == "localhost")
        {
            let d = parts.remove(0);
            if !is_domain(d) {
                return Err(format!(
                    "registry {d:?} is not a host name with an optional :port"
                ));
            }
            if d == "index.docker.io" || d == "registry-1.docker.io" {
                "docker.io".to_string()
            } else {
                d.to_string()
            }
        } else {
            "docker.io".to_string()
        };
        if !parts.iter().all(|p| is_path_component(p)) {
            return Err(format!(
                "repository {name:?} must be lowercase letters and digits, separated by '.', '_', \
                 '__' or dashes within a part and by '/' between parts"
            ));
        }
        if domain == "docker.io" && parts.len() == 1 {
            parts.insert(0, "library");
        }
        let tag = match (&tag, &digest) {
            (None, None) => Some("latest".to_string()),
            _ => tag,
        };
        Ok(ImageRef {
            domain,
            path: parts.join("/"),
            tag,
            digest,
        })
    }

    /// Whether `reported` (one name from a node's `status.images[].names`) is this image.
    /// A pinned digest must match the digest; otherwise the tag must match.
    pub fn matches(&self, reported: &str) -> bool {
        let Ok(other) = ImageRef::parse(reported) else {
            return false;
        };
        if other.domain != self.domain || other.path != self.path {
            return false;
        }
        match &self.digest {
            Some(d) => other.digest.as_deref() == Some(d.as_str()),
            None => other.digest.is_none() && other.tag == self.tag,
        }
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.domain, self.path)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// The longest name (registry and repository), as the container runtimes' reference
/// grammar has it (distribution's `NameTotalLengthMax`).
const MAX_NAME: usize = 255;

/// One part of a repository path: `[a-z0-9]+` runs joined by `.`, `_`, `__` or dashes.
fn is_path_component(p: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    p.starts_with(alnum)
        && p.ends_with(alnum)
        && p.split(alnum)
            .all(|sep| matches!(sep, "." | "_" | "__") || sep.chars().all(|c| c == '-'))
}

/// A registry: a host name (dot-separated labels of letters, digits and inner dashes) or
/// a bracketed IPv6 address, with an optional `:port`.
fn is_domain(d: &str) -> bool {
    let (host, port) = match d.rsplit_once(':') {
        Some((h, p)) if !p.contains(']') => (h, Some(p)),
        _ => (d, None),
    };
    let label = |l: &str| {
        !l.is_empty()
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(ip) => ip.parse::<std::net::Ipv6Addr>().is_ok(),
        None => host.split('.').all(label),
    };
    host_ok && port.is_none_or(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

/// Parses a comma-separated list of image references (empty items are skipped).
pub fn parse_list(input: &str) -> Result<Vec<ImageRef>, String> {
    input
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(ImageRef::parse)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn normalises_like_the_kubelet() {
        let table = [
            ("nginx", "docker.io/library/nginx:latest"),
            ("nginx:1.25", "docker.io/library/nginx:1.25"),
            (
                "jupyter/scipy-notebook:2024",
                "docker.io/jupyter/scipy-notebook:2024",
            ),
            ("index.docker.io/jupyter/base:x", "docker.io/jupyter/base:x"),
            ("docker.io/nginx", "docker.io/library/nginx:latest"),
            (
                "quay.io/jupyter/base-notebook:2024-01-01",
                "quay.io/jupyter/base-notebook:2024-01-01",
            ),
            ("localhost/app", "localhost/app:latest"),
            ("registry:5000/team/app:v1", "registry:5000/team/app:v1"),
            ("gcr.io/a/b/c:1.0", "gcr.io/a/b/c:1.0"),
            (
                "my-registry.example.com:443/a__b/c-d--e.f_g:1",
                "my-registry.example.com:443/a__b/c-d--e.f_g:1",
            ),
            ("[::1]:5000/app", "[::1]:5000/app:latest"),
        ];
        for (input, want) in table {
            assert_eq!(
                ImageRef::parse(input).map(|r| r.to_string()).as_deref(),
                Ok(want),
                "{input}"
            );
        }
        let long = format!("r.io/{}", "a".repeat(250));
        assert_eq!(
            ImageRef::parse(&long),
            Ok(ImageRef {
                domain: "r.io".into(),
                path: "a".repeat(250),
                tag: Some("latest".into()),
                digest: None
            })
        );
        let pinned = ImageRef::parse(&format!("nginx@{SHA}")).expect("valid");
        assert_eq!(pinned.tag, None);
        assert_eq!(pinned.digest.as_deref(), Some(SHA));
    }

    #[test]
    fn refuses_invalid_references() {
        for bad in [
            "",
            "  ",
            "Nginx",
            "nginx:",
            "nginx:-bad",
            "a//b",
            "nginx@sha256",
            "nginx@sha256:xyz",
            "nginx@:0123456789abcdef0123456789abcdef",
            "with space:1",
            "/leading",
            "trailing/",
            // Issue 46, item 18: a duration, a name past 255 characters, a digest of any
            // length, a malformed part or registry were taken as images no node holds.
            "-5s",
            "app-",
            "a..b/c",
            "a___b",
            "team/.app",
            "bad_host.io/app",
            "-host.io/app",
            "host.io:port/app",
            "host.io:/app",
            "[::1/app",
            "[zz::1]:5000/app",
        ] {
            assert!(ImageRef::parse(bad).is_err(), "{bad:?} should be refused");
        }
        let too_long = ImageRef::parse(&"a".repeat(100_000)).expect_err("100,000 characters");
        assert_eq!(too_long, "the name is longer than 255 characters");
        assert!(ImageRef::parse(&format!("nginx@sha256:{}", "0".repeat(129))).is_err());
    }

    #[test]
    fn matches_reported_names() {
        let want = ImageRef::parse("jupyter/scipy-notebook:2024").expect("valid");
        assert!(want.matches("docker.io/jupyter/scipy-notebook:2024"));
        assert!(want.matches("jupyter/scipy-notebook:2024"));
        assert!(!want.matches("docker.io/jupyter/scipy-notebook:2023"));
        assert!(!want.matches(&format!("docker.io/jupyter/scipy-notebook@{SHA}")));
        assert!(!want.matches("quay.io/jupyter/scipy-notebook:2024"));
        assert!(!want.matches("garbage name"));

        let pinned = ImageRef::parse(&format!("quay.io/x/y:1@{SHA}")).expect("valid");
        assert!(pinned.matches(&format!("quay.io/x/y@{SHA}")));
        assert!(!pinned.matches("quay.io/x/y:1"));
        let latest = ImageRef::parse("busybox").expect("valid");
        assert!(latest.matches("docker.io/library/busybox:latest"));
        assert!(!latest.matches("docker.io/library/busybox:1.36"));
    }

    #[test]
    fn parses_lists() {
        let list = parse_list(" nginx:1 , ,quay.io/a/b:2 ").expect("valid");
        assert_eq!(list.len(), 2);
        assert!(parse_list("nginx,Bad").is_err());
        assert_eq!(parse_list("").map(|l| l.len()), Ok(0));
    }
}
