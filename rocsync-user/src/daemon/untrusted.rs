//! What a peer sends, as the daemon logs and bounds it. Any local user can reach the
//! dynolog port (it has no authentication), and any can name an executable: what they
//! control is escaped and shortened before it reaches root's log, so it can neither
//! forge lines (`\r`, `\n`), colour the terminal (`\e[31m`) nor fill the disk.

use anyhow::{Result, bail};
use std::{
    fmt,
    net::{IpAddr, SocketAddr},
};

/// The longest text of a peer's a log line carries.
const SHOWN_CHARS: usize = 200;
/// Pids a log line names; the rest are counted.
const SHOWN_PIDS: usize = 8;

/// Whether `c` must be escaped where a peer's text is shown: control characters, and the
/// invisible ones that reorder or hide what surrounds them (bidirectional overrides and
/// isolates, zero-width characters, line and paragraph separators): "Trojan source".
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2069}'
                | '\u{FEFF}'
                | '\u{061C}'
                | '\u{180E}')
}

/// `text` for a log line: control and invisible characters escaped (`\u{1b}`, `\r`,
/// `\u{202e}`), at most [`SHOWN_CHARS`] characters, the rest counted.
pub(crate) fn shown(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    for c in chars.by_ref().take(SHOWN_CHARS) {
        if hidden(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    let rest = chars.count();
    if rest > 0 {
        out.push_str(&format!("… ({rest} more characters)"));
    }
    out
}

/// `text` with its control and invisible characters escaped, whole: what a client prints
/// of the daemon's answer (an executable's name is its owner's to choose).
pub(crate) fn escaped(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let esc = hidden(c).then(|| c.escape_default());
            let plain = (!hidden(c)).then_some(c);
            esc.into_iter().flatten().chain(plain)
        })
        .collect()
}

/// A pid list for a log line or a session's name: `[1, 2]`, or its first
/// [`SHOWN_PIDS`] and a count.
pub(crate) fn pids_shown(pids: &[u32]) -> String {
    if pids.len() <= SHOWN_PIDS {
        return format!("{pids:?}");
    }
    let first: Vec<String> = pids[..SHOWN_PIDS].iter().map(u32::to_string).collect();
    format!("[{}, … ({} pids)]", first.join(", "), pids.len())
}

/// Who sent a dynolog request, for its limits: a local peer by the uid owning its socket
/// (everyone on the node connects from 127.0.0.1), another by its address.
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
        if peer.ip().is_loopback()
            && let Some(uid) = socket_uid(peer, local)
        {
            return Peer::Uid(uid);
        }
        Peer::Addr(peer.ip())
    }
}

fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// The uid owning the local socket bound at `peer` and connected to `local`, from
/// `/proc/net/tcp{,6}` (the kernel's table of this network namespace).
fn socket_uid(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    let (table, peer_hex, local_hex) = match (peer, local) {
        (SocketAddr::V4(p), SocketAddr::V4(l)) => ("/proc/net/tcp", hex_v4(p), hex_v4(l)),
        (SocketAddr::V6(p), SocketAddr::V6(l)) => ("/proc/net/tcp6", hex_v6(p), hex_v6(l)),
        _ => return None,
    };
    // The table is read a page at a time and sockets come and go meanwhile, so a row can
    // be passed over (seen in CI: a root scrape taken for the address's peer, whose slots
    // another user's idle connections held, and closed). The row exists for as long as
    // the connection does: read again before giving up.
    (0..3).find_map(|_| {
        let text = std::fs::read_to_string(table).ok()?;
        // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode …
        // A socket its owner closed (orphaned, or in TIME_WAIT) has no inode and says uid
        // 0: its request is no one's known, never root's.
        text.lines().skip(1).find_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            (f.len() > 9 && f[1] == peer_hex && f[2] == local_hex && f[9] != "0")
                .then(|| f[7].parse().ok())
                .flatten()
        })
    })
}

/// An address as `/proc/net/tcp` writes it: the address's 32-bit words in host order,
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

/// Pods for an error message: at most [`SHOWN_PODS`], the rest counted.
pub(crate) fn pods_shown(known: &[String]) -> String {
    const SHOWN_PODS: usize = 20;
    if known.is_empty() {
        return "none".into();
    }
    let mut shown = known[..known.len().min(SHOWN_PODS)].join(", ");
    if known.len() > SHOWN_PODS {
        shown.push_str(&format!(" and {} more", known.len() - SHOWN_PODS));
    }
    shown
}

/// A file name stem from a client: letters, digits, `-` and `_` only.
pub(crate) fn stem(name: Option<&str>) -> Result<String> {
    let name = name.unwrap_or("trace");
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        bail!("trace name {name:?}: use 1 to 64 letters, digits, '-' or '_'");
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_long_text_cut() {
        assert_eq!(shown("a\u{1b}[31mb\rc\n"), "a\\u{1b}[31mb\\rc\\n");
        let long = "x".repeat(SHOWN_CHARS + 50);
        let s = shown(&long);
        assert!(s.ends_with("… (50 more characters)"), "{s}");
        assert!(s.len() < SHOWN_CHARS + 30);
    }

    #[test]
    fn invisible_reordering_characters_are_escaped_and_letters_kept() {
        // "trainer" shown as "reniart" by a right-to-left override, and a zero-width space.
        assert_eq!(shown("x\u{202e}reniart"), "x\\u{202e}reniart");
        assert_eq!(escaped("a\u{200b}b\u{2066}"), "a\\u{200b}b\\u{2066}");
        assert_eq!(escaped("rté 训练"), "rté 训练");
    }

    #[test]
    fn long_pid_lists_are_counted() {
        assert_eq!(pids_shown(&[1, 2]), "[1, 2]");
        let many: Vec<u32> = (1..=9000).collect();
        assert_eq!(pids_shown(&many), "[1, 2, 3, 4, 5, 6, 7, 8, … (9000 pids)]");
    }

    #[test]
    fn a_local_peer_is_known_by_its_uid() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, peer) = l.accept().unwrap();
        let uid = rustix::process::getuid().as_raw();
        assert_eq!(Peer::of(peer, s.local_addr().unwrap()), Peer::Uid(uid));
        // Closed by its owner before the daemon looked (a request sent, then the client
        // gone, while the daemon's loop was held up): its row says uid 0. (A child another
        // test forks holds a copy of the socket until it execs: looked at again meanwhile.)
        drop(c);
        let closed = (0..100).any(|_| {
            let p = Peer::of(peer, s.local_addr().unwrap());
            p == Peer::Addr(peer.ip()) || {
                std::thread::sleep(std::time::Duration::from_millis(10));
                false
            }
        });
        assert!(closed, "{:?}", Peer::of(peer, s.local_addr().unwrap()));
        let Ok(l) = std::net::TcpListener::bind("[::]:0") else {
            return; // no IPv6 here
        };
        let port = l.local_addr().unwrap().port();
        let _c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (s, peer) = l.accept().unwrap();
        assert_eq!(Peer::of(peer, s.local_addr().unwrap()), Peer::Uid(uid));
    }
}
