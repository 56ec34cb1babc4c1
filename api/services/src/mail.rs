//! E-mail over SMTP (lettre): the transport as the configuration names it (STARTTLS, implicit
//! TLS or plain; credentials; extra CAs), and a bounded queue of link requests ("Forgot
//! password?", signup verification). One worker per process works through the queue
//! (`accounts::links::outbox`), so a request is answered before — and without telling of — the
//! account lookup and the mail.
//!
//! It reaches no application state: the configuration in, mail out.
use std::time::Duration;

use anyhow::Context;
use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::transport::smtp::extension::ClientId;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use tokio::sync::mpsc;

pub use crate::config::mail::{Security, Settings};
use crate::error::{ApiError, ApiResult, ErrorCode};

/// Link requests waiting for this process's worker; more are refused until it catches up.
pub const QUEUE: usize = 64;

/// Seconds one SMTP conversation may take.
const SMTP_TIMEOUT: Duration = Duration::from_secs(30);

/// What a link in an e-mail does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    PasswordReset,
    VerifyEmail,
}

impl Purpose {
    /// The stored name (`email_tokens.purpose`).
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::PasswordReset => "password_reset",
            Purpose::VerifyEmail => "verify_email",
        }
    }

    /// The console's page for the link (`#reset-password/<token>`).
    fn route(self) -> &'static str {
        match self {
            Purpose::PasswordReset => "reset-password",
            Purpose::VerifyEmail => "verify-email",
        }
    }
}

/// A link to send to `email`, should an account there want one.
#[derive(Debug)]
pub struct LinkRequest {
    pub purpose: Purpose,
    pub email: String,
}

/// This process's SMTP transport and its queue of link requests.
pub struct Mailer {
    settings: Settings,
    transport: AsyncSmtpTransport<Tokio1Executor>,
    queue: mpsc::Sender<LinkRequest>,
    worker: parking_lot::Mutex<Option<mpsc::Receiver<LinkRequest>>>,
}

impl Mailer {
    pub fn new(settings: Settings) -> anyhow::Result<Self> {
        let tls = || -> anyhow::Result<TlsParameters> {
            let mut b = TlsParameters::builder(settings.host.clone());
            if let Some(path) = &settings.ca_file {
                let pem = std::fs::read(path)
                    .with_context(|| format!("reading smtp_ca_file {}", path.display()))?;
                let ca = Certificate::from_pem(&pem).with_context(|| {
                    format!("smtp_ca_file {}: not a PEM certificate", path.display())
                })?;
                b = b.add_root_certificate(ca);
            }
            b.build_rustls().context("setting up TLS for SMTP")
        };
        let tls = match settings.security {
            Security::StartTls => Tls::Required(tls()?),
            Security::Tls => Tls::Wrapper(tls()?),
            Security::None => Tls::None,
        };
        let hello = settings
            .public_url
            .split("://")
            .nth(1)
            .and_then(|rest| rest.split(['/', ':']).next())
            .unwrap_or("localhost")
            .to_string();
        let mut b = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(settings.host.clone())
            .port(settings.port)
            .tls(tls)
            .hello_name(ClientId::Domain(hello))
            .timeout(Some(SMTP_TIMEOUT));
        if let Some((user, password)) = &settings.credentials {
            b = b.credentials(Credentials::new(user.clone(), password.clone()));
        }
        let (queue, worker) = mpsc::channel(QUEUE);
        Ok(Self {
            transport: b.build(),
            settings,
            queue,
            worker: parking_lot::Mutex::new(Some(worker)),
        })
    }

    /// Hands a request to this process's worker; refused (try again) when the queue is full.
    pub fn enqueue(&self, request: LinkRequest) -> ApiResult<()> {
        self.queue.try_send(request).map_err(|_| {
            metrics::counter!("bai_mail_queue_full_total").increment(1);
            ApiError::new(
                ErrorCode::Unavailable,
                "Too many e-mail requests are waiting. Try again in a minute.",
            )
            .with_header("retry-after", "60")
        })
    }

    /// The queue's receiving end, for the one worker (None once taken).
    pub fn take_queue(&self) -> Option<mpsc::Receiver<LinkRequest>> {
        self.worker.lock().take()
    }

    /// The console's address of a link: the configured public URL, never a request's Host.
    pub fn link(&self, purpose: Purpose, token: &str) -> String {
        format!("{}/#{}/{token}", self.settings.public_url, purpose.route())
    }

    /// Sends one plain-text message.
    pub async fn send(&self, to: &str, subject: &str, body: String) -> anyhow::Result<()> {
        let to: Mailbox = to
            .parse()
            .context("the recipient is not an e-mail address")?;
        // A Message-ID of the sender's domain (mail without one looks like spam to many filters).
        let id = format!(
            "<{}@{}>",
            uuid::Uuid::new_v4().simple(),
            self.settings.from.email.domain()
        );
        let message = Message::builder()
            .message_id(Some(id))
            .from(self.settings.from.clone())
            .to(to)
            .subject(subject)
            .header(ContentType::TEXT_PLAIN)
            .body(body)
            .context("composing the message")?;
        self.transport
            .send(message)
            .await
            .context("sending through the SMTP server")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn cfg(f: impl FnOnce(&mut Config)) -> anyhow::Result<Option<Settings>> {
        let mut c = Config::default();
        f(&mut c);
        c.mail()
    }

    #[test]
    fn no_smtp_host_means_no_mail() {
        assert!(cfg(|_| {}).unwrap().is_none());
    }

    #[test]
    fn settings_are_checked() {
        let base = |c: &mut Config| {
            c.smtp_host = Some("mail.example.org".into());
            c.public_url = Some("https://bai.example.org/".into());
        };
        let s = cfg(base).unwrap().unwrap();
        assert_eq!(s.public_url, "https://bai.example.org");
        assert_eq!(s.security, Security::StartTls);
        let err = |f: fn(&mut Config)| {
            cfg(|c| {
                base(c);
                f(c)
            })
            .unwrap_err()
            .to_string()
        };
        assert!(err(|c| c.public_url = None).contains("public_url is required"));
        assert!(err(|c| c.public_url = Some("bai.example.org".into())).contains("https://"));
        assert!(err(|c| c.public_url = Some("https://x/#y".into())).contains("nothing else"));
        assert!(err(|c| c.smtp_tls = "maybe".into()).contains("starttls, tls or none"));
        assert!(err(|c| c.smtp_username = Some("u".into())).contains("go together"));
        assert!(
            err(|c| {
                c.smtp_tls = "none".into();
                c.smtp_username = Some("u".into());
                c.smtp_password = Some("p".into());
            })
            .contains("only over TLS")
        );
        assert!(err(|c| c.mail_from = "not an address".into()).contains("mail_from"));
        assert!(err(|c| c.smtp_host = Some("smtp://x:25".into())).contains("without scheme"));
        assert!(err(|c| c.password_reset_ttl_secs = u64::MAX).contains("60 seconds to 7 days"));
        assert!(err(|c| c.email_verification_ttl_secs = 0).contains("60 seconds to 7 days"));
    }

    #[test]
    fn links_point_at_the_public_url() {
        let c = Config {
            smtp_host: Some("localhost".into()),
            public_url: Some("https://bai.example.org/lab".into()),
            ..Default::default()
        };
        let m = Mailer::new(c.mail().unwrap().unwrap()).unwrap();
        assert_eq!(
            m.link(Purpose::PasswordReset, "abc"),
            "https://bai.example.org/lab/#reset-password/abc"
        );
        assert_eq!(
            m.link(Purpose::VerifyEmail, "abc"),
            "https://bai.example.org/lab/#verify-email/abc"
        );
    }
}
