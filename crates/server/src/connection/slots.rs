//! Open connections per client address (an IPv4 address, or an IPv6 /64).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, PoisonError};

/// Open connections per client address.
#[derive(Debug, Default)]
pub struct ClientSlots {
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One open connection, counted until dropped.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<ClientSlots>,
    ip: IpAddr,
}

/// The key a client's connections are counted under: its IPv4 address
/// (IPv4-mapped IPv6 included), or the /64 of its IPv6 address. One IPv6
/// host is normally given a whole /64 and may pick any address in it, so
/// counting exact addresses would leave it uncapped.
pub fn client_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !(u128::from(u64::MAX)))),
        v4 => v4,
    }
}

impl ClientSlots {
    /// A slot for `ip`'s client (see [`client_key`]), unless it already
    /// has `max` connections open.
    pub fn acquire(self: &Arc<Self>, ip: IpAddr, max: usize) -> Option<Slot> {
        let ip = client_key(ip);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let n = open.entry(ip).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(Slot {
            slots: self.clone(),
            ip,
        })
    }

    /// Open connections from `ip`.
    pub fn count(&self, ip: IpAddr) -> usize {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(&client_key(ip)).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self
            .slots
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}
