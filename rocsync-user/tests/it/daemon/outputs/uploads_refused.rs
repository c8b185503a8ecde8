//! One object the store refuses holds no other: a store that answers 403 for one key
//! (a bucket policy on a prefix) gets that trace once, set aside and counted, while the
//! node's next trace is uploaded at once. The store is a small S3 stand-in of the
//! test's own (moto grants every key); its log is what it received. Needs root.

use crate::common::End as _;
use std::{path::Path, process::Stdio};

use crate::{
    common::daemon::*,
    daemon::outputs::uploads::{Keys, free_port, uploading_daemon},
};

/// PUTs of keys holding "refused" answered 403 (S3's error body), others 200 with an
/// ETag; each request logged as `METHOD PATH STATUS`.
const STORE: &str = r#"
import http.server, sys
log = open(sys.argv[2], "a", buffering=1)
class S3(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_PUT(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        if "refused" in self.path:
            body = b"<?xml version='1.0'?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
            self.send_response(403)
            self.send_header("Content-Type", "application/xml")
        else:
            body = b""
            self.send_response(200)
            self.send_header("ETag", '"0123456789abcdef"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        log.write(f"PUT {self.path} {'403' if body else '200'}\n")
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), S3).serve_forever()
"#;

struct FakeStore(std::process::Child);

impl Drop for FakeStore {
    fn drop(&mut self) {
        self.0.end();
    }
}

fn requests(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn a_refused_object_is_set_aside_and_holds_no_other() {
    let name = "a_refused_object_is_set_aside_and_holds_no_other";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let port = free_port();
    let log = dir.path("store.log");
    let _store = FakeStore(
        std::process::Command::new("/usr/bin/python3")
            .args(["-c", STORE, &port.to_string()])
            .arg(&log)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    until(30, "the store answers", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let (daemon, mut lines) = uploading_daemon(&dir, &exe, port, &[], Keys::File);
    let addr = metrics_addr(&lines);
    let mut target = tracked_loop(&dir, &exe, &mut lines, 15000);
    let sock = dir.path("rocsync.sock");
    let pid = target.id().to_string();
    let trace = |name: &str| {
        ask_daemon(
            &sock,
            &["trace", "-p", &pid, "--duration", "200ms", "--name", name],
        )
    };
    let refused = trace("refused");
    until(30, "the refusal counted", || {
        metric(&addr, "rocsync_uploads_refused_total") == 1.0
    });
    let accepted = trace("accepted");
    // Uploaded at once, though the refused one was asked first: no pause waits on it.
    until(10, "the next trace uploaded", || {
        metric(&addr, "rocsync_uploads_total") == 1.0
    });
    std::thread::sleep(std::time::Duration::from_secs(3));
    let name_of = |out: &str| {
        Path::new(out.trim())
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    };
    let got = requests(&log);
    let tried = |file: &str| got.iter().filter(|l| l.contains(file)).count();
    assert_eq!(
        tried(&name_of(&refused)),
        1,
        "the refused key retried: {got:?}"
    );
    assert_eq!(tried(&name_of(&accepted)), 1, "{got:?}");
    assert_eq!(metric(&addr, "rocsync_upload_pending"), 0.0);
    assert_eq!(metric(&addr, "rocsync_upload_failures_total"), 0.0);
    lines.wait_for_all(&["set aside"]);
    // Its marker stays: the next start tries it again.
    let marker = format!("{}.upload", refused.trim());
    assert!(Path::new(&marker).exists(), "{marker}");
    target.kill().unwrap();
    let _ = target.wait();
    stop(daemon);
}
