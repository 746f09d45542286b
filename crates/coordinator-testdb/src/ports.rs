//! Free loopback ports for a child process to listen on (a `serve` whose
//! runtime.yaml wants a real port): bound, then released for the child.
//!
//! They are taken below Linux's ephemeral range (32768–60999): a port the
//! kernel hands out for `:0` comes from that range, where an outgoing
//! connection (the coordinator opens one per product operation) may hold it
//! as its local end by the time the child binds it, which then fails with
//! "address already in use". Ports are tried in an order spread by process
//! id and a counter, so concurrent tests rarely try the same one.

use std::net::TcpListener;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};

/// Where ports are taken from.
const PORTS: Range<u32> = 20_000..32_000;
/// The step between ports tried (prime to the range's length: every port is tried once).
const STRIDE: u32 = 101;

/// `N` distinct free loopback ports, all bound at once and then released.
pub fn free_ports<const N: usize>() -> std::io::Result<[u16; N]> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let span = PORTS.end - PORTS.start;
    let seed = std::process::id().wrapping_mul(7_919);
    let mut held: Vec<TcpListener> = Vec::with_capacity(N);
    for _ in 0..span {
        if held.len() == N {
            break;
        }
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let Ok(port) = u16::try_from(PORTS.start + seed.wrapping_add(n.wrapping_mul(STRIDE)) % span) else { continue };
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) {
            held.push(listener);
        }
    }
    let mut ports = [0; N];
    for (port, listener) in ports.iter_mut().zip(&held) {
        *port = listener.local_addr()?.port();
    }
    if held.len() < N {
        let what = format!("no {N} free loopback ports in {PORTS:?}");
        return Err(std::io::Error::new(std::io::ErrorKind::AddrNotAvailable, what));
    }
    Ok(ports)
}

/// One free loopback port ([`free_ports`]).
pub fn free_port() -> std::io::Result<u16> {
    free_ports::<1>().map(|[port]| port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_bindable_and_below_the_ephemeral_range() {
        let ports = free_ports::<3>().unwrap_or_else(|e| panic!("{e}"));
        assert!(ports.iter().all(|p| PORTS.contains(&u32::from(*p))), "{ports:?}");
        assert!(ports[0] != ports[1] && ports[1] != ports[2] && ports[0] != ports[2], "{ports:?}");
        let again = free_port().unwrap_or_else(|e| panic!("{e}"));
        assert!(!ports.contains(&again), "the next call moves on: {again} in {ports:?}");
        let listener = TcpListener::bind(("127.0.0.1", ports[0])).unwrap_or_else(|e| panic!("released: {e}"));
        drop(listener);
    }
}
