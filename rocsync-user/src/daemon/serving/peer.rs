//! Who is at the other end of a TCP connection, for its limits: a local peer by the uid
//! owning its socket, from whichever of the node's addresses it connects (told by the
//! node's own address instead, every local user shared one share there, and each address
//! gave a user another), another by its address.
//!
//! The socket is looked up by its four-tuple through `NETLINK_SOCK_DIAG` (the kernel's
//! exact lookup, as `ss` uses it): one socket found in the connection hash, whatever
//! the node holds. Reading `/proc/net/tcp` instead formats every socket of the network
//! namespace: under a flood of connections (thousands in `TIME_WAIT`) that was 70 % of
//! the daemon's CPU and held `/metrics` for seconds (`cargo xtask bench-soak`). The
//! table stays as the fallback of a kernel without `inet_diag`.

use std::{
    fmt,
    net::{IpAddr, SocketAddr},
    time::Duration,
};

use rustix::net::{
    AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType, netlink, sockopt::Timeout,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Peer {
    Uid(u32),
    Addr(IpAddr),
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::Uid(u) => write!(f, "uid {u}"),
            Peer::Addr(a) => write!(f, "{a}"),
        }
    }
}

impl Peer {
    /// The peer of a connection from `peer` to `local`.
    pub(crate) fn of(peer: SocketAddr, local: SocketAddr) -> Self {
        // A listener on `[::]` sees IPv4 peers as `::ffff:a.b.c.d`; their sockets are
        // IPv4 ones.
        let (peer, local) = (canonical(peer), canonical(local));
        // A peer off the node has no socket here: one lookup finds none.
        if let Some(uid) = socket_uid(peer, local) {
            return Peer::Uid(uid);
        }
        Peer::Addr(peer.ip())
    }
}

/// An IPv6 address keeps its scope: a link-local peer's socket is found on its interface
/// only.
fn canonical(a: SocketAddr) -> SocketAddr {
    match a.ip().to_canonical() {
        IpAddr::V4(v4) => SocketAddr::new(IpAddr::V4(v4), a.port()),
        IpAddr::V6(_) => a,
    }
}

/// The uid owning the local socket bound at `peer` and connected to `local`. A socket
/// its owner closed (orphaned, or in `TIME_WAIT`) has no inode: its request is no one's
/// known, never root's.
fn socket_uid(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    match diag::lookup(peer, local) {
        Ok(found) => found.filter(|s| s.inode != 0).map(|s| s.uid),
        Err(_) => table::socket_uid(peer, local),
    }
}

/// The exact lookup: one `SOCK_DIAG_BY_FAMILY` request without `NLM_F_DUMP`.
mod diag {
    use super::*;

    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const NLM_F_REQUEST: u16 = 1;
    const NLMSG_ERROR: u16 = 2;
    const NLMSG_HDRLEN: usize = 16;
    /// `struct inet_diag_req_v2`: family, protocol, ext, pad, states, then the socket id.
    const REQ_LEN: usize = 8 + SOCKID_LEN;
    /// `struct inet_diag_sockid`: ports, addresses, interface, cookie.
    const SOCKID_LEN: usize = 2 + 2 + 16 + 16 + 4 + 8;
    /// `struct inet_diag_msg`: family, state, timer, retrans, the id, expires, rqueue,
    /// wqueue, uid, inode.
    const UID_AT: usize = 4 + SOCKID_LEN + 12;

    pub(super) struct Found {
        pub uid: u32,
        pub inode: u32,
    }

    /// `Ok(None)`: no such socket. `Err`: the kernel cannot answer (no `inet_diag`).
    pub(super) fn lookup(src: SocketAddr, dst: SocketAddr) -> std::io::Result<Option<Found>> {
        let fd = rustix::net::socket_with(
            AddressFamily::NETLINK,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC,
            Some(netlink::SOCK_DIAG),
        )?;
        // The kernel answers within the send; the timeout only bounds a surprise.
        rustix::net::sockopt::set_socket_timeout(&fd, Timeout::Recv, Some(Duration::from_secs(1)))?;
        rustix::net::send(&fd, &request(src, dst), SendFlags::empty())?;
        let mut buf = [0u8; 512];
        let (n, _) = rustix::net::recv(&fd, &mut buf, RecvFlags::empty())?;
        reply(&buf[..n])
    }

    fn request(src: SocketAddr, dst: SocketAddr) -> Vec<u8> {
        let len = NLMSG_HDRLEN + REQ_LEN;
        let mut m = Vec::with_capacity(len);
        m.extend((len as u32).to_ne_bytes());
        m.extend(SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        m.extend(NLM_F_REQUEST.to_ne_bytes());
        m.extend([0u8; 8]); // sequence, port id
        let family = match src {
            SocketAddr::V4(_) => libc::AF_INET,
            SocketAddr::V6(_) => libc::AF_INET6,
        };
        m.extend([family as u8, libc::IPPROTO_TCP as u8, 0, 0]);
        m.extend(u32::MAX.to_ne_bytes()); // any state
        m.extend(src.port().to_be_bytes());
        m.extend(dst.port().to_be_bytes());
        m.extend(address(src.ip()));
        m.extend(address(dst.ip()));
        // Any interface, but a link-local peer's own (its socket is bound to it).
        let interface = match src {
            SocketAddr::V6(v6) => v6.scope_id(),
            SocketAddr::V4(_) => 0,
        };
        m.extend(interface.to_ne_bytes());
        m.extend([0xff; 8]); // INET_DIAG_NOCOOKIE
        m
    }

    /// An address as the socket id holds it: network order, IPv4 in the first word.
    fn address(ip: IpAddr) -> [u8; 16] {
        let mut a = [0u8; 16];
        match ip {
            IpAddr::V4(v4) => a[..4].copy_from_slice(&v4.octets()),
            IpAddr::V6(v6) => a = v6.octets(),
        }
        a
    }

    fn reply(m: &[u8]) -> std::io::Result<Option<Found>> {
        let word = |at: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(m.get(at..at + 4)?.try_into().ok()?))
        };
        let short = || std::io::Error::other("short sock_diag reply");
        let kind = m
            .get(4..6)
            .map(|b| u16::from_ne_bytes([b[0], b[1]]))
            .ok_or_else(short)?;
        if kind == NLMSG_ERROR {
            let errno = word(NLMSG_HDRLEN).ok_or_else(short)? as i32;
            return match -errno {
                libc::ENOENT => Ok(None),
                e => Err(std::io::Error::from_raw_os_error(e)),
            };
        }
        if kind != SOCK_DIAG_BY_FAMILY {
            return Err(std::io::Error::other(format!(
                "sock_diag reply of type {kind}"
            )));
        }
        let at = NLMSG_HDRLEN + UID_AT;
        let (uid, inode) = (word(at).ok_or_else(short)?, word(at + 4).ok_or_else(short)?);
        Ok(Some(Found { uid, inode }))
    }
}

/// `/proc/net/tcp{,6}`, the kernel's table of this network namespace, read whole.
mod table {
    use super::*;

    pub(super) fn socket_uid(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
        let (table, peer_hex, local_hex) = match (peer, local) {
            (SocketAddr::V4(p), SocketAddr::V4(l)) => ("/proc/net/tcp", hex_v4(p), hex_v4(l)),
            (SocketAddr::V6(p), SocketAddr::V6(l)) => ("/proc/net/tcp6", hex_v6(p), hex_v6(l)),
            _ => return None,
        };
        // The table is read a page at a time and sockets come and go meanwhile, so a row
        // can be passed over: read again before giving up.
        (0..3).find_map(|_| {
            let text = std::fs::read_to_string(table).ok()?;
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode …
            text.lines().skip(1).find_map(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                (f.len() > 9 && f[1] == peer_hex && f[2] == local_hex && f[9] != "0")
                    .then(|| f[7].parse().ok())
                    .flatten()
            })
        })
    }

    /// An address as the table writes it: the address's 32-bit words in host order,
    /// then the port.
    fn hex_v4(a: std::net::SocketAddrV4) -> String {
        let word = u32::from_ne_bytes(a.ip().octets());
        format!("{word:08X}:{:04X}", a.port())
    }

    fn hex_v6(a: std::net::SocketAddrV6) -> String {
        let words: String = a
            .ip()
            .octets()
            .chunks(4)
            .map(|w| format!("{:08X}", u32::from_ne_bytes([w[0], w[1], w[2], w[3]])))
            .collect();
        format!("{words}:{:04X}", a.port())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Peers as the exact lookup and as the table see them, which must agree.
    fn both(peer: SocketAddr, local: SocketAddr) -> (Option<u32>, Option<u32>) {
        let (peer, local) = (canonical(peer), canonical(local));
        let diag = diag::lookup(peer, local)
            .expect("sock_diag answers")
            .filter(|s| s.inode != 0)
            .map(|s| s.uid);
        (diag, table::socket_uid(peer, local))
    }

    #[test]
    fn a_local_peer_is_known_by_its_uid() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, peer) = l.accept().unwrap();
        let uid = rustix::process::getuid().as_raw();
        let local = s.local_addr().unwrap();
        assert_eq!(Peer::of(peer, local), Peer::Uid(uid));
        assert_eq!(both(peer, local), (Some(uid), Some(uid)));
        assert!(
            diag::lookup(peer, "127.0.0.1:1".parse().unwrap())
                .unwrap()
                .is_none()
        );
        // Closed by its owner before the daemon looked (a request sent, then the client
        // gone, while the daemon's loop was held up): no inode. (A child another test
        // forks holds a copy of the socket until it execs: looked at again meanwhile.)
        drop(c);
        let closed = (0..100).any(|_| {
            let p = Peer::of(peer, local);
            p == Peer::Addr(peer.ip()) || {
                std::thread::sleep(std::time::Duration::from_millis(10));
                false
            }
        });
        assert!(closed, "{:?}", Peer::of(peer, local));
        assert_eq!(both(peer, local), (None, None));
        let Ok(l) = std::net::TcpListener::bind("[::]:0") else {
            return; // no IPv6 here
        };
        let port = l.local_addr().unwrap().port();
        let _c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (s, peer) = l.accept().unwrap();
        assert_eq!(Peer::of(peer, s.local_addr().unwrap()), Peer::Uid(uid));
        let _c6 = std::net::TcpStream::connect(("::1", port)).unwrap();
        let (s, peer) = l.accept().unwrap();
        assert_eq!(both(peer, s.local_addr().unwrap()), (Some(uid), Some(uid)));
    }

    /// A local peer is its uid from whichever address of the node it connects, a
    /// link-local one included (its socket is found on its interface): told by its
    /// address, every user on the node shared one share per address (issue 60).
    #[test]
    fn a_local_peer_is_known_by_its_uid_from_every_address_of_the_node() {
        let out = std::process::Command::new("ip")
            .args(["-o", "addr", "show"])
            .output()
            .unwrap();
        let uid = rustix::process::getuid().as_raw();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(dev), Some(cidr)) = (f.get(1), f.get(3)) else {
                continue;
            };
            let Some(Ok(ip)) = cidr.split('/').next().map(str::parse::<IpAddr>) else {
                continue;
            };
            let at = match ip {
                IpAddr::V4(v4) => SocketAddr::from((v4, 0)),
                IpAddr::V6(v6) => {
                    let scope = match v6.is_unicast_link_local() {
                        true => {
                            let name = std::ffi::CString::new(*dev).unwrap();
                            // SAFETY: `name` is a NUL-terminated string that outlives the call.
                            unsafe { libc::if_nametoindex(name.as_ptr()) }
                        }
                        false => 0,
                    };
                    SocketAddr::V6(std::net::SocketAddrV6::new(v6, 0, 0, scope))
                }
            };
            // An address this test cannot listen on (a veth named `eth0@if5`) is passed.
            let Ok(l) = std::net::TcpListener::bind(at) else {
                continue;
            };
            let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (s, peer) = l.accept().unwrap();
            let local = s.local_addr().unwrap();
            assert_eq!(Peer::of(peer, local), Peer::Uid(uid), "from {peer}");
        }
    }
}
