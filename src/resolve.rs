//! Finds the API server's address when a kubeconfig names it by host name:
//! `/etc/hosts`, then DNS over UDP (A and AAAA) to the nameservers of
//! `/etc/resolv.conf`, with its `search` domains for single-label names.
//! An IP address needs no lookup (hyper connects to it directly), and in a
//! cluster the API server is always an IP (`KUBERNETES_SERVICE_HOST`).
//!
//! Not glibc's `getaddrinfo`: in a static glibc build it pulls in NSS and the
//! dynamic loader, about 200 KiB of a binary that is meant to be tiny.

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::client::legacy::connect::dns::Name;

/// How long one DNS query may take.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(3);
const TYPE_A: u16 = 1;
const TYPE_AAAA: u16 = 28;

/// The resolver hyper's connector calls with a host name.
#[derive(Clone, Debug)]
pub struct Resolver {
    /// The hosts file.
    pub hosts: PathBuf,
    /// The resolver configuration (`nameserver`, `search`).
    pub resolv_conf: PathBuf,
    /// The nameservers' port.
    pub port: u16,
}

impl Default for Resolver {
    fn default() -> Self {
        Resolver {
            hosts: "/etc/hosts".into(),
            resolv_conf: "/etc/resolv.conf".into(),
            port: 53,
        }
    }
}

impl tower::Service<Name> for Resolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let ips = this.lookup(name.as_str()).await?;
            Ok(ips
                .into_iter()
                .map(|ip| SocketAddr::new(ip, 0))
                .collect::<Vec<_>>()
                .into_iter())
        })
    }
}

impl Resolver {
    /// The addresses of `name`.
    pub async fn lookup(&self, name: &str) -> io::Result<Vec<IpAddr>> {
        let name = name.trim_end_matches('.');
        if let Ok(ip) = name.trim_matches(['[', ']']).parse::<IpAddr>() {
            return Ok(vec![ip]);
        }
        let hosts = std::fs::read_to_string(&self.hosts).unwrap_or_default();
        let found = from_hosts(&hosts, name);
        if !found.is_empty() {
            return Ok(found);
        }
        let conf = std::fs::read_to_string(&self.resolv_conf).unwrap_or_default();
        let (servers, search) = parse_resolv_conf(&conf);
        let mut names = vec![name.to_string()];
        if !name.contains('.') {
            names.splice(0..0, search.iter().map(|d| format!("{name}.{d}")));
        }
        let mut last_error = None;
        for candidate in &names {
            for server in &servers {
                let addr = SocketAddr::new(*server, self.port);
                let mut ips = Vec::new();
                for qtype in [TYPE_A, TYPE_AAAA] {
                    match query(addr, candidate, qtype).await {
                        Ok(found) => ips.extend(found),
                        Err(e) => last_error = Some(e),
                    }
                }
                if !ips.is_empty() {
                    return Ok(ips);
                }
            }
        }
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            match last_error {
                Some(e) => format!("cannot resolve {name}: {e}"),
                None => format!("cannot resolve {name}: no such host"),
            },
        ))
    }
}

/// The addresses `hosts` (the `/etc/hosts` format) gives `name`.
pub fn from_hosts(hosts: &str, name: &str) -> Vec<IpAddr> {
    hosts
        .lines()
        .filter_map(|line| {
            let mut words = line.split('#').next()?.split_whitespace();
            let ip = words.next()?.parse::<IpAddr>().ok()?;
            words.any(|w| w.eq_ignore_ascii_case(name)).then_some(ip)
        })
        .collect()
}

/// The nameservers (default: the local host, as glibc does) and search domains.
pub fn parse_resolv_conf(conf: &str) -> (Vec<IpAddr>, Vec<String>) {
    let (mut servers, mut search) = (Vec::new(), Vec::new());
    for line in conf.lines() {
        let mut words = line
            .split(['#', ';'])
            .next()
            .unwrap_or("")
            .split_whitespace();
        match words.next() {
            Some("nameserver") => {
                // A link-local IPv6 server may carry a zone (`fe80::1%eth0`): not supported.
                if let Some(ip) = words.next().and_then(|w| w.parse().ok()) {
                    servers.push(ip);
                }
            }
            Some("search" | "domain") => search = words.map(str::to_string).collect(),
            _ => {}
        }
    }
    if servers.is_empty() {
        servers.push(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    servers.truncate(3);
    (servers, search)
}

async fn query(server: SocketAddr, name: &str, qtype: u16) -> io::Result<Vec<IpAddr>> {
    let id = (crate::backoff::draw() * 65536.0) as u16;
    let msg = encode_query(id, name, qtype)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a valid host name"))?;
    let local: SocketAddr = match server {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = tokio::net::UdpSocket::bind(local).await?;
    socket.connect(server).await?;
    socket.send(&msg).await?;
    let mut buf = [0u8; 1500];
    tokio::time::timeout(QUERY_TIMEOUT, async {
        loop {
            let n = socket.recv(&mut buf).await?;
            // Another id is a stray answer: keep waiting for ours.
            if let Some(ips) = parse_answer(id, &buf[..n]) {
                return Ok(ips);
            }
        }
    })
    .await
    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, format!("no answer from {server}")))?
}

/// A recursive query for `name` (`None` if it is no valid DNS name).
pub fn encode_query(id: u16, name: &str, qtype: u16) -> Option<Vec<u8>> {
    let mut msg = Vec::with_capacity(name.len() + 18);
    msg.extend_from_slice(&id.to_be_bytes());
    msg.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        let len = u8::try_from(label.len())
            .ok()
            .filter(|l| (1..64).contains(l))?;
        msg.push(len);
        msg.extend_from_slice(label.as_bytes());
    }
    msg.push(0);
    if msg.len() > 12 + 255 {
        return None;
    }
    msg.extend_from_slice(&qtype.to_be_bytes());
    msg.extend_from_slice(&[0, 1]);
    Some(msg)
}

fn skip_name(msg: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let len = *msg.get(at)?;
        match len {
            0 => return Some(at + 1),
            l if l & 0xC0 == 0xC0 => return Some(at + 2),
            l => at += 1 + usize::from(l),
        }
    }
}

fn u16_at(msg: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*msg.get(at)?, *msg.get(at + 1)?]))
}

/// The A and AAAA records of the answer to query `id` (CNAMEs are followed by
/// the recursive server, which adds their addresses); `None` if `msg` is not
/// that answer. An error answer (NXDOMAIN...) has no addresses.
pub fn parse_answer(id: u16, msg: &[u8]) -> Option<Vec<IpAddr>> {
    if u16_at(msg, 0)? != id || msg.get(2)? & 0x80 == 0 {
        return None;
    }
    let mut ips = Vec::new();
    if msg.get(3)? & 0x0F != 0 {
        return Some(ips);
    }
    let (questions, answers) = (u16_at(msg, 4)?, u16_at(msg, 6)?);
    let mut at = 12;
    for _ in 0..questions {
        at = skip_name(msg, at)? + 4;
    }
    for _ in 0..answers {
        at = skip_name(msg, at)?;
        let rtype = u16_at(msg, at)?;
        let len = usize::from(u16_at(msg, at + 8)?);
        let data = msg.get(at + 10..at + 10 + len)?;
        match (rtype, data.len()) {
            (TYPE_A, 4) => ips.push(IpAddr::from(<[u8; 4]>::try_from(data).ok()?)),
            (TYPE_AAAA, 16) => ips.push(IpAddr::from(<[u8; 16]>::try_from(data).ok()?)),
            _ => {}
        }
        at += 10 + len;
    }
    Some(ips)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer to `query` with a CNAME and then `ips`, names compressed.
    fn answer(query: &[u8], ips: &[IpAddr]) -> Vec<u8> {
        let mut msg = query.to_vec();
        msg[2] = 0x81;
        msg[3] = 0x80;
        msg[7] = u8::try_from(ips.len() + 1).expect("few");
        // CNAME: name = pointer to the question, rdata = "x" + pointer.
        msg.extend_from_slice(&[0xC0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 4, 1, b'x', 0xC0, 12]);
        for ip in ips {
            let (t, data) = match ip {
                IpAddr::V4(v4) => (TYPE_A, v4.octets().to_vec()),
                IpAddr::V6(v6) => (TYPE_AAAA, v6.octets().to_vec()),
            };
            msg.extend_from_slice(&[0xC0, 12]);
            msg.extend_from_slice(&t.to_be_bytes());
            msg.extend_from_slice(&[0, 1, 0, 0, 0, 60]);
            msg.extend_from_slice(&u16::try_from(data.len()).expect("short").to_be_bytes());
            msg.extend_from_slice(&data);
        }
        msg
    }

    #[test]
    fn queries_and_answers() {
        let q = encode_query(7, "api.example.com", TYPE_A).expect("valid");
        assert_eq!(&q[12..17], b"\x03api\x07");
        assert!(encode_query(1, "a..b", TYPE_A).is_none());
        assert!(encode_query(1, &"x".repeat(64), TYPE_A).is_none());
        let ips: Vec<IpAddr> = vec![
            "10.1.2.3".parse().expect("ip"),
            "fd00::1".parse().expect("ip"),
        ];
        let a = answer(&q, &ips);
        assert_eq!(parse_answer(7, &a), Some(ips));
        assert_eq!(parse_answer(8, &a), None, "another query's answer");
        let mut nx = a.clone();
        nx[3] = 0x83;
        assert_eq!(parse_answer(7, &nx), Some(vec![]));
        // Cut anywhere: never a panic, never a wrong address.
        for cut in 0..a.len() {
            let got = parse_answer(7, &a[..cut]);
            assert!(got.is_none(), "cut at {cut}: {got:?}");
        }
    }

    #[test]
    fn hosts_and_resolv_conf() {
        let hosts = "127.0.0.1 localhost\n# 10.0.0.9 api\n10.0.0.1 api.local API # comment\nbad line\n::1 localhost ip6-localhost\n";
        assert_eq!(
            from_hosts(hosts, "localhost"),
            vec![
                IpAddr::from([127, 0, 0, 1]),
                "::1".parse::<IpAddr>().expect("ip")
            ]
        );
        assert_eq!(from_hosts(hosts, "api"), vec![IpAddr::from([10, 0, 0, 1])]);
        assert!(from_hosts(hosts, "api.other").is_empty());
        let (servers, search) = parse_resolv_conf(
            "# c\nnameserver 10.96.0.10\nnameserver fe80::1%eth0\nsearch a.svc b.local\noptions ndots:5\n",
        );
        assert_eq!(servers, vec![IpAddr::from([10, 96, 0, 10])]);
        assert_eq!(search, vec!["a.svc".to_string(), "b.local".to_string()]);
        assert_eq!(parse_resolv_conf("").0, vec![IpAddr::from([127, 0, 0, 1])]);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn resolves_through_hosts_then_a_dns_server() {
        let server = tokio::net::UdpSocket::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = server.local_addr().expect("addr").port();
        tokio::spawn(async move {
            let mut buf = [0u8; 512];
            loop {
                let Ok((n, from)) = server.recv_from(&mut buf).await else {
                    return;
                };
                let q = &buf[..n];
                let ips: Vec<IpAddr> = match (q.windows(3).any(|w| w == b"api"), u16_at(q, n - 4)) {
                    (true, Some(TYPE_A)) => vec![IpAddr::from([127, 0, 0, 2])],
                    _ => vec![],
                };
                let _ = server.send_to(&answer(q, &ips), from).await;
            }
        });
        let dir = std::env::temp_dir().join(format!("selfdestruct-resolve-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("hosts"), "10.9.9.9 pinned\n").expect("write");
        std::fs::write(
            dir.join("resolv.conf"),
            "nameserver 127.0.0.1\nsearch example.com\n",
        )
        .expect("write");
        let r = Resolver {
            hosts: dir.join("hosts"),
            resolv_conf: dir.join("resolv.conf"),
            port,
        };
        assert_eq!(
            r.lookup("pinned").await.expect("hosts"),
            vec![IpAddr::from([10, 9, 9, 9])]
        );
        assert_eq!(
            r.lookup("10.1.1.1").await.expect("literal"),
            vec![IpAddr::from([10, 1, 1, 1])]
        );
        assert_eq!(
            r.lookup("api.example.com.").await.expect("dns"),
            vec![IpAddr::from([127, 0, 0, 2])]
        );
        // A single label goes through the search domains first.
        assert_eq!(
            r.lookup("api").await.expect("search"),
            vec![IpAddr::from([127, 0, 0, 2])]
        );
        let e = r
            .lookup("nothing.example.com")
            .await
            .expect_err("no such host");
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}
