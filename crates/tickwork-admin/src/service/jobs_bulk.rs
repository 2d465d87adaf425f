//! Many jobs at once. Created (`POST /jobs/bulk`, `tickwork job import`): every job is
//! checked first, as `POST /jobs` checks one, and every wrong one is reported by its index and
//! field; then all are written in one transaction with one audit record each, or none is.
//! Started, stopped, triggered or deleted (`POST /jobs/actions`, the console's ticked rows):
//! each job by its own operation, so with its own permission check and audit record, and
//! each refusal reported with the job it concerns.

use std::collections::{HashMap, HashSet};

use tickwork_core::TriggerType;
use tickwork_protocol::api::{
    ItemError, JOBS_ACTION_MAX, JOBS_BULK_MAX, JobAction, JobCreated, JobInput, JobRefused,
    JobsActionInput, JobsActionResult, JobsBulkCreated, TriggerInput,
};
use tickwork_store::{Job, JobCreate, JobStatus};

use super::Jobs;
use super::job_writer::create_record;
use super::jobs::Lookups;
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
    /// once), in their order, each as its single operation does it: the caller's permission
    /// on the job's group is checked and the audit record written per job. A job refused
    /// (another group's, gone, a schedule that cannot start) does not stop the others; each
    /// is reported with the code and message its own call would have answered. `trigger_type`
    /// is what triggered runs record (the console's manual, the API's api).
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
        let mut result = JobsActionResult {
            action: input.action,
            done: Vec::new(),
            refused: Vec::new(),
        };
        for id in input.ids.into_iter().filter(|id| seen.insert(*id)) {
            let outcome = match input.action {
                JobAction::Start => self.start(by, id).await.map(drop),
                JobAction::Stop => self.stop(by, id).await.map(drop),
                JobAction::Trigger => self
                    .trigger(by, id, TriggerInput::default(), trigger_type)
                    .await
                    .map(drop),
                JobAction::Delete => self.delete(by, id).await,
            };
            match outcome {
                Ok(()) => result.done.push(id),
                Err(e) => result.refused.push(JobRefused {
                    id,
                    code: e.code().as_str().to_owned(),
                    // An internal failure's cause is logged, never shown.
                    message: e
                        .client_message("jobs action")
                        .unwrap_or_else(|| "internal error (see the admin's log)".to_owned()),
                }),
            }
        }
        Ok(result)
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
