//! The wire probe (`--wire-probe`): a pass-through TCP proxy in front of the executor child's
//! server, registered as the executor's address, that notes when each `/run` body (its `logId`)
//! comes off the admin's socket. It splits the lateness into the admin's part (scheduled
//! instant to bytes on the wire) and the executor's part (bytes to handler), at the price of
//! one more loopback hop.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// `logId` -> when its `/run` body was read from the admin, epoch µs.
pub(super) type WireTimes = Arc<Mutex<HashMap<i64, i64>>>;

const PATTERN: &[u8] = b"\"logId\":";
/// Bytes kept between reads: a pattern and its digits may be split by a read.
const TAIL: usize = 40;

/// Forwards every connection on `listener` to `upstream`, noting `logId`s as they pass.
pub(super) fn start(listener: TcpListener, upstream: SocketAddr, times: WireTimes) {
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let times = Arc::clone(&times);
            tokio::spawn(async move {
                let _ = forward(inbound, upstream, times).await;
            });
        }
    });
}

async fn forward(
    inbound: TcpStream,
    upstream: SocketAddr,
    times: WireTimes,
) -> std::io::Result<()> {
    let outbound = TcpStream::connect(upstream).await?;
    inbound.set_nodelay(true)?;
    outbound.set_nodelay(true)?;
    let (mut in_read, mut in_write) = inbound.into_split();
    let (mut out_read, mut out_write) = outbound.into_split();
    // Answers go back untouched.
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut out_read, &mut in_write).await;
        let _ = in_write.shutdown().await;
    });
    let mut buf = vec![0u8; 64 * 1024];
    let mut pending: Vec<u8> = Vec::with_capacity(2 * TAIL);
    loop {
        let n = in_read.read(&mut buf).await?;
        if n == 0 {
            return out_write.shutdown().await;
        }
        let at = super::child::now_us();
        out_write.write_all(&buf[..n]).await?;
        pending.extend_from_slice(&buf[..n]);
        let (ids, consumed) = scan(&pending);
        if !ids.is_empty() {
            let mut t = times.lock().expect("wire times lock");
            for id in ids {
                t.entry(id).or_insert(at);
            }
        }
        let keep_from = consumed.max(pending.len().saturating_sub(TAIL));
        pending.drain(..keep_from);
    }
}

/// The complete `"logId":<digits>` values in `buf`, and how far they reach.
fn scan(buf: &[u8]) -> (Vec<i64>, usize) {
    let mut ids = Vec::new();
    let mut consumed = 0;
    let mut i = 0;
    while let Some(pos) = find(&buf[i..], PATTERN) {
        let start = i + pos + PATTERN.len();
        let digits = buf[start..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        // Digits running to the end may continue in the next read.
        if digits == 0 || start + digits == buf.len() {
            break;
        }
        if let Some(id) = std::str::from_utf8(&buf[start..start + digits])
            .ok()
            .and_then(|s| s.parse().ok())
        {
            ids.push(id);
        }
        consumed = start + digits;
        i = consumed;
    }
    (ids, consumed)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::scan;

    #[test]
    fn finds_complete_ids_only() {
        let (ids, used) = scan(br#"{"jobId":1,"logId":42,"x":1}{"logId":7"#);
        assert_eq!(ids, [42]);
        assert_eq!(
            &br#"{"jobId":1,"logId":42,"x":1}{"logId":7"#[used..],
            br#","x":1}{"logId":7"#
        );
        let (ids, _) = scan(br#""logId":7}"#);
        assert_eq!(ids, [7]);
    }
}
