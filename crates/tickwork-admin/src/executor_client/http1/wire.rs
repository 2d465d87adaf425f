//! The bytes of HTTP/1.1 as the executor client writes and reads them: a call's URL split for
//! its request line and `Host` header, header values checked before they are written, an
//! answer's head (status, framing, whether the connection stays open) and a chunked body
//! decoded as it arrives. Plain functions, tested with tables.

use super::super::transport::{CallFailure, append_within, read_failed};

/// The most an answer's head (or one line of a chunked body) may take; an executor's is a few
/// lines.
pub(super) const HEAD_LIMIT: usize = 16 * 1024;
/// Most header lines read in an answer's head.
const HEADERS: usize = 32;

/// Where a URL sends a call: what to connect to, the `Host` header, the request target.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Target<'a> {
    pub(super) connect: String,
    pub(super) host: &'a str,
    pub(super) path: &'a str,
}

/// `http://host[:port][/path]` split for a call; `None` for any other form, and for a byte
/// that has no place in a request line or a header (a space, a control character), so that an
/// address cannot write headers of its own.
pub(super) fn target(url: &str) -> Option<Target<'_>> {
    let rest = url.strip_prefix("http://")?;
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    // User info is not sent on; the host is what follows it.
    let host = authority.rsplit('@').next().unwrap_or(authority);
    if host.is_empty() {
        return None;
    }
    let has_port = match host.rfind(']') {
        Some(end) => host[end..].contains(':'),
        None => host.contains(':'),
    };
    let connect = if has_port {
        host.to_owned()
    } else {
        format!("{host}:80")
    };
    Some(Target {
        connect,
        host,
        path,
    })
}

/// Whether a header's value can be written as it is: no line break or other control byte.
pub(super) fn header_value_ok(value: &str) -> bool {
    value
        .bytes()
        .all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

/// How an answer's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    Length(usize),
    Chunked,
    /// At the connection's end (no length, not chunked): the connection is not kept.
    Close,
}

/// An answer's head, as far as a call needs it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Head {
    pub(super) status: u16,
    pub(super) framing: Framing,
    pub(super) keep_alive: bool,
    /// Bytes of the buffer the head took.
    pub(super) len: usize,
}

/// Reads the answer's head at the start of `buf`: `Ok(None)` until it is whole. Informational
/// answers (`1xx`) before it are skipped by the caller, which drops their bytes.
pub(super) fn parse_head(buf: &[u8]) -> Result<Option<Head>, String> {
    let mut headers = [httparse::EMPTY_HEADER; HEADERS];
    let mut answer = httparse::Response::new(&mut headers);
    let len = match answer.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("unreadable answer head: {e}")),
    };
    let status = answer.code.unwrap_or(0);
    let mut keep_alive = answer.version == Some(1);
    let mut length = None;
    let mut chunked = false;
    for h in answer.headers.iter() {
        let value = std::str::from_utf8(h.value).map_err(|_| "a header not in UTF-8")?;
        if h.name.eq_ignore_ascii_case("content-length") {
            let n: usize = value
                .trim()
                .parse()
                .map_err(|_| format!("a content-length that is no number: {value}"))?;
            if length.is_some_and(|m| m != n) {
                return Err("two different content-lengths".to_owned());
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value
                .rsplit(',')
                .next()
                .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
        } else if h.name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case("keep-alive") {
                    keep_alive = true;
                }
            }
        }
    }
    let framing = if matches!(status, 204 | 304) {
        Framing::Length(0)
    } else if chunked {
        Framing::Chunked
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        keep_alive = false;
        Framing::Close
    };
    Ok(Some(Head {
        status,
        framing,
        keep_alive,
        len,
    }))
}

/// Where a chunked body's reading stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Chunk {
    /// At a chunk's size line.
    Size,
    /// Inside a chunk, with this many bytes of it to come.
    Data(usize),
    /// After a chunk's bytes, at the line break that ends it.
    DataEnd,
    /// After the last chunk, at the trailer's lines.
    Trailer,
}

/// Decodes a chunked body incrementally: each step reads what `buf` holds from `pos` on.
pub(super) struct Dechunk {
    pub(super) state: Chunk,
    pub(super) pos: usize,
}

impl Dechunk {
    /// Appends the body's bytes in `buf` to `out`; `Ok(true)` once the body ended (then `pos`
    /// is its end), `Ok(false)` when more is needed.
    pub(super) fn step(
        &mut self,
        buf: &[u8],
        out: &mut Vec<u8>,
        limit: usize,
    ) -> Result<bool, CallFailure> {
        let bad = |what: &str| read_failed(format!("bad chunked answer: {what}"));
        loop {
            match self.state {
                Chunk::Size | Chunk::Trailer => {
                    let Some(end) = find_crlf(&buf[self.pos..]) else {
                        return if buf.len() - self.pos > HEAD_LIMIT {
                            Err(bad("a line too long"))
                        } else {
                            Ok(false)
                        };
                    };
                    let line = &buf[self.pos..self.pos + end];
                    self.pos += end + 2;
                    if self.state == Chunk::Trailer {
                        if line.is_empty() {
                            return Ok(true);
                        }
                        continue;
                    }
                    let size = line.split(|&b| b == b';').next().unwrap_or_default();
                    let size = std::str::from_utf8(size)
                        .ok()
                        .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
                        .ok_or_else(|| bad("a chunk size that is no number"))?;
                    self.state = if size == 0 {
                        Chunk::Trailer
                    } else {
                        Chunk::Data(size)
                    };
                }
                Chunk::Data(left) => {
                    let here = left.min(buf.len() - self.pos);
                    if here == 0 {
                        return Ok(false);
                    }
                    append_within(out, &buf[self.pos..self.pos + here], limit)?;
                    self.pos += here;
                    self.state = if here == left {
                        Chunk::DataEnd
                    } else {
                        Chunk::Data(left - here)
                    };
                }
                Chunk::DataEnd => {
                    if buf.len() - self.pos < 2 {
                        return Ok(false);
                    }
                    if &buf[self.pos..self.pos + 2] != b"\r\n" {
                        return Err(bad("a chunk longer than its size"));
                    }
                    self.pos += 2;
                    self.state = Chunk::Size;
                }
            }
        }
    }
}

fn find_crlf(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).position(|w| w == b"\r\n")
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_what_to_connect_to_the_host_and_the_path() {
        // (url, connect, host, path); None: refused.
        for (url, want) in [
            ("http://h:9999/run", Some(("h:9999", "h:9999", "/run"))),
            ("http://h/ctx/beat", Some(("h:80", "h", "/ctx/beat"))),
            ("http://h:1", Some(("h:1", "h:1", "/"))),
            ("http://[::1]:9/run", Some(("[::1]:9", "[::1]:9", "/run"))),
            ("http://[::1]/run", Some(("[::1]:80", "[::1]", "/run"))),
            ("http://u:p@h:9/run", Some(("h:9", "h:9", "/run"))),
            ("https://h:9/run", None),
            ("http://", None),
            ("http://@/run", None),
            ("http://h:9/r un", None),
            ("http://h:9/run\r\nx-injected: 1", None),
            ("http://h:9/ré", None),
        ] {
            let got = target(url).map(|t| (t.connect, t.host, t.path));
            let want = want.map(|(c, h, p)| (c.to_owned(), h, p));
            assert_eq!(got, want, "{url:?}");
        }
    }

    #[test]
    fn header_values_with_a_line_break_are_not_written() {
        for (value, ok) in [
            ("tok-123", true),
            ("a b\tc", true),
            ("a\r\nx: y", false),
            ("a\nb", false),
            ("a\0b", false),
        ] {
            assert_eq!(header_value_ok(value), ok, "{value:?}");
        }
    }

    #[test]
    fn answer_heads_give_status_framing_and_keep_alive() {
        use Framing::*;
        // (head, status, framing, keep-alive)
        for (head, status, framing, keep) in [
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n",
                200,
                Length(12),
                true,
            ),
            (
                "HTTP/1.1 200 OK\r\ncontent-length: 3\r\nconnection: close\r\n\r\n",
                200,
                Length(3),
                false,
            ),
            (
                "HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\n",
                200,
                Length(3),
                false,
            ),
            (
                "HTTP/1.0 200 OK\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\n",
                200,
                Length(3),
                true,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                200,
                Chunked,
                true,
            ),
            ("HTTP/1.1 200 OK\r\n\r\n", 200, Close, false),
            ("HTTP/1.1 204 No Content\r\n\r\n", 204, Length(0), true),
            (
                "HTTP/1.1 302 Found\r\nLocation: x\r\n\r\n",
                302,
                Close,
                false,
            ),
        ] {
            let got = parse_head(head.as_bytes())
                .expect("readable")
                .expect("whole");
            assert_eq!(
                (got.status, got.framing, got.keep_alive, got.len),
                (status, framing, keep, head.len()),
                "{head:?}"
            );
        }
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Le"), Ok(None));
        for bad in [
            "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
            "SSH-2.0-OpenSSH\r\n\r\n",
        ] {
            assert!(parse_head(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    /// A chunked body decoded whole and fed in every split, so that a read that ends anywhere
    /// in it gives the same body.
    #[test]
    fn chunked_bodies_decode_however_they_arrive() {
        // (wire, body); None: refused.
        for (wire, want) in [
            ("5\r\nhello\r\n0\r\n\r\n", Some("hello")),
            (
                "2;ext=1\r\nhe\r\n3\r\nllo\r\n0\r\nx-trailer: 1\r\n\r\n",
                Some("hello"),
            ),
            ("0\r\n\r\n", Some("")),
            ("A\r\n0123456789\r\n0\r\n\r\n", Some("0123456789")),
            ("zz\r\nhello\r\n0\r\n\r\n", None),
            ("2\r\nhello\r\n0\r\n\r\n", None),
        ] {
            let wire = wire.as_bytes();
            for split in 0..=wire.len() {
                let mut dechunk = Dechunk {
                    state: Chunk::Size,
                    pos: 0,
                };
                let mut body = Vec::new();
                let first = dechunk.step(&wire[..split], &mut body, 1024);
                let got = match first {
                    Ok(true) => Ok(true),
                    Ok(false) => dechunk.step(wire, &mut body, 1024),
                    Err(e) => Err(e),
                };
                match want {
                    Some(text) => {
                        assert!(matches!(got, Ok(true)), "{wire:?} split at {split}");
                        assert_eq!(body, text.as_bytes(), "{wire:?} split at {split}");
                        assert_eq!(dechunk.pos, wire.len(), "{wire:?} split at {split}");
                    }
                    None => assert!(got.is_err(), "{wire:?} split at {split}"),
                }
            }
        }
        // The limit holds for a chunked body as for any other.
        let mut dechunk = Dechunk {
            state: Chunk::Size,
            pos: 0,
        };
        let got = dechunk.step(b"5\r\nhello\r\n0\r\n\r\n", &mut Vec::new(), 4);
        assert!(matches!(got, Err(CallFailure::TooLarge)));
    }
}
