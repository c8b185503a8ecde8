//! The smallest HTTP/1.1 server `/metrics` needs: one GET per connection, bounded in size
//! and time, then closed. Connections are read off the daemon's loop (`clients`).

use std::time::Duration;

use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};

const MAX_REQUEST: usize = 8 << 10;
const TIMEOUT: Duration = Duration::from_secs(2);

/// What a path answers: (status line, content type, body).
pub(crate) type Response = (&'static str, &'static str, String);

/// Reads one request: the path a GET asks for, or the answer to anything else. `None`
/// when no whole request came in time (the client stalled or left).
pub(crate) async fn read(conn: &mut TcpStream) -> Option<Result<String, Response>> {
    let mut buf = Vec::with_capacity(1024);
    let read = tokio::time::timeout(TIMEOUT, async {
        let mut chunk = [0u8; 1024];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < MAX_REQUEST {
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        true
    })
    .await;
    matches!(read, Ok(true)).then(|| path(&buf))
}

/// Sends `response` and closes the connection.
pub(crate) async fn answer(mut conn: TcpStream, (status, kind, body): Response) {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = tokio::time::timeout(TIMEOUT, async {
        conn.write_all(head.as_bytes()).await?;
        conn.write_all(body.as_bytes()).await?;
        conn.shutdown().await
    })
    .await;
}

/// What the daemon serves at `path`: `metrics` renders `/metrics` (read only when
/// scraped; an error is a 500 that says it).
pub(crate) fn page(path: &str, metrics: impl FnOnce() -> anyhow::Result<String>) -> Response {
    match path {
        "/metrics" => match metrics() {
            Ok(text) => ("200 OK", "text/plain; version=0.0.4; charset=utf-8", text),
            Err(e) => (
                "500 Internal Server Error",
                "text/plain",
                format!("reading the probes' maps: {e:#}\n"),
            ),
        },
        "/healthz" => ("200 OK", "text/plain", "ok\n".into()),
        "/" => (
            "200 OK",
            "text/html; charset=utf-8",
            format!(
                "<html><head><title>rocsync daemon</title></head><body>\
                 <h1>rocsync daemon</h1><p>{}</p><ul>\
                 <li><a href=\"/metrics\">/metrics</a> (Prometheus)</li>\
                 <li><a href=\"/healthz\">/healthz</a></li></ul></body></html>\n",
                crate::VERSION
            ),
        ),
        _ => ("404 Not Found", "text/plain", "not found\n".into()),
    }
}

fn path(request: &[u8]) -> Result<String, Response> {
    let line = request.split(|&b| b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    match (parts.next(), parts.next()) {
        (Some("GET"), Some(target)) => Ok(target.split('?').next().unwrap_or(target).to_string()),
        (Some(_), Some(_)) => Err(("405 Method Not Allowed", "text/plain", "GET only\n".into())),
        _ => Err(("400 Bad Request", "text/plain", "bad request\n".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_gets_and_refuses_the_rest() {
        assert_eq!(
            path(b"GET /metrics?x=1 HTTP/1.1\r\n\r\n"),
            Ok("/metrics".to_string())
        );
        assert_eq!(
            path(b"POST /metrics HTTP/1.1\r\n\r\n").unwrap_err().0,
            "405 Method Not Allowed"
        );
        assert_eq!(path(b"\xff\xfe").unwrap_err().0, "400 Bad Request");
    }
}
