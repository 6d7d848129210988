//! A tiny blocking HTTP/1.1 client for tests (one connection per request,
//! chunked decoding, incremental watch reading). Not a Kubernetes client: it is
//! here so tests can poke the fake without pulling in one.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A complete response.
#[derive(Clone, Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers (names lowercased).
    pub headers: Vec<(String, String)>,
    /// Body (de-chunked).
    pub body: Vec<u8>,
}

impl Response {
    /// Body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// Body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A header value (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Client for one server and token.
#[derive(Clone, Debug)]
pub struct Client {
    addr: SocketAddr,
    token: Option<String>,
    timeout: Duration,
    accept: String,
}

struct Head {
    status: u16,
    headers: Vec<(String, String)>,
}

/// Reads bytes from a socket into a buffer, and parses the head and chunks.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    eof: bool,
}

impl Conn {
    /// Reads more bytes; false at EOF.
    fn fill(&mut self) -> io::Result<bool> {
        let mut tmp = [0u8; 16 * 1024];
        let n = self.stream.read(&mut tmp)?;
        if n == 0 {
            self.eof = true;
            return Ok(false);
        }
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(true)
    }

    fn find(&self, pat: &[u8]) -> Option<usize> {
        self.buf.windows(pat.len()).position(|w| w == pat)
    }

    fn read_head(&mut self) -> io::Result<Head> {
        let end = loop {
            if let Some(i) = self.find(b"\r\n\r\n") {
                break i;
            }
            if !self.fill()? {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed before response head",
                ));
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        self.buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad status line"))?;
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Ok(Head { status, headers })
    }

    /// Next chunk of a chunked body: `Some(data)`, or `None` after the last chunk.
    fn read_chunk(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            if let Some(i) = self.find(b"\r\n") {
                let size_line = String::from_utf8_lossy(&self.buf[..i]).into_owned();
                let size =
                    usize::from_str_radix(size_line.split(';').next().unwrap_or("").trim(), 16)
                        .map_err(|_| {
                            io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!("bad chunk size {size_line:?}"),
                            )
                        })?;
                if self.buf.len() >= i + 2 + size + 2 {
                    let data = self.buf[i + 2..i + 2 + size].to_vec();
                    self.buf.drain(..i + 2 + size + 2);
                    return Ok((size > 0).then_some(data));
                }
            }
            if !self.fill()? {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed in the middle of a chunked body",
                ));
            }
        }
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

impl Client {
    /// A client for `addr`, sending `Authorization: Bearer token` when given.
    pub fn new(addr: SocketAddr, token: Option<&str>) -> Self {
        Self {
            addr,
            token: token.map(str::to_string),
            timeout: Duration::from_secs(10),
            accept: "application/json".to_string(),
        }
    }

    /// The `Accept` header (default `application/json`), e.g. kube's
    /// `application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`.
    pub fn with_accept(mut self, accept: &str) -> Self {
        accept.clone_into(&mut self.accept);
        self
    }

    /// Read timeout for plain requests.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    fn send(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<&[u8]>,
    ) -> io::Result<Conn> {
        let mut stream = TcpStream::connect_timeout(&self.addr, self.timeout)?;
        stream.set_read_timeout(Some(self.timeout))?;
        stream.set_nodelay(true)?;
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAccept: {}\r\nConnection: close\r\n",
            self.addr, self.accept
        );
        if let Some(t) = &self.token {
            req.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        if let Some(ct) = content_type {
            req.push_str(&format!("Content-Type: {ct}\r\n"));
        }
        let body = body.unwrap_or(&[]);
        req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        stream.write_all(req.as_bytes())?;
        stream.write_all(body)?;
        Ok(Conn {
            stream,
            buf: Vec::new(),
            eof: false,
        })
    }

    /// Any request; the whole response is read.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<&[u8]>,
    ) -> io::Result<Response> {
        let mut conn = self.send(method, path, content_type, body)?;
        let head = conn.read_head()?;
        let mut out = Vec::new();
        if header(&head.headers, "transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
        {
            while let Some(data) = conn.read_chunk()? {
                out.extend_from_slice(&data);
            }
        } else if let Some(len) =
            header(&head.headers, "content-length").and_then(|v| v.parse::<usize>().ok())
        {
            while conn.buf.len() < len {
                if !conn.fill()? {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "body shorter than Content-Length",
                    ));
                }
            }
            out = conn.buf[..len].to_vec();
        } else {
            while conn.fill()? {}
            out = std::mem::take(&mut conn.buf);
        }
        Ok(Response {
            status: head.status,
            headers: head.headers,
            body: out,
        })
    }

    /// GET.
    pub fn get(&self, path: &str) -> io::Result<Response> {
        self.request("GET", path, None, None)
    }

    /// POST a JSON body.
    pub fn post(&self, path: &str, body: &Value) -> io::Result<Response> {
        self.request(
            "POST",
            path,
            Some("application/json"),
            Some(body.to_string().as_bytes()),
        )
    }

    /// DELETE with an optional DeleteOptions body.
    pub fn delete(&self, path: &str, body: Option<&Value>) -> io::Result<Response> {
        let body = body.map(Value::to_string);
        self.request(
            "DELETE",
            path,
            body.as_ref().map(|_| "application/json"),
            body.as_deref().map(str::as_bytes),
        )
    }

    /// PATCH with a content type (`application/json-patch+json`...).
    pub fn patch(&self, path: &str, content_type: &str, body: &Value) -> io::Result<Response> {
        self.request(
            "PATCH",
            path,
            Some(content_type),
            Some(body.to_string().as_bytes()),
        )
    }

    /// Starts a watch (`path` must include `watch=true`).
    pub fn watch(&self, path: &str) -> io::Result<WatchStream> {
        let mut conn = self.send("GET", path, None, None)?;
        let head = conn.read_head()?;
        let chunked = header(&head.headers, "transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
        Ok(WatchStream {
            status: head.status,
            conn,
            chunked,
            pending: Vec::new(),
            done: false,
        })
    }
}

/// An open watch.
pub struct WatchStream {
    status: u16,
    conn: Conn,
    chunked: bool,
    pending: Vec<u8>,
    done: bool,
}

impl WatchStream {
    /// HTTP status of the watch request.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The next event, `Ok(None)` when the server ended the stream cleanly,
    /// `Err(TimedOut)` when nothing arrived within `timeout`, another error when
    /// the connection broke (e.g. [`crate::FakeCluster::drop_watches`]).
    pub fn next_event(&mut self, timeout: Duration) -> io::Result<Option<Value>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(i) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=i).collect();
                let v = serde_json::from_slice(&line).map_err(|e| {
                    io::Error::new(io::ErrorKind::InvalidData, format!("bad event line: {e}"))
                })?;
                return Ok(Some(v));
            }
            if self.done {
                if self.pending.is_empty() {
                    return Ok(None);
                }
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "stream ended mid-line",
                ));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no watch event in time",
                ));
            }
            self.conn.stream.set_read_timeout(Some(left))?;
            if self.chunked {
                // Consume whatever complete chunks are buffered, else read more.
                match self.conn.read_chunk() {
                    Ok(Some(data)) => self.pending.extend_from_slice(&data),
                    Ok(None) => self.done = true,
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) =>
                    {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "no watch event in time",
                        ));
                    }
                    Err(e) => return Err(e),
                }
            } else {
                self.pending.append(&mut self.conn.buf);
                match self.conn.fill() {
                    Ok(true) => self.pending.append(&mut self.conn.buf),
                    Ok(false) => self.done = true,
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) =>
                    {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "no watch event in time",
                        ));
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }

    /// Collects events until the stream ends or `timeout` passes.
    pub fn collect_until_end(&mut self, timeout: Duration) -> io::Result<Vec<Value>> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_event(left)? {
                Some(v) => out.push(v),
                None => return Ok(out),
            }
        }
    }
}
