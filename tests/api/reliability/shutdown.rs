//! Graceful shutdown: new connections are refused, what is in flight (a streamed export)
//! finishes, waiting-room displays get `end` and close, readiness answers 503, and the
//! server stops within `SHUTDOWN_GRACE_SECONDS`; the binary does the same on SIGTERM, writes
//! the audit records of the reads it answered, and exits 0.

use std::time::{Duration, Instant};

use clinic_server::app::Drained;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Server;
use crate::support::TestDb;
use crate::support::sse::{self, EventStream};
use crate::support::{assert_status, client, reply};

/// Patients seeded for the export, each with a 3 KB note: about 10 MB of JSON lines, more
/// than the sockets between server and client hold, so the export is still being written
/// when the shutdown starts.
const PATIENTS: i64 = 3_000;

async fn seed_patients(server: &Server) {
    let client = server.state.registry.get().await.unwrap();
    client
        .execute(
            "INSERT INTO branch_1.patients (first_name, last_name, birth_date, sex, notes)
             SELECT 'Export', 'Patient ' || i, date '1980-01-02', 'female', repeat('n', 3000)
               FROM generate_series(1, $1::bigint) AS i",
            &[&PATIENTS],
        )
        .await
        .unwrap();
}

/// An export requested over a socket with a small receive buffer, whose answer is read only
/// when the test says so.
struct SlowExport {
    socket: tokio::net::TcpStream,
    received: Vec<u8>,
}

impl SlowExport {
    /// Sends the request and reads until the answer's head and the first bytes of its body.
    async fn start(server: &Server, branch: i64) -> Self {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(16 * 1024).unwrap();
        let addr = server.running.as_ref().unwrap().addr;
        let mut socket = socket.connect(addr).await.unwrap();
        let request = format!(
            "GET /api/v1/patients/export?format=json HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
             X-Branch-Id: {branch}\r\nConnection: close\r\n\r\n",
            server.admin_token
        );
        socket.write_all(request.as_bytes()).await.unwrap();
        let mut export = Self { socket, received: Vec::new() };
        while export.body_start().is_none_or(|at| export.received.len() < at + 1024) {
            let mut buffer = [0u8; 4096];
            let n = export.socket.read(&mut buffer).await.unwrap();
            assert!(n > 0, "the export closed early: {}", String::from_utf8_lossy(&export.received));
            export.received.extend_from_slice(&buffer[..n]);
        }
        let head = String::from_utf8_lossy(&export.received[..export.body_start().unwrap()]).to_string();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.to_ascii_lowercase().contains("transfer-encoding: chunked"), "{head}");
        export
    }

    fn body_start(&self) -> Option<usize> {
        self.received.windows(4).position(|w| w == b"\r\n\r\n").map(|at| at + 4)
    }

    /// Reads the rest until the server closes; answers the body (chunked encoding undone)
    /// and whether its last chunk came (a cut body has none).
    async fn finish(mut self) -> (String, bool) {
        let _ = self.socket.read_to_end(&mut self.received).await;
        let mut rest = &self.received[self.body_start().unwrap()..];
        let mut body = Vec::new();
        loop {
            let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else { return (lossy(body), false) };
            let size = usize::from_str_radix(std::str::from_utf8(&rest[..eol]).unwrap().trim(), 16).unwrap();
            rest = &rest[eol + 2..];
            if size == 0 {
                return (lossy(body), true);
            }
            if rest.len() < size + 2 {
                body.extend_from_slice(&rest[..rest.len().min(size)]);
                return (lossy(body), false);
            }
            body.extend_from_slice(&rest[..size]);
            rest = &rest[size + 2..];
        }
    }
}

fn lossy(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A waiting-room display's stream of events.
struct Display {
    events: EventStream,
}

impl Display {
    async fn open(http: &reqwest::Client, base: &str, token: &str, branch: i64) -> Self {
        let service = reply(
            http.post(format!("{base}/api/v1/branches/{branch}/services"))
                .bearer_auth(token)
                .header("x-branch-id", branch.to_string())
                .json(&json!({ "name": "Reception", "code": "R" })),
        )
        .await;
        assert_status(&service, 201);
        let service = service.body["data"]["id"].as_i64().unwrap();
        let stream = http
            .get(format!("{base}/api/v1/queue/branch-services/{service}/events"))
            .bearer_auth(token)
            .header("x-branch-id", branch.to_string())
            .header("accept", "text/event-stream");
        let mut display = Self { events: sse::open(stream).await.stream() };
        assert_eq!(display.next().await.expect("a snapshot").0, "snapshot");
        display
    }

    /// The next named event, or `None` once the stream closed.
    async fn next(&mut self) -> Option<(String, Value)> {
        self.events.next_any().await
    }

    /// The stream says `end` with reason `shutdown`, then closes.
    async fn ends_for_shutdown(mut self) {
        tokio::time::timeout(Duration::from_secs(5), async {
            let (name, data) = self.next().await.expect("an end event before the close");
            assert_eq!((name.as_str(), &data), ("end", &json!({ "reason": "shutdown" })));
            assert!(self.next().await.is_none(), "the stream closes after end");
        })
        .await
        .expect("the display's stream ends within 5 s");
    }
}

/// Readiness, asked of the service in-process (the socket no longer takes connections).
async fn readiness(server: &Server) -> (u16, Value) {
    use salvo::test::{ResponseExt, TestClient};
    let service = clinic_server::app::service(server.state.clone());
    let mut res = TestClient::get("http://127.0.0.1/api/v1/public/ready").send(&service).await;
    (res.status_code.unwrap().as_u16(), res.take_json::<Value>().await.unwrap())
}

#[tokio::test]
async fn a_shutdown_finishes_an_export_ends_displays_and_refuses_new_connections() {
    let db = TestDb::create().await;
    let mut server = Server::start(&db.url, |s| s.shutdown_grace = Duration::from_secs(20)).await;
    let branch = server.main_branch().await;
    seed_patients(&server).await;
    let display = Display::open(&server.http, &server.base, &server.admin_token, branch).await;
    let export = SlowExport::start(&server, branch).await;
    assert_eq!(readiness(&server).await.0, 200);

    let running = server.running.take().unwrap();
    let addr = running.addr;
    let started = Instant::now();
    running.trigger().pull();
    let drain = tokio::spawn(running.until_shutdown());

    // Displays are told, and their streams end.
    display.ends_for_shutdown().await;
    // New connections are refused.
    loop {
        match tokio::net::TcpStream::connect(addr).await {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => break,
            _ => assert!(started.elapsed() < Duration::from_secs(5), "still taking connections"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Readiness says 503 while draining.
    let (status, body) = readiness(&server).await;
    assert_eq!((status, &body["code"]), (503, &json!("draining")), "{body}");
    assert!(!drain.is_finished(), "the drain waits for the export");

    // The export, still being written, finishes whole.
    let (body, complete) = export.finish().await;
    assert!(complete, "the export was cut");
    let lines: Vec<Value> =
        body.lines().map(|l| serde_json::from_str(l).expect("a whole JSON line")).collect();
    assert_eq!(lines.len() as i64, PATIENTS);
    assert!(lines.iter().all(|p| p["notes"].as_str().is_some_and(|n| n.len() == 3000)));

    let drained =
        tokio::time::timeout(Duration::from_secs(20), drain).await.expect("the server stops").unwrap();
    assert_eq!(drained, Drained::Finished);
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
}

#[tokio::test]
async fn the_grace_bounds_the_drain_and_cuts_what_is_left() {
    let db = TestDb::create().await;
    let mut server = Server::start(&db.url, |s| s.shutdown_grace = Duration::from_secs(1)).await;
    let branch = server.main_branch().await;
    seed_patients(&server).await;
    // A client that stops reading: its export cannot finish.
    let export = SlowExport::start(&server, branch).await;
    let running = server.running.take().unwrap();
    let started = Instant::now();
    running.trigger().pull();
    let drained =
        tokio::time::timeout(Duration::from_secs(10), running.until_shutdown()).await.expect("stops");
    let took = started.elapsed();
    assert_eq!(drained, Drained::Cut);
    assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(4), "took {took:?}");
    let (_, complete) = export.finish().await;
    assert!(!complete, "the export could not have finished");
}

/// The binary on SIGTERM: a display gets `end`, the process exits 0 within the grace.
#[tokio::test]
async fn the_binary_drains_on_sigterm_and_exits_zero() {
    use std::io::BufRead;
    let db = TestDb::create().await;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_clinic-server"))
        .arg("serve")
        .env("DATABASE_URL", &db.url)
        .env("BIND_ADDR", "127.0.0.1:0")
        .env("CLINIC_ADMIN_PASSWORD", crate::support::ADMIN_PASSWORD)
        .env("PASSWORD_HASH_MEMORY_KIB", "8")
        .env("PASSWORD_HASH_WEAK_FOR_TESTS", "true")
        .env("SHUTDOWN_GRACE_SECONDS", "10")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the binary starts");
    // The log says where it listens; keep reading it so the pipe never fills.
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let log = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(at) = line.find("listening on http://") {
                let addr: String = line[at + 20..].chars().take_while(|c| !c.is_whitespace()).collect();
                let _ = addr_tx.send(addr);
            }
            lines.push(line);
        }
        lines
    });
    let addr = addr_rx.recv_timeout(Duration::from_secs(60)).expect("the server listens");
    let http = client();
    assert_status(&reply(http.get(format!("http://{addr}/api/v1/public/live"))).await, 200);
    let login = http
        .post(format!("http://{addr}/api/v1/auth/login"))
        .json(&json!({ "username": "admin", "password": crate::support::ADMIN_PASSWORD }));
    let token = reply(login).await.body["data"]["token"].as_str().unwrap().to_owned();
    let branch: i64 = clinic_server::db::connect(&db.url)
        .await
        .unwrap()
        .query_one("SELECT id FROM branches WHERE code = 'MAIN'", &[])
        .await
        .unwrap()
        .get(0);
    let display = Display::open(&http, &format!("http://{addr}"), &token, branch).await;
    // Reads answered just before the signal: their audit records are still queued.
    let reads = (0..200).map(|_| {
        reply(
            http.get(format!("http://{addr}/api/v1/patients"))
                .bearer_auth(&token)
                .header("x-branch-id", branch.to_string()),
        )
    });
    for read in futures_util::future::join_all(reads).await {
        assert_status(&read, 200);
    }

    let started = Instant::now();
    // SAFETY: kill has no memory preconditions; the pid is our own child's.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    display.ends_for_shutdown().await;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "the process did not exit");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status.code(), Some(0), "exit status {status:?}");
    let log = log.join().unwrap().join("\n");
    assert!(log.contains("shutting down") && log.contains("drained"), "{log}");
    let recorded = crate::support::patient_reads(&db.url, branch, "list").await;
    assert_eq!(recorded, 200, "every read answered before the stop is recorded");
}
