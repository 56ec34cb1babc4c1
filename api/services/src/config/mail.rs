//! The mail settings (`smtp_*`, `mail_from`, `public_url`, link lifetimes), checked when the
//! configuration is loaded; `Config::mail` reads them, `mail` sends with them.
use std::path::PathBuf;

use lettre::message::Mailbox;

/// How the connection to the SMTP server is secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Security {
    /// Plain connection upgraded by STARTTLS, which must be offered (never downgraded).
    StartTls,
    /// TLS from the first byte (port 465).
    Tls,
    /// Plain text: only for a relay on this host.
    None,
}

/// The mail settings, checked.
#[derive(Debug, Clone)]
pub struct Settings {
    pub host: String,
    pub port: u16,
    pub security: Security,
    pub credentials: Option<(String, String)>,
    pub ca_file: Option<PathBuf>,
    pub from: Mailbox,
    /// `https://bai.example.org` (no trailing slash): where links in e-mails point.
    pub public_url: String,
}
