//! The audit log: every change made through the service layer is recorded with who made it,
//! when, what it was done to, and the target before and after as JSON. Views written here
//! never hold password hashes or token secrets (the service passes API views, not rows).
//!
//! The record is written right after the change, not in its transaction: a database failure
//! between the two leaves a change without its record and the caller sees an error. Job
//! creation is the exception: the job and its record are written in one transaction
//! (`JobStore::jobs_create`), since creating jobs is the one change made by the thousand.

use serde::Serialize;
use tickwork_protocol::api::{AuditQuery, AuditView, Page};
use tickwork_store::{AuditEntry, AuditFilter, AuditNew, TimeRange};
use tracing::error;

use super::{AuditLog, Inner};
use crate::Error;
use crate::auth::Principal;
use crate::service::{page, paged};
use crate::timer::now_ms;

/// What a change was done to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target {
    Group(i64),
    Job(i64),
    Run(i64),
    /// Many runs at once (a clear).
    Runs,
    User(i64),
    ApiToken(i64),
    AlarmChannel(i64),
    Workflow(i64),
    WorkflowInstance(i64),
}

impl Target {
    pub(super) fn parts(self) -> (&'static str, String) {
        match self {
            Target::Group(id) => ("group", id.to_string()),
            Target::Job(id) => ("job", id.to_string()),
            Target::Run(id) => ("run", id.to_string()),
            Target::Runs => ("runs", String::new()),
            Target::User(id) => ("user", id.to_string()),
            Target::ApiToken(id) => ("api_token", id.to_string()),
            Target::AlarmChannel(id) => ("alarm_channel", id.to_string()),
            Target::Workflow(id) => ("workflow", id.to_string()),
            Target::WorkflowInstance(id) => ("workflow_instance", id.to_string()),
        }
    }
}

fn to_json<T: Serialize + ?Sized>(v: Option<&T>) -> Result<Option<String>, Error> {
    v.map(|v| serde_json::to_string(v).map_err(|e| Error::Internal(format!("audit json: {e}"))))
        .transpose()
}

fn parse_json(text: Option<String>) -> Option<serde_json::Value> {
    // A record the code cannot read back is shown as the text it holds.
    text.map(|t| serde_json::from_str(&t).unwrap_or(serde_json::Value::String(t)))
}

fn audit_view(e: AuditEntry) -> AuditView {
    AuditView {
        id: e.id,
        at: e.at,
        actor_id: e.actor_id,
        actor: e.actor,
        action: e.action,
        target_type: e.target_type,
        target_id: e.target_id,
        before: parse_json(e.before),
        after: parse_json(e.after),
    }
}

/// The record of one change by `by`, as [`Inner::audit`] writes it.
pub(crate) fn audit_entry<B: Serialize + ?Sized, A: Serialize + ?Sized>(
    by: &Principal,
    action: &str,
    target: Target,
    before: Option<&B>,
    after: Option<&A>,
) -> Result<AuditNew, Error> {
    let (target_type, target_id) = target.parts();
    Ok(AuditNew {
        at: now_ms(),
        actor_id: (by.user_id > 0).then_some(by.user_id),
        actor: by.username.clone(),
        action: action.to_owned(),
        target_type: target_type.to_owned(),
        target_id,
        before: to_json(before)?,
        after: to_json(after)?,
    })
}

impl Inner {
    /// Records one change by `by`.
    pub(crate) async fn audit<B: Serialize + ?Sized, A: Serialize + ?Sized>(
        &self,
        by: &Principal,
        action: &str,
        target: Target,
        before: Option<&B>,
        after: Option<&A>,
    ) -> Result<(), Error> {
        let entry = audit_entry(by, action, target, before, after)?;
        if let Err(e) = self.store.audit_append(entry).await {
            error!(error = ?e, action, "the audit record of a change could not be written");
            return Err(e.into());
        }
        Ok(())
    }
}

impl AuditLog<'_> {
    /// One page of the audit log, newest first (admins only).
    pub async fn list(self, by: &Principal, q: AuditQuery) -> Result<Page<AuditView>, Error> {
        by.require_admin()?;
        let size = q.size.unwrap_or(50);
        let number = q.page.unwrap_or(1);
        if number == 0 {
            return Err(Error::invalid_field("page", "pages count from 1"));
        }
        let req = page(Some((number - 1).saturating_mul(size)), Some(size))?;
        let p = self
            .inner
            .store
            .audit_list(AuditFilter {
                actor: q.actor.filter(|s| !s.is_empty()),
                target_type: q.target_type.filter(|s| !s.is_empty()),
                target_id: q.target_id.filter(|s| !s.is_empty()),
                range: TimeRange {
                    from: q.from,
                    to: q.to,
                },
                page: req,
            })
            .await?;
        Ok(paged(p, req, audit_view))
    }
}
