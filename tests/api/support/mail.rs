//! A server whose mail is caught for the test to read: dropped as files in a directory of
//! its own (the server's mail drop when no SMTP server is set), or sent to a real SMTP
//! receiver ([`super::smtp`]).

use std::collections::HashSet;
use std::path::PathBuf;

use clinic_server::config::Settings;

use super::smtp::{SmtpReceiver, reset_code_in};
use super::{SOON, TestApp, eventually};

/// The directory a server drops its mail in (`<var_dir>/mail`), removed when dropped.
pub struct MailDrop {
    var_dir: PathBuf,
    seen: HashSet<PathBuf>,
}

impl MailDrop {
    /// A server configured by `configure`, dropping its mail in a fresh directory.
    pub async fn spawn(configure: impl FnOnce(&mut Settings)) -> (TestApp, Self) {
        let secret = clinic_server::security::tokens::random_secret();
        let var_dir = std::env::temp_dir().join(format!("clinic-mail-test-{}", &secret[..16]));
        std::fs::create_dir_all(&var_dir).unwrap();
        let dir = var_dir.clone();
        let app = TestApp::spawn_with(move |s| {
            configure(s);
            s.var_dir = dir;
        })
        .await;
        (app, Self { var_dir, seen: HashSet::new() })
    }

    /// The first reset mail not read before, once it is there: (its text, its code).
    pub async fn next_reset_mail(&mut self) -> (String, String) {
        let mut found = None;
        eventually(SOON, "a reset mail in the mail drop", async || {
            found = self.unread().into_iter().find_map(|path| {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                reset_code_in(&text).map(|code| (path, text, code))
            });
            found.is_some()
        })
        .await;
        let (path, text, code) = found.unwrap();
        self.seen.insert(path);
        (text, code)
    }

    /// How many mails were dropped.
    pub fn count(&self) -> usize {
        self.mails().len()
    }

    fn mails(&self) -> Vec<PathBuf> {
        let mut mails: Vec<PathBuf> = std::fs::read_dir(self.var_dir.join("mail"))
            .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        mails.retain(|p| p.extension().is_some_and(|x| x == "eml"));
        mails.sort();
        mails
    }

    fn unread(&self) -> Vec<PathBuf> {
        self.mails().into_iter().filter(|p| !self.seen.contains(p)).collect()
    }
}

impl Drop for MailDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.var_dir);
    }
}

/// A server configured by `configure`, sending its mail to a real SMTP receiver.
pub async fn spawn_with_smtp(configure: impl FnOnce(&mut Settings)) -> (TestApp, SmtpReceiver) {
    let smtp = SmtpReceiver::start().await;
    let url = smtp.url.clone();
    let app = TestApp::spawn_with(move |s| {
        configure(s);
        s.smtp_url = Some(url);
    })
    .await;
    (app, smtp)
}
