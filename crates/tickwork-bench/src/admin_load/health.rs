//! The admin's health endpoints probed as an orchestrator probes them: `/healthz` and
//! `/readyz` every 100 ms, each on a new connection, from a thread of its own (the bench's
//! runtime is busy receiving runs, and its delays must not count as the admin's).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::now_ms;
use super::stats::Spread;

/// Time between two probes of one endpoint.
const EVERY: Duration = Duration::from_millis(100);
/// A probe without a whole answer by then failed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The answer time the overload target allows.
pub(super) const SLOW_MS: i64 = 100;

/// The endpoints probed, in turn.
const PATHS: [&str; 2] = ["/healthz", "/readyz"];

/// One probe: when it was sent, and how long the answer took (`None`: no `200` within
/// [`PROBE_TIMEOUT`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Probe {
    pub path: &'static str,
    pub at_ms: i64,
    pub took_us: Option<i64>,
}

/// The running prober.
pub(super) struct HealthProbe {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<Probe>>,
}

impl HealthProbe {
    /// Starts probing the admin at `addr`.
    pub(super) fn start(addr: SocketAddr) -> HealthProbe {
        let stop = Arc::new(AtomicBool::new(false));
        let halt = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut probes = Vec::new();
            let mut next = Instant::now();
            while !halt.load(Ordering::Relaxed) {
                for path in PATHS {
                    let at_ms = now_ms();
                    let t = Instant::now();
                    let took_us = probe(addr, path)
                        .ok()
                        .filter(|&ok| ok)
                        .map(|_| t.elapsed().as_micros() as i64);
                    probes.push(Probe {
                        path,
                        at_ms,
                        took_us,
                    });
                }
                next += EVERY;
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                } else {
                    next = now;
                }
            }
            probes
        });
        HealthProbe { stop, thread }
    }

    /// Stops probing; every probe made.
    pub(super) fn finish(self) -> Vec<Probe> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// `GET path` on a new connection; whether the answer was `200`.
fn probe(addr: SocketAddr, path: &str) -> std::io::Result<bool> {
    let mut s = TcpStream::connect_timeout(&addr, PROBE_TIMEOUT)?;
    s.set_read_timeout(Some(PROBE_TIMEOUT))?;
    s.set_write_timeout(Some(PROBE_TIMEOUT))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = Vec::with_capacity(256);
    s.read_to_end(&mut answer)?;
    Ok(answer.starts_with(b"HTTP/1.1 200"))
}

/// The probes of one endpoint sent in `[from_ms, to_ms)`.
#[derive(Debug, Clone)]
pub(super) struct HealthFigures {
    pub probes: usize,
    pub failed: usize,
    /// Answered probes slower than [`SLOW_MS`].
    pub slow: usize,
    /// Answer times of the answered probes, µs.
    pub took: Option<Spread>,
}

impl HealthFigures {
    pub(super) fn of(probes: &[Probe], path: &str, from_ms: i64, to_ms: i64) -> HealthFigures {
        let sent: Vec<&Probe> = probes
            .iter()
            .filter(|p| p.path == path && p.at_ms >= from_ms && p.at_ms < to_ms)
            .collect();
        let took: Vec<i64> = sent.iter().filter_map(|p| p.took_us).collect();
        HealthFigures {
            probes: sent.len(),
            failed: sent.len() - took.len(),
            slow: took.iter().filter(|&&us| us > SLOW_MS * 1000).count(),
            took: Spread::of(took),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_count_only_the_endpoint_and_span_asked() {
        let p = |path, at_ms, took_us| Probe {
            path,
            at_ms,
            took_us,
        };
        let probes = [
            p("/healthz", 999, Some(1_000_000)),
            p("/healthz", 1000, Some(2_000)),
            p("/healthz", 1100, Some(150_000)),
            p("/healthz", 1200, None),
            p("/readyz", 1100, Some(900_000)),
            p("/healthz", 2000, Some(1)),
        ];
        let f = HealthFigures::of(&probes, "/healthz", 1000, 2000);
        assert_eq!((f.probes, f.failed, f.slow), (3, 1, 1));
        let took = f.took.unwrap();
        assert_eq!((took.count, took.max), (2, 150_000));
    }
}
