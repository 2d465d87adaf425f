//! What the client commands (`tickwork job`, `run`, `schedule`, `mcp`) share: where the admin
//! is, its token, and how instants are shown.

use std::path::Path;

use anyhow::Context;
use clap::Args;
use tickwork_client::Client;

/// How to reach the admin's JSON API.
#[derive(Debug, Clone, Args)]
pub(crate) struct Remote {
    /// The admin's base URL.
    #[arg(
        long = "admin",
        env = "TICKWORK_ADMIN_URL",
        default_value = "http://127.0.0.1:8080",
        value_name = "URL",
        global = true
    )]
    pub admin: String,
    /// The admin's API token [default: read from tickwork-data/api_token or
    /// tickwork-demo/api_token when one exists].
    #[arg(
        long = "token",
        env = "TICKWORK_API_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true,
        global = true
    )]
    pub token: Option<String>,
}

impl Remote {
    /// A client of the admin, with the token given or found in a local data folder.
    pub(crate) fn client(&self) -> anyhow::Result<Client> {
        let token = match &self.token {
            Some(t) => t.clone(),
            None => ["tickwork-data", "tickwork-demo"]
                .iter()
                .find_map(|dir| std::fs::read_to_string(Path::new(dir).join("api_token")).ok())
                .map(|t| t.trim().to_owned())
                .context("no API token: pass --token or set TICKWORK_API_TOKEN")?,
        };
        Client::new(&self.admin, &token).map_err(|e| crate::InputError(e.to_string()).into())
    }
}

/// An epoch-ms instant as RFC 3339 in the local zone, or `-`.
pub(crate) fn instant(ms: Option<i64>) -> String {
    let Some(ms) = ms else {
        return "-".to_owned();
    };
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(ts) => ts
            .to_zoned(jiff::tz::TimeZone::system())
            .strftime("%Y-%m-%dT%H:%M:%S%.3f%:z")
            .to_string(),
        Err(_) => ms.to_string(),
    }
}

/// `text` cut to `n` characters on one line, for tables.
pub(crate) fn cell(text: &str, n: usize) -> String {
    let one_line = text.replace(['\n', '\r'], " ");
    if one_line.chars().count() <= n {
        one_line
    } else {
        let mut s: String = one_line.chars().take(n.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}
