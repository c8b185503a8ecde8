//! The daemon's clients are read off its loop: each connection's request is read in a
//! task of its own and handed to the loop whole, so a client that connects and stalls
//! holds only its task, until its read times out — never the loop that drains the
//! probes, ends traces on time and answers everyone else. Each listener reads at most
//! [`MAX_READING`] requests at once (so scrapers, whom any local user can be, cannot take
//! the slots of those allowed to ask for traces), and at most [`PER_PEER`] of one peer (so
//! one user's idle connections cannot take everyone's); connections past that are closed
//! unread. A connection's peer share is checked before it takes a reading slot, so a
//! burst of one user's connections never holds the slots of the others, even for the
//! moment it takes to turn the excess away.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use anyhow::Result;
use serde_json::Value;
use tokio::{
    net::{TcpStream, UnixStream},
    sync::{
        OwnedSemaphorePermit, Semaphore,
        mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel},
        oneshot,
    },
};

use crate::daemon::{
    serving::dynolog,
    serving::http,
    serving::peer::Peer,
    serving::protocol::{Reply, Request},
    serving::socket,
};

/// Requests being read at once, per listener.
const MAX_READING: usize = 64;
/// TCP peers being identified at once (each a lookup of its socket in the kernel), and how
/// long a connection waits for its turn: a burst of one user's connections delays the
/// others' by that much at most, and takes none of their reading slots.
const MAX_IDENTIFYING: usize = 64;
const IDENTIFY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);
/// Requests of one peer (a uid on this node, an address off it) being read at once, per
/// listener.
const PER_PEER: usize = 8;

/// How many requests each peer has being read on one listener.
#[derive(Default)]
struct PeerSlots(Mutex<HashMap<Peer, usize>>);

/// One of a peer's slots, given back when dropped.
struct PeerSlot(Arc<PeerSlots>, Peer);

impl PeerSlots {
    fn take(self: &Arc<Self>, peer: Peer) -> Option<PeerSlot> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = held.entry(peer).or_default();
        if *n >= PER_PEER {
            return None;
        }
        *n += 1;
        Some(PeerSlot(self.clone(), peer))
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut held = self.0.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.1);
            }
        }
    }
}

/// What a TCP connection's task goes through before it is read: its turn to be
/// identified, its peer's share of the listener, a reading slot of the listener.
#[derive(Clone)]
struct TcpGate {
    identifying: Arc<Semaphore>,
    peers: Arc<PeerSlots>,
    reading: Arc<Semaphore>,
}

/// A TCP connection let through: its peer, and what it holds while it is read.
struct Admitted {
    peer: Peer,
    _slot: PeerSlot,
    reading: OwnedSemaphorePermit,
}

impl TcpGate {
    /// `None` (the connection is closed unread) when the peer cannot be told in time,
    /// or its share or the listener's slots are all taken.
    async fn admit(&self, conn: &TcpStream) -> Option<Admitted> {
        let turn = self.identifying.clone().acquire_owned();
        let turn = tokio::time::timeout(IDENTIFY_WAIT, turn).await.ok()?.ok()?;
        let local = conn.local_addr().ok()?;
        let peer = Peer::of(conn.peer_addr().ok()?, local);
        drop(turn);
        // A local peer whose uid cannot be told has closed its socket already (sent, then
        // gone while the loop was held up): no one waits for the answer, and served from
        // its address's share it would take every local user's. Local: from loopback, or
        // from the address it connected to (the kernel's source for a local destination).
        let local_ip = local.ip().to_canonical();
        if matches!(peer, Peer::Addr(ip) if ip.is_loopback() || ip == local_ip) {
            return None;
        }
        let slot = self.peers.take(peer)?;
        let reading = self.reading.clone().try_acquire_owned().ok()?;
        Some(Admitted {
            peer,
            _slot: slot,
            reading,
        })
    }
}

/// A request read whole, for the loop to answer.
pub(crate) enum Incoming {
    /// A GET of `/metrics` or `/healthz`: the loop renders, the task sends.
    Http(String, oneshot::Sender<http::Response>),
    /// A request on the unix socket, from a peer allowed to ask.
    Request(UnixStream, Result<Request>),
    /// A dynolog message, and who sent it.
    Dynolog(TcpStream, Result<Value>, Peer),
}

pub(crate) struct Readers {
    to_loop: UnboundedSender<Incoming>,
    /// Reading slots of the metrics, unix-socket and dynolog listeners.
    reading: [Arc<Semaphore>; 3],
    /// Each peer's share of them.
    peers: [Arc<PeerSlots>; 3],
    identifying: Arc<Semaphore>,
}

const HTTP: usize = 0;
const REQUEST: usize = 1;
const DYNOLOG: usize = 2;

impl Readers {
    /// The readers, and where the loop receives what they read.
    pub(crate) fn new() -> (Self, UnboundedReceiver<Incoming>) {
        let (to_loop, incoming) = unbounded_channel();
        let reading = std::array::from_fn(|_| Arc::new(Semaphore::new(MAX_READING)));
        let peers = std::array::from_fn(|_| Arc::default());
        (
            Self {
                to_loop,
                reading,
                peers,
                identifying: Arc::new(Semaphore::new(MAX_IDENTIFYING)),
            },
            incoming,
        )
    }

    /// A scraper's connection. Its peer's share is checked before a reading slot is
    /// taken: connections past one peer's share never hold anyone else's slot.
    pub(crate) fn http(&self, mut conn: TcpStream) {
        let (to_loop, gate) = (self.to_loop.clone(), self.gate(HTTP));
        tokio::spawn(async move {
            let Some(admitted) = gate.admit(&conn).await else {
                return;
            };
            let response = match http::read(&mut conn).await {
                None => return,
                Some(Err(refused)) => refused,
                Some(Ok(path)) => {
                    let (answer, rendered) = oneshot::channel();
                    if to_loop.send(Incoming::Http(path, answer)).is_err() {
                        return;
                    }
                    match rendered.await {
                        Ok(r) => r,
                        Err(_) => return,
                    }
                }
            };
            // Sending (bounded in time) holds a reading slot too.
            http::answer(conn, response).await;
            drop(admitted);
        });
    }

    /// A connection on the unix socket; peers outside root and `group` are refused here.
    pub(crate) fn request(&self, mut conn: UnixStream, group: Option<u32>) {
        // The peer's credentials come with the connection: its share is checked first.
        let uid = rustix::net::sockopt::socket_peercred(&conn).map(|c| c.uid.as_raw());
        let Some(slot) = uid
            .ok()
            .and_then(|u| self.peers[REQUEST].take(Peer::Uid(u)))
        else {
            return;
        };
        let Some(permit) = self.permit(REQUEST) else {
            return;
        };
        let to_loop = self.to_loop.clone();
        tokio::spawn(async move {
            let _slot = slot;
            if !socket::allowed(&conn, group) {
                let e = Reply::Refused {
                    error: "permission denied: root or the daemon's group only".into(),
                };
                return socket::answer(conn, &e).await;
            }
            let asked = socket::read_request(&mut conn).await;
            drop(permit);
            let _ = to_loop.send(Incoming::Request(conn, asked));
        });
    }

    /// A connection from dyno.
    pub(crate) fn dynolog(&self, mut conn: TcpStream) {
        let (to_loop, gate) = (self.to_loop.clone(), self.gate(DYNOLOG));
        tokio::spawn(async move {
            let Some(Admitted {
                peer,
                _slot,
                reading,
            }) = gate.admit(&conn).await
            else {
                return;
            };
            let asked = dynolog::read(&mut conn).await;
            drop(reading);
            let _ = to_loop.send(Incoming::Dynolog(conn, asked, peer));
        });
    }

    fn gate(&self, listener: usize) -> TcpGate {
        TcpGate {
            identifying: self.identifying.clone(),
            peers: self.peers[listener].clone(),
            reading: self.reading[listener].clone(),
        }
    }

    /// A reading slot; `None` (the connection is closed unread) when all are taken.
    fn permit(&self, listener: usize) -> Option<OwnedSemaphorePermit> {
        self.reading[listener].clone().try_acquire_owned().ok()
    }
}
