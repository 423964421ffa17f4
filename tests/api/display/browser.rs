//! The screen in a real browser: headless Chromium (Debian's `chromium`), driven over the
//! DevTools protocol on a websocket, opens the page with its key, shows a call made through
//! the API within a second, a number called apart from one being served (in words and in
//! style, not only in colour), shows that it is stale while its network is down and catches
//! up by itself when it is back, and blanks when the key is revoked.
//!
//! Without /usr/bin/chromium the test says so and passes, unless `DISPLAY_BROWSER=required`
//! (CI installs Chromium and sets it). The screenshot of the called number is written to
//! `DISPLAY_SCREENSHOT` (a PNG path), or to the temporary directory, and one of the board
//! with a number called and others served beside it, `-board` added to its name.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::block_in_place;
use tungstenite::{Message, WebSocket};

use super::make_key;
use crate::queue::{move_ticket, ticket};
use crate::support::{TestApp, assert_status, id_of, tool_present};

const CHROMIUM: &str = "/usr/bin/chromium";

/// What the closed network here needs: no sandbox (root), no GPU, and none of Chromium's own
/// connections to the outside.
const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-proxy-server",
    // A waiting-room screen is a kiosk: its sound needs no click.
    "--autoplay-policy=no-user-gesture-required",
    "--remote-debugging-port=0",
];

/// One Chromium with one page, and the DevTools session of that page.
struct Browser {
    child: Child,
    profile: PathBuf,
    socket: WebSocket<TcpStream>,
    session: Option<String>,
    last_id: u64,
    /// Errors the page's script threw (`Runtime.exceptionThrown`).
    exceptions: Vec<String>,
    /// The names of the events heard so far.
    heard: Vec<String>,
}

impl Browser {
    fn launch() -> Self {
        let profile = std::env::temp_dir().join(format!(
            "clinic-display-chromium-{}-{}",
            std::process::id(),
            time::OffsetDateTime::now_utc().unix_timestamp_nanos()
        ));
        let mut child = Command::new(CHROMIUM)
            .args(FLAGS)
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("Chromium starts");
        // Chromium says where its DevTools listen on stderr; the rest of stderr is drained so
        // that it never blocks on a full pipe.
        let stderr = child.stderr.take().expect("stderr is piped");
        let (found, endpoint) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(at) = line.find("ws://") {
                    let _ = found.send(line[at..].trim().to_owned());
                }
            }
        });
        let endpoint = endpoint.recv_timeout(Duration::from_secs(30)).expect("Chromium opens its DevTools");
        let address =
            endpoint.trim_start_matches("ws://").split('/').next().expect("host and port").to_owned();
        let stream = TcpStream::connect(&address).expect("DevTools accepts");
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let (socket, _) = tungstenite::client(endpoint.as_str(), stream).expect("the websocket opens");
        let mut browser = Self {
            child,
            profile,
            socket,
            session: None,
            last_id: 0,
            exceptions: Vec::new(),
            heard: Vec::new(),
        };
        let target = browser.call("Target.createTarget", json!({ "url": "about:blank" }));
        let attached =
            browser.call("Target.attachToTarget", json!({ "targetId": target["targetId"], "flatten": true }));
        browser.session = Some(attached["sessionId"].as_str().expect("a session").to_owned());
        browser.call("Runtime.enable", json!({}));
        browser.call("Page.enable", json!({}));
        // A television's screen.
        let screen = json!({ "width": 1920, "height": 1080, "deviceScaleFactor": 1, "mobile": false });
        browser.call("Emulation.setDeviceMetricsOverride", screen);
        browser
    }

    /// Sends one command to the page (or the browser, before a page is attached) and answers
    /// its result; events that arrive meanwhile are kept when they are the page's errors.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.last_id += 1;
        let id = self.last_id;
        let mut command = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = &self.session {
            command["sessionId"] = json!(session);
        }
        self.socket.send(Message::text(command.to_string())).expect("the command is sent");
        loop {
            let message = self.read();
            if message["id"] == id {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
        }
    }

    /// The next message from Chromium (within the socket's read timeout).
    fn read(&mut self) -> Value {
        loop {
            let Message::Text(text) = self.socket.read().expect("Chromium answers") else { continue };
            let message: Value = serde_json::from_str(text.as_str()).expect("DevTools speaks JSON");
            if let Some(event) = message["method"].as_str() {
                if event == "Runtime.exceptionThrown" {
                    self.exceptions.push(message["params"]["exceptionDetails"].to_string());
                }
                self.heard.push(event.to_owned());
            }
            return message;
        }
    }

    /// Opens `url` in the page and waits until it has loaded.
    fn open(&mut self, url: &str) {
        self.heard.clear();
        self.call("Page.navigate", json!({ "url": url }));
        while !self.heard.iter().any(|e| e == "Page.loadEventFired") {
            self.read();
        }
    }

    /// The value of a script run in the page (a promise is awaited).
    fn evaluate(&mut self, expression: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
        );
        assert!(result.get("exceptionDetails").is_none(), "{expression}: {result}");
        result["result"]["value"].clone()
    }

    /// What the screen shows now, or (`after_change`) once the page next changes, within a
    /// quarter of a second.
    fn screen(&mut self, after_change: bool) -> Value {
        let wait = if after_change { "changed()" } else { "Promise.resolve()" };
        self.evaluate(&format!("{SHOWN}\n{wait}.then(shown)"))
    }

    /// Waits, change by change, until what the screen shows passes `seen`; fails past
    /// `deadline`.
    fn until(&mut self, deadline: Instant, what: &str, seen: impl Fn(&Value) -> bool) -> Value {
        let mut now = self.screen(false);
        while !seen(&now) {
            assert!(Instant::now() < deadline, "{what}: not shown in time; the screen shows {now:#}");
            now = self.screen(true);
        }
        now
    }

    fn screenshot(&mut self) -> Vec<u8> {
        let shot = self.call("Page.captureScreenshot", json!({ "format": "png" }));
        base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().expect("image data")).unwrap()
    }
}

impl Drop for Browser {
    /// Closed through DevTools, Chromium stops its helper processes before it exits (and
    /// closes the socket), so nothing writes into the profile while it is removed.
    fn drop(&mut self) {
        let close = json!({ "id": self.last_id + 1, "method": "Browser.close" });
        if self.socket.send(Message::text(close.to_string())).is_ok() {
            while self.socket.read().is_ok() {}
        } else {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// Read in the page: what it shows, and a promise of its next change.
const SHOWN: &str = r#"
function shown() {
  const $ = (id) => document.getElementById(id);
  const rows = [...$('serving').children].map((row) => row.innerText.replace(/\s+/g, ' ').trim());
  const fresh = document.querySelector('#serving li.fresh');
  // How each row looks: its class, the words of its state, its outline and its animation.
  const looks = [...$('serving').children].map((row) => {
    const style = getComputedStyle(row);
    const state = row.querySelector('.state');
    return {
      number: row.dataset.number,
      class: row.className,
      state: state ? state.textContent : null,
      outline: style.outlineStyle,
      animation: style.animationName,
    };
  });
  return {
    state: document.body.dataset.state,
    serving: rows,
    looks,
    waiting: [...$('waiting').children].map((item) => item.innerText),
    announced: $('announce').classList.contains('shown') ? $('announce-number').innerText : null,
    where: $('announce-where').innerText,
    fresh: fresh ? fresh.dataset.number : null,
    denied: getComputedStyle($('denied')).display !== 'none',
    text: document.body.innerText,
  };
}
function changed() {
  return new Promise((resolve) => {
    const observer = new MutationObserver(() => done());
    const timer = setTimeout(() => done(), 250);
    function done() { observer.disconnect(); clearTimeout(timer); resolve(); }
    observer.observe(document.documentElement, { subtree: true, childList: true, attributes: true, characterData: true });
  });
}
"#;

/// A TCP relay to `target` whose link can be cut (every open connection dropped, new ones
/// closed at once) and restored: the screen's network, as a waiting room's may fail.
async fn relay(target: SocketAddr) -> (SocketAddr, watch::Sender<bool>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (link, watched) = watch::channel(true);
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let mut up = watched.clone();
            if !*up.borrow() {
                continue;
            }
            tokio::spawn(async move {
                let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await else { return };
                tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    _ = up.wait_for(|up| !*up) => {}
                }
            });
        }
    });
    (address, link)
}

/// Keeps a screenshot as `DISPLAY_SCREENSHOT` (or a file in the temporary directory), with
/// `suffix` before its extension.
fn keep_screenshot(png: &[u8], suffix: &str) {
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000, "{} bytes", png.len());
    let file = std::env::var_os("DISPLAY_SCREENSHOT")
        .map_or_else(|| std::env::temp_dir().join("clinic-display.png"), PathBuf::from);
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("clinic-display");
    let file = file.with_file_name(format!("{stem}{suffix}.png"));
    if let Some(folder) = file.parent() {
        std::fs::create_dir_all(folder).unwrap();
    }
    std::fs::write(&file, png).unwrap();
    eprintln!("screenshot: {}", file.display());
}

fn chromium_present() -> bool {
    let missing = format!("chromium not found ({CHROMIUM})");
    let present = std::path::Path::new(CHROMIUM).exists();
    tool_present(present, "DISPLAY_BROWSER", &missing, "the display's browser test is skipped")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_screen_shows_a_call_within_a_second_and_blanks_when_its_key_is_revoked() {
    if !chromium_present() {
        return;
    }
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let service = json!({ "name": "Ophthalmology", "code": "OPH" });
    let service = id_of(&app.created(&format!("/api/v1/branches/{branch}/services"), None, service).await);
    let patient = app.create_patient(branch, "Zelda", "Quintero").await;
    let mut tickets =
        vec![id_of(&ticket(&app, branch, service, json!({ "patient_id": id_of(&patient) })).await)];
    for _ in 0..6 {
        tickets.push(id_of(&ticket(&app, branch, service, json!({})).await));
    }
    // One patient is with the doctor already.
    for verb in ["call", "serve"] {
        let path = format!("/api/v1/queue/queue-tickets/{}/{verb}", tickets[0]);
        assert_status(&app.put(&path, Some(branch), json!({ "counter": "Room 1" })).await, 200);
    }
    let key = make_key(&app, service, "Waiting room").await;
    let (relayed, link) = relay(app.base.trim_start_matches("http://").parse().unwrap()).await;
    let url = key["url"].as_str().unwrap().replace(&app.base, &format!("http://{relayed}")) + "&chime=1";

    let mut browser = block_in_place(|| {
        let mut browser = Browser::launch();
        browser.open(&url);
        browser
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let board = block_in_place(|| {
        browser.until(deadline, "the board", |s| s["state"] == "live" && s["waiting"][0] == "OPH-002")
    });
    assert_eq!(board["serving"], json!(["OPH-001 Now serving at Room 1"]), "{board:#}");
    assert_eq!(board["waiting"].as_array().unwrap().len(), 6, "{board:#}");

    // A call through the API, on the screen within a second.
    let called = Instant::now();
    assert_status(&move_ticket(&app, branch, tickets[1], "call", 0).await, 200);
    let shown = block_in_place(|| {
        browser.until(called + Duration::from_secs(1), "the call", |s| {
            s["announced"] == "OPH-002"
                && s["fresh"] == "OPH-002"
                && s["serving"][0] == "OPH-002 Called — please go to Window 2"
        })
    });
    let took = called.elapsed();
    assert_eq!(shown["where"], "Please go to Window 2");
    assert_eq!(shown["serving"][1], "OPH-001 Now serving at Room 1");
    // Called and served tickets differ in words, class, outline and motion, not only colour.
    let (call, served) = (&shown["looks"][0], &shown["looks"][1]);
    assert_eq!((&call["number"], &call["class"]), (&json!("OPH-002"), &json!("called fresh")), "{shown:#}");
    assert_eq!((&served["number"], &served["class"]), (&json!("OPH-001"), &json!("serving")), "{shown:#}");
    assert_eq!(
        (&call["state"], &served["state"]),
        (&json!("Called — please go to"), &json!("Now serving at"))
    );
    assert_eq!((&call["outline"], &served["outline"]), (&json!("dashed"), &json!("none")), "{shown:#}");
    assert!(call["animation"].as_str().unwrap().contains("beckon"), "the call pulses: {shown:#}");
    assert_eq!(served["animation"], "none", "{shown:#}");
    assert_eq!(shown["waiting"][0], "OPH-003");
    assert!(!shown["text"].as_str().unwrap().contains("Quintero"), "{shown:#}");
    eprintln!("the call was on the screen {took:?} after it was made");

    let png = block_in_place(|| browser.screenshot());
    keep_screenshot(&png, "");

    // The network drops: the screen says it is stale and keeps what it showed; once the
    // network is back it reconnects by itself, and shows what was called meanwhile.
    link.send_replace(false);
    let stale = block_in_place(|| {
        browser.until(Instant::now() + Duration::from_secs(5), "the stale screen", |s| s["state"] == "stale")
    });
    assert!(stale["text"].as_str().unwrap().contains("Reconnecting"), "{stale:#}");
    assert_eq!(stale["serving"][0], "OPH-002 Called — please go to Window 2", "{stale:#}");
    assert_status(&move_ticket(&app, branch, tickets[2], "call", 0).await, 200);
    link.send_replace(true);
    let back = block_in_place(|| {
        browser.until(Instant::now() + Duration::from_secs(10), "the screen back", |s| {
            s["state"] == "live" && s["serving"][0] == "OPH-003 Called — please go to Window 2"
        })
    });
    assert_eq!(back["waiting"][0], "OPH-004", "{back:#}");
    // Called before and not announced again, it is still set apart as called.
    assert_eq!(back["looks"][1]["class"], "called", "{back:#}");
    assert!(back["looks"][1]["animation"].as_str().unwrap().contains("beckon"), "{back:#}");
    // Once the announcement is over, the board is in sight: kept to be looked at.
    let png = block_in_place(|| {
        browser.until(Instant::now() + Duration::from_secs(10), "the announcement over", |s| {
            s["announced"].is_null()
        });
        browser.screenshot()
    });
    keep_screenshot(&png, "-board");

    // Revoked: the screen blanks and says it is not authorised.
    let revoked = Instant::now();
    let path = format!("/api/v1/branch-services/{service}/display-keys/{}", id_of(&key));
    assert_status(&app.delete(&path, None).await, 200);
    let blank = block_in_place(|| {
        browser.until(revoked + Duration::from_secs(2), "the blank screen", |s| s["state"] == "unauthorised")
    });
    assert!(blank["denied"].as_bool().unwrap(), "{blank:#}");
    assert_eq!((&blank["serving"], &blank["waiting"]), (&json!([]), &json!([])), "{blank:#}");
    let text = blank["text"].as_str().unwrap();
    assert!(text.contains("This display is not authorised") && !text.contains("OPH-"), "{text}");
    assert!(browser.exceptions.is_empty(), "the page's script failed: {:?}", browser.exceptions);
}
