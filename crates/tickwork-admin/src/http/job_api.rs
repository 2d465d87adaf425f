//! XXL-JOB 3.5's job API (`POST /api/addJob`, `updateJob`, `removeJob`, `startJob`,
//! `stopJob`, `triggerJob`, also under `/xxl-job-admin`): scripts and tools written for
//! XXL-JOB manage the jobs of their executor group with its app name and token. Each call is
//! translated into the service's operation and answered in XXL-JOB's envelope; the checks run
//! in XXL-JOB's order: method, body, headers, token, rate limit.

use std::str::FromStr;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri, header};
use axum::response::{IntoResponse, Response};
use tickwork_core::{BlockStrategy, GlueType, MisfireStrategy, RouteStrategy, ScheduleType};
use tickwork_core::{TriggerType, job::JobSpec};
use tickwork_protocol::api::{JobInput, TriggerInput};
use tickwork_protocol::job_api::{JobCall, JobFields, JobId, JobTrigger};
use tickwork_protocol::{ACCESS_TOKEN_HEADER, APP_NAME_HEADER, Envelope, msg};

use super::executor::{header, read_body};
use crate::{Error, Principal, Service};

/// Largest body of a job API call.
const BODY_LIMIT: usize = 1024 * 1024;

/// The job API's paths, under `/api` (and `/xxl-job-admin/api`).
pub(super) const PATHS: [&str; 6] = [
    "addJob",
    "updateJob",
    "removeJob",
    "startJob",
    "stopJob",
    "triggerJob",
];

pub(super) async fn job_api(
    State(service): State<Service>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let name = uri.path().rsplit('/').next().unwrap_or_default();
    let env = match JobCall::from_path(name) {
        Some(call) => job_call(&service, call, &method, &headers, body).await,
        None => Envelope::fail(msg::uri_not_found(uri.path())),
    };
    (
        [(header::CONTENT_TYPE, "application/json;charset=UTF-8")],
        tickwork_protocol::encode(&env),
    )
        .into_response()
}

async fn job_call(
    service: &Service,
    call: JobCall,
    method: &Method,
    headers: &HeaderMap,
    body: Body,
) -> Envelope<String> {
    if method != Method::POST {
        return Envelope::fail(msg::METHOD_NOT_SUPPORTED);
    }
    let body = match read_body(body, BODY_LIMIT).await {
        Ok(b) => b,
        Err(e) => return Envelope::fail(e),
    };
    let (token, app) = (
        header(headers, ACCESS_TOKEN_HEADER),
        header(headers, APP_NAME_HEADER),
    );
    if token.is_empty() || app.is_empty() {
        return Envelope::fail(msg::TOKEN_OR_APP_EMPTY);
    }
    let answer = match service.app_auth().authenticate(app, token).await {
        Ok(by) => operate(service, &by, call, &body).await,
        Err(e) => Err(e),
    };
    match answer {
        Ok(data) => Envelope {
            payload: data,
            ..Envelope::success()
        },
        Err(e) => Envelope {
            code: e.code().envelope_code(),
            msg: Some(failure(&e)),
            payload: None,
        },
    }
}

/// Runs `call` as `by`: the answer's `data` (the new job's id for `addJob`).
async fn operate(
    service: &Service,
    by: &Principal,
    call: JobCall,
    body: &[u8],
) -> Result<Option<String>, Error> {
    let jobs = service.jobs();
    match call {
        JobCall::Add => {
            let f: JobFields = decode(body)?;
            let group_id = f.job_group;
            let spec = spec_of(&f, JobSpec::blank(group_id))?;
            let input = JobInput {
                key: None,
                spec,
                start: false,
            };
            Ok(Some(jobs.create(by, input).await?.id.to_string()))
        }
        JobCall::Update => {
            let f: JobFields = decode(body)?;
            let old = jobs.get(f.id).await?;
            // XXL-JOB's update names no group and no children: the job keeps its own, and
            // the fields XXL-JOB does not know (time zone, priority, ...).
            let spec = spec_of(&f, old.spec)?;
            let input = JobInput {
                key: Some(old.key),
                spec,
                start: false,
            };
            jobs.update(by, f.id, input).await?;
            Ok(None)
        }
        JobCall::Remove => {
            jobs.delete(by, decode::<JobId>(body)?.id).await?;
            Ok(None)
        }
        JobCall::Start => {
            jobs.start(by, decode::<JobId>(body)?.id).await?;
            Ok(None)
        }
        JobCall::Stop => {
            jobs.stop(by, decode::<JobId>(body)?.id).await?;
            Ok(None)
        }
        JobCall::Trigger => {
            let t: JobTrigger = decode(body)?;
            let input = TriggerInput {
                params: t.executor_param,
                address: one_address(t.address_list.as_deref())?,
            };
            jobs.trigger(by, t.id, input, TriggerType::Api).await?;
            Ok(None)
        }
    }
}

fn decode<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Error> {
    tickwork_protocol::decode(body).map_err(|e| Error::invalid(e.to_string()))
}

/// `base` with the fields XXL-JOB's job API sets. An empty enum name keeps `base`'s value.
fn spec_of(f: &JobFields, base: JobSpec) -> Result<JobSpec, Error> {
    fn named<T: FromStr<Err = tickwork_core::Error>>(
        field: &str,
        text: &str,
        keep: T,
    ) -> Result<T, Error> {
        match text.trim() {
            "" => Ok(keep),
            t => T::from_str(t).map_err(|e| Error::invalid_field(field, e)),
        }
    }
    Ok(JobSpec {
        description: f.name.clone(),
        owner: f.author.clone(),
        alarm_channels: f.alarm_email.clone(),
        schedule_type: named::<ScheduleType>("scheduleType", &f.schedule_type, base.schedule_type)?,
        schedule_conf: f.schedule_conf.clone(),
        misfire_strategy: named::<MisfireStrategy>(
            "misfireStrategy",
            &f.misfire_strategy,
            base.misfire_strategy,
        )?,
        route_strategy: named::<RouteStrategy>(
            "executorRouteStrategy",
            &f.executor_route_strategy,
            base.route_strategy,
        )?,
        handler: f.executor_handler.clone(),
        params: f.executor_param.clone(),
        block_strategy: named::<BlockStrategy>(
            "executorBlockStrategy",
            &f.executor_block_strategy,
            base.block_strategy,
        )?,
        timeout_s: f.executor_timeout,
        retry_count: f.executor_fail_retry_count,
        glue_type: named::<GlueType>("glueType", &f.glue_type, base.glue_type)?,
        glue_source: f.glue_source.clone(),
        ..base
    })
}

/// XXL-JOB's `addressList` (comma-separated) as the one executor a run may be sent to here.
fn one_address(list: Option<&str>) -> Result<Option<String>, Error> {
    let mut addresses = list
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty());
    let first = addresses.next().map(str::to_owned);
    if addresses.next().is_some() {
        return Err(Error::invalid_field(
            "addressList",
            "name one executor address; a run goes to one executor here",
        ));
    }
    Ok(first)
}

/// The envelope's message of a failed call: the error's text, or for an internal failure
/// (logged) a request to try again.
fn failure(e: &Error) -> String {
    e.client_message("job api")
        .unwrap_or_else(|| "the admin could not handle this request; try again".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xxl_fields_become_the_job_and_empty_names_keep_what_was() {
        let f = JobFields {
            name: "nightly".into(),
            author: "ops".into(),
            schedule_type: "FIX_RATE".into(),
            schedule_conf: "30".into(),
            executor_route_strategy: "ROUND".into(),
            executor_handler: "demo".into(),
            executor_timeout: 5,
            executor_fail_retry_count: 2,
            ..JobFields::default()
        };
        let base = JobSpec {
            priority: 7,
            time_zone: "Asia/Shanghai".into(),
            ..JobSpec::blank(3)
        };
        let spec = spec_of(&f, base).expect("maps");
        assert_eq!(spec.group_id, 3);
        assert_eq!(spec.description, "nightly");
        assert_eq!(spec.schedule_type, ScheduleType::FixRate);
        assert_eq!(spec.route_strategy, RouteStrategy::Round);
        assert_eq!(spec.block_strategy, BlockStrategy::SerialExecution);
        assert_eq!((spec.timeout_s, spec.retry_count), (5, 2));
        assert_eq!(
            (spec.priority, spec.time_zone.as_str()),
            (7, "Asia/Shanghai")
        );
    }

    #[test]
    fn unknown_names_are_refused_by_field() {
        for (f, field) in [
            (
                JobFields {
                    schedule_type: "SOMETIMES".into(),
                    ..JobFields::default()
                },
                "scheduleType",
            ),
            (
                JobFields {
                    executor_route_strategy: "NEAREST".into(),
                    ..JobFields::default()
                },
                "executorRouteStrategy",
            ),
            (
                JobFields {
                    glue_type: "GLUE_COBOL".into(),
                    ..JobFields::default()
                },
                "glueType",
            ),
        ] {
            let e = spec_of(&f, JobSpec::blank(1)).expect_err("refused");
            assert_eq!(e.field(), Some(field), "{e}");
        }
    }

    #[test]
    fn an_address_list_names_at_most_one_executor() {
        for (list, want) in [
            (None, Ok(None)),
            (Some(""), Ok(None)),
            (Some(" http://h:1/ "), Ok(Some("http://h:1/"))),
            (Some("http://h:1/,"), Ok(Some("http://h:1/"))),
            (Some("http://h:1/,http://h:2/"), Err("addressList")),
        ] {
            let got = one_address(list);
            match want {
                Ok(a) => assert_eq!(got.expect("one").as_deref(), a, "{list:?}"),
                Err(field) => assert_eq!(got.expect_err("refused").field(), Some(field)),
            }
        }
    }
}
