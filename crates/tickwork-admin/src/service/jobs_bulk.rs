//! Many jobs at once. Created (`POST /jobs/bulk`, `tickwork job import`): every job is
//! checked first, as `POST /jobs` checks one, and every wrong one is reported by its index and
//! field; then all are written in one transaction with one audit record each, or none is.
//! Started, stopped, triggered or deleted (`POST /jobs/actions`, the console's ticked rows):
//! each job checked as its own operation checks it (permission, schedule), each refusal
//! reported with the job it concerns; started, stopped or deleted jobs are then written in
//! one transaction with an audit record each, so that a thousand of them wait once for the
//! database's write lock, not a thousand times behind the pipeline's writes.

use std::collections::{HashMap, HashSet};

use tickwork_core::TriggerType;
use tickwork_protocol::api::{
    ItemError, JOBS_ACTION_MAX, JOBS_BULK_MAX, JobAction, JobCreated, JobInput, JobRefused,
    JobsActionInput, JobsActionResult, JobsBulkCreated, TriggerInput,
};
use tickwork_store::{Job, JobCreate, JobStatus, JobsStatusChange};

use super::audit::{Target, audit_entry};
use super::job_writer::{create_record, status_record};
use super::jobs::Lookups;
use super::{Jobs, job_view};
use crate::Error;
use crate::auth::{Principal, Role};

impl Jobs<'_> {
    /// Creates `inputs` (1 to [`JOBS_BULK_MAX`] jobs) in groups the caller may change, all or
    /// none: wrong jobs are answered together (`Error::InvalidItems`), a key already taken on
    /// the database is a conflict naming it.
    pub async fn create_many(
        self,
        by: &Principal,
        inputs: Vec<JobInput>,
    ) -> Result<JobsBulkCreated, Error> {
        if inputs.is_empty() {
            return Err(Error::invalid_field("jobs", "give at least one job"));
        }
        if inputs.len() > JOBS_BULK_MAX {
            return Err(Error::invalid_field(
                "jobs",
                format!(
                    "{} jobs are more than the {JOBS_BULK_MAX} one request may create",
                    inputs.len()
                ),
            ));
        }
        // The permission of creating each job, as `POST /jobs` asks it, before any check
        // that reads the store.
        for (index, input) in inputs.iter().enumerate() {
            by.require_group(input.spec.group_id)
                .map_err(|e| Error::Forbidden(format!("jobs[{index}]: {e}")))?;
        }
        let creates = self.check_all(by, &inputs).await?;
        let audit = |_: usize, job: &Job| create_record(by, job);
        let jobs = match self.inner.store.jobs_create(creates, &audit).await {
            Ok(jobs) => jobs,
            Err(tickwork_store::Error::Invalid(m)) => {
                // A remembered group deleted since: check again without remembering, so
                // that the answer names the jobs of that group.
                if let Ok(mut known) = self.inner.known_groups.lock() {
                    for input in &inputs {
                        known.remove(&input.spec.group_id);
                    }
                }
                self.check_all(by, &inputs).await?;
                return Err(Error::invalid(m));
            }
            Err(e) => return Err(e.into()),
        };
        if jobs.iter().any(|j| j.status == JobStatus::Running) {
            self.inner.pipeline.wake();
        }
        Ok(JobsBulkCreated {
            created: jobs.len() as u64,
            jobs: jobs
                .into_iter()
                .map(|j| JobCreated {
                    id: j.id,
                    key: j.key,
                })
                .collect(),
        })
    }

    /// `input.action` on each job of `input.ids` (1 to [`JOBS_ACTION_MAX`], a repeated id
    /// once), each checked as its single operation checks it: the caller's permission on the
    /// job's group, a schedule that can start. A job refused (another group's, gone, a
    /// schedule that cannot start) does not stop the others; each is reported with the code
    /// and message its own call would have answered. Started, stopped and deleted jobs are
    /// written together with their audit records; triggered ones one by one (each is a run
    /// of its own). `trigger_type` is what triggered runs record (the console's manual, the
    /// API's api).
    pub async fn act_many(
        self,
        by: &Principal,
        input: JobsActionInput,
        trigger_type: TriggerType,
    ) -> Result<JobsActionResult, Error> {
        // A viewer may change no job at all: refused as a whole, as every single call is.
        if by.role == Role::Viewer {
            return Err(Error::Forbidden(format!(
                "{} is a viewer; a viewer may change no job",
                by.username
            )));
        }
        if input.ids.is_empty() {
            return Err(Error::invalid_field("ids", "name at least one job"));
        }
        if input.ids.len() > JOBS_ACTION_MAX {
            return Err(Error::invalid_field(
                "ids",
                format!(
                    "{} jobs are more than the {JOBS_ACTION_MAX} one request may name",
                    input.ids.len()
                ),
            ));
        }
        if let Some(bad) = input.ids.iter().find(|&&id| id <= 0) {
            return Err(Error::invalid_field(
                "ids",
                format!("{bad} is not a job id"),
            ));
        }
        let mut seen = HashSet::with_capacity(input.ids.len());
        let ids: Vec<i64> = input
            .ids
            .into_iter()
            .filter(|id| seen.insert(*id))
            .collect();
        let mut result = JobsActionResult {
            action: input.action,
            done: Vec::new(),
            refused: Vec::new(),
        };
        if input.action != JobAction::Trigger {
            self.act_together(by, input.action, ids, &mut result).await;
            return Ok(result);
        }
        for id in ids {
            let outcome = self
                .trigger(by, id, TriggerInput::default(), trigger_type)
                .await;
            match outcome {
                Ok(_) => result.done.push(id),
                Err(e) => result.refused.push(refusal(id, e)),
            }
        }
        Ok(result)
    }

    /// Starts, stops or deletes the jobs `ids` that pass their checks, in one store
    /// transaction, and tells the pipeline.
    async fn act_together(
        self,
        by: &Principal,
        action: JobAction,
        ids: Vec<i64>,
        result: &mut JobsActionResult,
    ) {
        let now = self.inner.clock.now_ms();
        let gone = |id: i64| Error::NotFound(format!("job {id} not found"));
        // Read in one go: on a busy database a thousand reads one after the other take
        // seconds.
        let mut found: HashMap<i64, Job> = match self.inner.store.jobs_get(&ids).await {
            Ok(jobs) => jobs.into_iter().map(|j| (j.id, j)).collect(),
            Err(e) => {
                tracing::warn!(error = ?e, "the jobs of a batch could not be read");
                let each = refusal(0, e.into());
                let refused = ids.into_iter().map(|id| JobRefused { id, ..each.clone() });
                result.refused.extend(refused);
                return;
            }
        };
        // Each job that passed, with its first fire when starting and its view before.
        let mut passed = Vec::with_capacity(ids.len());
        for id in ids {
            let job = match found.remove(&id) {
                Some(job) => by.require_group(job.spec.group_id).map(|()| job),
                None => Err(gone(id)),
            };
            let checked = match job {
                Ok(job) if action == JobAction::Start => {
                    Self::start_fire(&job, now).map(|next| (job, Some(next)))
                }
                Ok(job) => Ok((job, None)),
                Err(e) => Err(e),
            };
            match checked {
                Ok((job, next)) => passed.push((id, next, job_view(job))),
                Err(e) => result.refused.push(refusal(id, e)),
            }
        }
        if passed.is_empty() {
            return;
        }
        let name = match action {
            JobAction::Start => "job.start",
            JobAction::Stop => "job.stop",
            _ => "job.delete",
        };
        let store_error = |e: Error| tickwork_store::Error::Invalid(e.to_string());
        let written = if action == JobAction::Delete {
            let ids: Vec<i64> = passed.iter().map(|(id, _, _)| *id).collect();
            let audit = |_: usize, job: &Job| {
                let before = job_view(job.clone());
                audit_entry(by, name, Target::Job(job.id), Some(&before), None::<&()>)
                    .map_err(store_error)
            };
            self.inner.store.jobs_delete(&ids, &audit).await
        } else {
            let status = match action {
                JobAction::Start => JobStatus::Running,
                _ => JobStatus::Stopped,
            };
            let change = JobsStatusChange {
                status,
                jobs: passed.iter().map(|(id, next, _)| (*id, *next)).collect(),
                // The pipeline skips fires claimed before this instant, on its clock.
                now,
            };
            let audit = |index: usize, job: &Job| status_record(by, status, &passed[index].2, job);
            self.inner.store.jobs_set_status(change, &audit).await
        };
        match written {
            Ok(jobs) => {
                let done: HashSet<i64> = jobs.iter().map(|j| j.id).collect();
                for (id, _, _) in passed {
                    if done.contains(&id) {
                        self.inner.pipeline.forget_job(id);
                        result.done.push(id);
                    } else {
                        result.refused.push(refusal(id, gone(id)));
                    }
                }
                if action == JobAction::Start && !done.is_empty() {
                    self.inner.pipeline.wake();
                }
            }
            Err(e) => {
                tracing::warn!(error = ?e, action = name, "a batch of jobs could not be written");
                let each = refusal(0, e.into());
                for (id, _, _) in passed {
                    result.refused.push(JobRefused { id, ..each.clone() });
                }
            }
        }
    }

    /// Checks every job; what the store writes for them, or every wrong one.
    async fn check_all(self, by: &Principal, inputs: &[JobInput]) -> Result<Vec<JobCreate>, Error> {
        let now = self.inner.clock.now_ms();
        let mut seen = Lookups::default();
        let mut keys: HashMap<String, usize> = HashMap::with_capacity(inputs.len());
        let mut creates = Vec::with_capacity(inputs.len());
        let mut wrong = Vec::new();
        for (index, input) in inputs.iter().enumerate() {
            let checked = match self.job_spec(by, input, None, &mut seen).await {
                Ok(checked) => Self::new_key(input)
                    .and_then(|key| Self::job_create(by, input, key, checked, now)),
                Err(e) => Err(e),
            };
            match checked {
                Ok(create) => match keys.get(&create.job.key) {
                    Some(first) => wrong.push(ItemError {
                        index: index as u64,
                        field: Some("key".to_owned()),
                        message: format!("{:?} is also the key of jobs[{first}]", create.job.key),
                    }),
                    None => {
                        keys.insert(create.job.key.clone(), index);
                        creates.push(create);
                    }
                },
                Err(Error::Invalid { field, message }) => wrong.push(ItemError {
                    index: index as u64,
                    field,
                    message,
                }),
                // A child job of a group the caller may not change.
                Err(Error::Forbidden(m)) => {
                    return Err(Error::Forbidden(format!("jobs[{index}]: {m}")));
                }
                Err(e) => return Err(e),
            }
        }
        if wrong.is_empty() {
            Ok(creates)
        } else {
            Err(Error::InvalidItems {
                list: "jobs",
                items: wrong,
            })
        }
    }
}

/// How a job's refusal is reported: the code and message its own call would have answered.
fn refusal(id: i64, e: Error) -> JobRefused {
    let (code, message) = super::item_error(&e, "jobs action");
    JobRefused { id, code, message }
}
