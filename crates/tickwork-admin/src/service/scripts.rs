//! Job scripts (GLUE sources) and their versions: save, list, read one, compare two, restore.

use tickwork_core::GlueType;
use tickwork_protocol::api::{
    JobInput, ScriptDiffLine, ScriptDiffView, ScriptInput, ScriptVersionView,
};
use tickwork_store::{ScriptVersion, ScriptVersionKey};

use super::audit::Target;
use super::{Scripts, has_source, invalid, job_view};
use crate::Error;
use crate::auth::Principal;
use crate::diff::{DiffLine, added_and_removed, diff_lines};

impl Scripts<'_> {
    /// Every saved version of a job's script, newest first.
    pub async fn versions(self, job_id: i64) -> Result<Vec<ScriptVersionView>, Error> {
        self.inner.store.job_get(job_id).await?;
        Ok(self
            .inner
            .store
            .script_versions_list(job_id)
            .await?
            .into_iter()
            .map(script_view)
            .collect())
    }

    /// [`Scripts::diff`] as the REST API answers it, with the count of each side's lines.
    pub async fn diff_view(self, job_id: i64, from: i64, to: i64) -> Result<ScriptDiffView, Error> {
        let (from, to, lines) = self.diff(job_id, from, to).await?;
        let (added, removed) = added_and_removed(&lines);
        let lines = lines
            .into_iter()
            .map(|l| ScriptDiffLine {
                change: l.change.name().to_owned(),
                old_no: l.old_no.map(|n| n as u64),
                new_no: l.new_no.map(|n| n as u64),
                text: l.text,
            })
            .collect();
        Ok(ScriptDiffView {
            from,
            to,
            added: added as u64,
            removed: removed as u64,
            lines,
        })
    }

    /// One saved version of a job's script; an unknown job or version is `NotFound`.
    pub async fn version(self, job_id: i64, version: i64) -> Result<ScriptVersionView, Error> {
        self.inner.store.job_get(job_id).await?;
        self.version_of(job_id, version).await.map(script_view)
    }

    /// Two versions of a job's script and the line diff from the first to the second (either
    /// may be the newer one). Changes nothing.
    pub async fn diff(
        self,
        job_id: i64,
        from: i64,
        to: i64,
    ) -> Result<(ScriptVersionView, ScriptVersionView, Vec<DiffLine>), Error> {
        self.inner.store.job_get(job_id).await?;
        let (old, new) =
            tokio::try_join!(self.version_of(job_id, from), self.version_of(job_id, to))?;
        let lines = diff_lines(&old.source, &new.source);
        Ok((script_view(old), script_view(new), lines))
    }

    async fn version_of(self, job_id: i64, version: i64) -> Result<ScriptVersion, Error> {
        match self
            .inner
            .store
            .script_version_get(ScriptVersionKey { job_id, version })
            .await
        {
            Err(tickwork_store::Error::NotFound { .. }) => Err(Error::NotFound(format!(
                "job {job_id} has no script version {version}"
            ))),
            other => Ok(other?),
        }
    }

    /// Saves a new version of a script job's source (the job runs it from its next run on).
    pub async fn save(
        self,
        by: &Principal,
        job_id: i64,
        input: ScriptInput,
    ) -> Result<ScriptVersionView, Error> {
        let comment = input.comment.trim();
        if comment.chars().count() > 255 {
            return Err(invalid("comment", "must be at most 255 characters"));
        }
        let comment = if comment.is_empty() { "saved" } else { comment };
        self.script_write(
            by,
            job_id,
            input.glue_type,
            input.source,
            comment,
            "script.save",
        )
        .await
    }

    /// Makes an old version of a job's script the current one, as a new version.
    pub async fn restore(
        self,
        by: &Principal,
        job_id: i64,
        version: i64,
    ) -> Result<ScriptVersionView, Error> {
        self.inner.jobs().job_for_change(by, job_id).await?;
        let old = self.version_of(job_id, version).await?;
        let comment = format!("restored version {version}");
        self.script_write(
            by,
            job_id,
            Some(old.glue_type),
            old.source,
            &comment,
            "script.restore",
        )
        .await
    }

    async fn script_write(
        self,
        by: &Principal,
        job_id: i64,
        glue_type: Option<GlueType>,
        source: String,
        comment: &str,
        action: &str,
    ) -> Result<ScriptVersionView, Error> {
        let job = self.inner.jobs().job_for_change(by, job_id).await?;
        let glue_type = glue_type.unwrap_or(job.spec.glue_type);
        if !has_source(glue_type) {
            return Err(invalid(
                "glue_type",
                format!("{glue_type} has no source to edit; its code is the executor's handler"),
            ));
        }
        let before = self
            .inner
            .store
            .script_versions_list(job_id)
            .await?
            .into_iter()
            .next()
            .map(script_view);
        let mut input = JobInput::from(&job_view(job.clone()));
        input.spec.glue_type = glue_type;
        input.spec.glue_source = source;
        let (_, new) = self.inner.jobs().job_write(job, input, by, comment).await?;
        let mut versions = self.inner.store.script_versions_list(job_id).await?;
        let current = match versions.first() {
            // job_write recorded a version unless the script did not change: record it anyway,
            // so that every save shows in the history.
            Some(v) if before.as_ref().is_none_or(|b| b.version != v.version) => versions.remove(0),
            _ => {
                let job = self.inner.store.job_get(new.id).await?;
                self.inner
                    .jobs()
                    .script_version_record(by, &job, comment)
                    .await?
            }
        };
        let after = script_view(current);
        self.inner
            .audit(
                by,
                action,
                Target::Job(job_id),
                before.as_ref().map(script_audit).as_ref(),
                Some(&script_audit(&after)),
            )
            .await?;
        Ok(after)
    }
}

/// The API view of a script version.
fn script_view(v: ScriptVersion) -> ScriptVersionView {
    ScriptVersionView {
        version: v.version,
        glue_type: v.glue_type,
        source: v.source,
        comment: v.comment,
        author: v.author,
        created_at: v.created_at,
    }
}

/// What the audit log keeps of a script version (the source, not the whole job).
fn script_audit(v: &ScriptVersionView) -> serde_json::Value {
    serde_json::json!({
        "version": v.version,
        "glue_type": v.glue_type,
        "source": v.source,
        "comment": v.comment,
    })
}
