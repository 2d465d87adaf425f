//! `tickwork mcp`: a Model Context Protocol server on stdin and stdout, whose tools
//! (jobs, runs and their logs, the schedule ahead) talk to an admin only through its REST API
//! with the token given, so the token's role limits what its client can do.
//!
//! Messages are JSON-RPC 2.0, one a line (`protocol`); requests are answered in order. Logs
//! and nothing else go to stderr: stdout carries only protocol messages.

mod protocol;
mod tools;

use anyhow::Context;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::remote::Remote;
use protocol::{Session, Step};

/// Serves one client on stdin and stdout until stdin ends.
pub(crate) async fn run(remote: &Remote) -> anyhow::Result<()> {
    let client = remote.client()?;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut out = tokio::io::stdout();
    let mut session = Session::default();
    while let Some(line) = lines.next_line().await.context("reading stdin")? {
        if line.trim().is_empty() {
            continue;
        }
        let answer = match session.receive(&line) {
            Step::Silent => continue,
            Step::Reply(v) => v,
            Step::Call { id, call } => {
                let outcome = call.run(&client).await;
                protocol::tool_result(id, session.version(), outcome)
            }
        };
        let mut text = serde_json::to_string(&answer)?;
        text.push('\n');
        out.write_all(text.as_bytes())
            .await
            .context("writing stdout")?;
        out.flush().await.context("writing stdout")?;
    }
    Ok(())
}
