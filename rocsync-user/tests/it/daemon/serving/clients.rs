//! The daemon's clients cannot hold it: connections that send nothing, on every listener,
//! do not delay anyone else's answer (each stalled one was read in the daemon's loop,
//! holding it — draining, trace deadlines, signals — until its read timed out: 2 s for a
//! scraper, 5 s on the socket and for dyno). Needs root.

use std::{
    io::{ErrorKind, Read as _, Write as _},
    net::TcpStream,
    os::unix::net::UnixStream,
    time::{Duration, Instant},
};

use crate::common::daemon::*;

/// Still open from the daemon's side: nothing to read yet, no end of file.
fn still_open(read: &mut dyn FnMut(&mut [u8]) -> std::io::Result<usize>) -> bool {
    matches!(read(&mut [0u8; 16]), Err(e) if e.kind() == ErrorKind::WouldBlock)
}

#[test]
fn stalled_clients_delay_no_one_else() {
    let Some((dir, exe)) = daemon_test("stalled_clients_delay_no_one_else") else {
        return;
    };
    let (daemon, lines) = start_daemon(&dir, &exe, &["--dynolog-addr", "127.0.0.1:0"]);
    let metrics = metrics_addr(&lines);
    let dyno = lines
        .1
        .iter()
        .find_map(|l| l.strip_prefix("rocsync daemon: dynolog requests on "))
        .unwrap()
        .to_string();
    let socket = dir.path("rocsync.sock");

    // The stalled ones are checked within the shortest read timeout (a scraper's 2 s)
    // of their connecting: a check made later (a loaded machine, answers slow to come)
    // proves nothing either way, and is made again, a few times.
    for attempt in 1.. {
        assert!(attempt <= 5, "never checked within 2 s of connecting");
        // Connected, and silent; a scraper's request cut short.
        let connected = Instant::now();
        let mut scrapers: Vec<TcpStream> = (0..3)
            .map(|_| TcpStream::connect(&metrics).unwrap())
            .collect();
        scrapers[0].write_all(b"GET /metr").unwrap();
        let mut asker = UnixStream::connect(&socket).unwrap();
        asker.write_all(b"{\"status\"").unwrap();
        let mut dynos = TcpStream::connect(&dyno).unwrap();

        // Everyone else is answered meanwhile.
        let health = get(&metrics, "/healthz");
        assert!(
            health.starts_with("HTTP/1.1 200") && health.ends_with("ok\n"),
            "{health}"
        );
        assert!(ask_daemon(&socket, &["status"]).contains("tracked processes: "));
        let answer = dyno_exchange(&dyno, r#"{"fn":"getStatus"}"#);
        assert!(
            answer["error"]
                .as_str()
                .unwrap()
                .contains("only setKinetOnDemandRequest"),
            "{answer}"
        );

        // …while the stalled ones were still waited for, not given up on first.
        let mut dropped = Vec::new();
        for (i, s) in scrapers.iter_mut().enumerate() {
            s.set_nonblocking(true).unwrap();
            if !still_open(&mut |b| s.read(b)) {
                dropped.push(format!("scraper {i}"));
            }
        }
        asker.set_nonblocking(true).unwrap();
        if !still_open(&mut |b| asker.read(b)) {
            dropped.push("the socket's asker".into());
        }
        dynos.set_nonblocking(true).unwrap();
        if !still_open(&mut |b| dynos.read(b)) {
            dropped.push("dyno".into());
        }
        let took = connected.elapsed();
        if dropped.is_empty() {
            break;
        }
        assert!(
            took >= Duration::from_secs(2),
            "dropped first, {took:?} after connecting: {dropped:?}"
        );
    }
    stop(daemon);
}
