//! Outgoing mail: through `SMTP_URL` (lettre), or, when unset, written to `./var/mail/` as
//! `.eml` files so that a development setup needs no mail server.

use std::path::PathBuf;

use anyhow::Context;
use lettre::message::Mailbox;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use crate::config::Settings;

#[derive(Clone)]
pub enum Mailer {
    Smtp { transport: AsyncSmtpTransport<Tokio1Executor>, from: Mailbox },
    Files { dir: PathBuf, from: Mailbox },
}

impl Mailer {
    pub fn from_settings(settings: &Settings) -> anyhow::Result<Self> {
        let from: Mailbox = settings.mail_from.parse().context("MAIL_FROM is not a valid mailbox")?;
        Ok(match &settings.smtp_url {
            Some(url) => Self::Smtp {
                transport: AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
                    .context("SMTP_URL is not a valid smtp:// or smtps:// URL")?
                    .build(),
                from,
            },
            None => Self::Files { dir: settings.var_dir.join("mail"), from },
        })
    }

    /// Sends in the background, so that how long a mail server takes tells a caller nothing;
    /// a failure is logged.
    pub fn send_later(&self, to: String, subject: &'static str, body: String) {
        let mailer = self.clone();
        tokio::spawn(async move {
            if let Err(e) = mailer.send(&to, subject, body).await {
                tracing::error!(error = format!("{e:#}"), subject, "could not send mail");
            }
        });
    }

    pub async fn send(&self, to: &str, subject: &str, body: String) -> anyhow::Result<()> {
        let from = match self {
            Self::Smtp { from, .. } | Self::Files { from, .. } => from.clone(),
        };
        let message = Message::builder()
            .from(from)
            .to(to.parse().context("recipient address")?)
            .subject(subject)
            .body(body)
            .context("building the message")?;
        match self {
            Self::Smtp { transport, .. } => {
                transport.send(message).await.context("sending mail")?;
            }
            Self::Files { dir, .. } => {
                tokio::fs::create_dir_all(dir).await?;
                let stamp = time::OffsetDateTime::now_utc().unix_timestamp_nanos();
                let path =
                    dir.join(format!("{stamp}-{}.eml", &crate::security::tokens::random_secret()[..8]));
                tokio::fs::write(&path, message.formatted()).await?;
                tracing::info!(path = %path.display(), "mail written to file (SMTP_URL is not set)");
            }
        }
        Ok(())
    }
}
