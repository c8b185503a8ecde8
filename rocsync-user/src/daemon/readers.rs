//! The daemon's clients are read off its loop: each connection's request is read in a
//! task of its own and handed to the loop whole, so a client that connects and stalls
//! holds only its task, until its read times out — never the loop that drains the
//! probes, ends traces on time and answers everyone else. Each listener reads at most
//! [`MAX_READING`] requests at once (so scrapers, whom any local user can be, cannot take
//! the slots of those allowed to ask for traces), and at most [`PER_PEER`] of one peer (so
//! one user's idle connections cannot take everyone's); connections past that are closed
//! unread.

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

use super::{
    dynolog, http,
    protocol::{Reply, Request},
    socket,
    untrusted::Peer,
};

/// Requests being read at once, per listener.
const MAX_READING: usize = 64;
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

/// Who is at the other end of a TCP connection.
fn tcp_peer(conn: &TcpStream) -> Option<Peer> {
    Some(Peer::of(conn.peer_addr().ok()?, conn.local_addr().ok()?))
}

/// A request read whole, for the loop to answer.
pub enum Incoming {
    /// A GET of `/metrics` or `/healthz`: the loop renders, the task sends.
    Http(String, oneshot::Sender<http::Response>),
    /// A request on the unix socket, from a peer allowed to ask.
    Request(UnixStream, Result<Request>),
    /// A dynolog message, and who sent it.
    Dynolog(TcpStream, Result<Value>, Peer),
}

pub struct Readers {
    to_loop: UnboundedSender<Incoming>,
    /// Reading slots of the metrics, unix-socket and dynolog listeners.
    reading: [Arc<Semaphore>; 3],
    /// Each peer's share of them.
    peers: [Arc<PeerSlots>; 3],
}

const HTTP: usize = 0;
const REQUEST: usize = 1;
const DYNOLOG: usize = 2;

impl Readers {
    /// The readers, and where the loop receives what they read.
    pub fn new() -> (Self, UnboundedReceiver<Incoming>) {
        let (to_loop, incoming) = unbounded_channel();
        let reading = std::array::from_fn(|_| Arc::new(Semaphore::new(MAX_READING)));
        let peers = std::array::from_fn(|_| Arc::default());
        (
            Self {
                to_loop,
                reading,
                peers,
            },
            incoming,
        )
    }

    /// A scraper's connection.
    pub fn http(&self, mut conn: TcpStream) {
        let Some(permit) = self.permit(HTTP) else {
            return;
        };
        let (to_loop, peers) = (self.to_loop.clone(), self.peers[HTTP].clone());
        tokio::spawn(async move {
            let Some(_slot) = tcp_peer(&conn).and_then(|p| peers.take(p)) else {
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
            drop(permit);
        });
    }

    /// A connection on the unix socket; peers outside root and `group` are refused here.
    pub fn request(&self, mut conn: UnixStream, group: Option<u32>) {
        let Some(permit) = self.permit(REQUEST) else {
            return;
        };
        let (to_loop, peers) = (self.to_loop.clone(), self.peers[REQUEST].clone());
        tokio::spawn(async move {
            let uid = rustix::net::sockopt::socket_peercred(&conn).map(|c| c.uid.as_raw());
            let Some(_slot) = uid.ok().and_then(|u| peers.take(Peer::Uid(u))) else {
                return;
            };
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
    pub fn dynolog(&self, mut conn: TcpStream) {
        let Some(permit) = self.permit(DYNOLOG) else {
            return;
        };
        let (to_loop, peers) = (self.to_loop.clone(), self.peers[DYNOLOG].clone());
        tokio::spawn(async move {
            let Some(peer) = tcp_peer(&conn) else {
                return;
            };
            let Some(_slot) = peers.take(peer) else {
                return;
            };
            let asked = dynolog::read(&mut conn).await;
            drop(permit);
            let _ = to_loop.send(Incoming::Dynolog(conn, asked, peer));
        });
    }

    /// A reading slot; `None` (the connection is closed unread) when all are taken.
    fn permit(&self, listener: usize) -> Option<OwnedSemaphorePermit> {
        self.reading[listener].clone().try_acquire_owned().ok()
    }
}
