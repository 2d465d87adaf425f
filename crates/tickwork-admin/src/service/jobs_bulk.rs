//! Many jobs created at once (`POST /jobs/bulk`, `tickwork job import`): every job is checked
//! first, as `POST /jobs` checks one, and every wrong one is reported by its index and field;
//! then all are written in one transaction with one audit record each, or none is.

use std::collections::HashMap;

use tickwork_protocol::api::{ItemError, JOBS_BULK_MAX, JobCreated, JobInput, JobsBulkCreated};
use tickwork_store::{Job, JobCreate, JobStatus};

use super::Jobs;
use super::job_writer::create_record;
use super::jobs::Lookups;
use crate::Error;
use crate::auth::Principal;

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
