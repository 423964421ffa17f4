//! A real SMTP receiver on a random local port: enough of RFC 5321 for one client at a time,
//! advertising SMTPUTF8 and 8BITMIME so that internationalised addresses reach it as they
//! were sent. It keeps every accepted message's envelope (sender and recipients) and text.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

#[derive(Debug, Clone)]
pub struct Mail {
    /// The envelope sender (`MAIL FROM`).
    pub sender: String,
    /// The envelope recipients (`RCPT TO`).
    pub recipients: Vec<String>,
    /// The message as sent after `DATA`, headers included, dot-stuffing undone.
    pub text: String,
}

pub struct SmtpReceiver {
    pub url: String,
    mails: Arc<Mutex<Vec<Mail>>>,
    task: tokio::task::JoinHandle<()>,
}

impl SmtpReceiver {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("smtp://{}", listener.local_addr().unwrap());
        let mails = Arc::new(Mutex::new(Vec::new()));
        let task = {
            let mails = mails.clone();
            tokio::spawn(async move {
                while let Ok((socket, _)) = listener.accept().await {
                    tokio::spawn(session(socket, mails.clone()));
                }
            })
        };
        Self { url, mails, task }
    }

    pub fn mails(&self) -> Vec<Mail> {
        self.mails.lock().unwrap().clone()
    }

    /// Waits (at most 10 s) until `count` mails have arrived; answers them all.
    pub async fn wait_for(&self, count: usize) -> Vec<Mail> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let mails = self.mails();
            if mails.len() >= count {
                return mails;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} of {count} mails arrived: {mails:?}",
                mails.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for SmtpReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn session(socket: tokio::net::TcpStream, mails: Arc<Mutex<Vec<Mail>>>) {
    let (read, mut write) = socket.into_split();
    let mut lines = BufReader::new(read);
    let _ = write.write_all(b"220 receiver ESMTP\r\n").await;
    let mut sender = String::new();
    let mut recipients = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        let command = line.trim_end().to_owned();
        let upper = command.to_ascii_uppercase();
        let answer = if upper.starts_with("EHLO") {
            "250-receiver\r\n250-SMTPUTF8\r\n250-8BITMIME\r\n250 OK\r\n"
        } else if upper.starts_with("HELO") {
            "250 OK\r\n"
        } else if upper.starts_with("RSET") {
            sender.clear();
            recipients.clear();
            "250 OK\r\n"
        } else if upper.starts_with("MAIL FROM:") {
            sender = address(&command[10..]);
            "250 OK\r\n"
        } else if upper.starts_with("RCPT TO:") {
            recipients.push(address(&command[8..]));
            "250 OK\r\n"
        } else if upper == "DATA" {
            let _ = write.write_all(b"354 go on\r\n").await;
            let mut text = String::new();
            loop {
                line.clear();
                if lines.read_line(&mut line).await.unwrap_or(0) == 0 {
                    return;
                }
                if line == ".\r\n" || line == ".\n" {
                    break;
                }
                text.push_str(line.strip_prefix('.').unwrap_or(&line));
            }
            let mail = Mail {
                sender: std::mem::take(&mut sender),
                recipients: std::mem::take(&mut recipients),
                text,
            };
            mails.lock().unwrap().push(mail);
            "250 queued\r\n"
        } else if upper == "QUIT" {
            let _ = write.write_all(b"221 bye\r\n").await;
            return;
        } else {
            "250 OK\r\n"
        };
        if write.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// The address of a `MAIL FROM:` or `RCPT TO:` argument, without its angle brackets or the
/// parameters after it.
fn address(argument: &str) -> String {
    let address = argument.split_whitespace().next().unwrap_or_default();
    address.trim_matches(|c| c == '<' || c == '>').to_owned()
}

/// The 6-digit code of a password reset mail ("... reset code is NNNNNN").
pub fn reset_code_in(text: &str) -> Option<String> {
    let at = text.find("reset code is ")? + "reset code is ".len();
    let code: String = text[at..].chars().take(6).collect();
    (code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit())).then_some(code)
}
