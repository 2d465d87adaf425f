//! The REST handlers of workflows and their instances: each translates one request into one
//! call of the service's [`crate::service::Workflows`].

use serde::Deserialize;
use tickwork_core::TriggerType;
use tickwork_protocol::workflows::{
    InstanceSummary, InstanceView, WorkflowInput, WorkflowRunInput, WorkflowView,
};

use super::ApiError;
use super::extract::{ApiJson, ApiJsonOr, ApiQuery, Caller, Id, Names};
use crate::{Error, Service};
use axum::extract::State;

type ApiResult<T> = Result<axum::Json<T>, ApiError>;

fn ok<T>(v: T) -> ApiResult<T> {
    Ok(axum::Json(v))
}

/// The one text segment of `/workflows/{workflow}...`.
fn key(Names(names): Names) -> String {
    names.into_iter().next().unwrap_or_default()
}

/// The instance id and node key of `/workflow-instances/{id}/nodes/{node}/...`.
fn instance_and_node(Names(names): Names) -> Result<(i64, String), ApiError> {
    match <[String; 2]>::try_from(names) {
        Ok([id, node]) => match id.parse::<i64>() {
            Ok(id) if id > 0 => Ok((id, node)),
            _ => Err(Error::invalid_field("id", format!("{id:?} is not a positive id")).into()),
        },
        Err(_) => Err(Error::Internal("the route does not have an id and a node".into()).into()),
    }
}

pub(super) async fn workflows_list(
    State(a): State<Service>,
    Caller(_): Caller,
) -> ApiResult<Vec<WorkflowView>> {
    ok(a.workflows().list().await?)
}

pub(super) async fn workflow_create(
    State(a): State<Service>,
    Caller(p): Caller,
    ApiJson(input): ApiJson<WorkflowInput>,
) -> ApiResult<WorkflowView> {
    ok(a.workflows().create(&p, input).await?)
}

pub(super) async fn workflow_get(
    State(a): State<Service>,
    Caller(_): Caller,
    names: Names,
) -> ApiResult<WorkflowView> {
    ok(a.workflows().get(&key(names)).await?)
}

pub(super) async fn workflow_update(
    State(a): State<Service>,
    Caller(p): Caller,
    names: Names,
    ApiJson(input): ApiJson<WorkflowInput>,
) -> ApiResult<WorkflowView> {
    ok(a.workflows().update(&p, &key(names), input).await?)
}

pub(super) async fn workflow_delete(
    State(a): State<Service>,
    Caller(p): Caller,
    names: Names,
) -> ApiResult<WorkflowView> {
    ok(a.workflows().delete(&p, &key(names)).await?)
}

pub(super) async fn workflow_run(
    State(a): State<Service>,
    Caller(p): Caller,
    names: Names,
    ApiJsonOr(input): ApiJsonOr<WorkflowRunInput>,
) -> ApiResult<InstanceView> {
    let k = key(names);
    ok(a.workflows()
        .run(&p, &k, &input.params, TriggerType::Api)
        .await?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct InstancesParams {
    limit: Option<u64>,
}

pub(super) async fn workflow_instances(
    State(a): State<Service>,
    Caller(_): Caller,
    names: Names,
    ApiQuery(q): ApiQuery<InstancesParams>,
) -> ApiResult<Vec<InstanceSummary>> {
    ok(a.workflows().instances(&key(names), q.limit).await?)
}

pub(super) async fn workflow_instance_get(
    State(a): State<Service>,
    Caller(_): Caller,
    Id(id): Id,
) -> ApiResult<InstanceView> {
    ok(a.workflows().instance(id).await?)
}

pub(super) async fn workflow_instance_stop(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(id): Id,
) -> ApiResult<InstanceView> {
    ok(a.workflows().stop(&p, id).await?)
}

pub(super) async fn workflow_instance_resume(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(id): Id,
) -> ApiResult<InstanceView> {
    ok(a.workflows().resume(&p, id).await?)
}

pub(super) async fn workflow_node_mark_succeeded(
    State(a): State<Service>,
    Caller(p): Caller,
    names: Names,
) -> ApiResult<InstanceView> {
    let (id, node) = instance_and_node(names)?;
    ok(a.workflows().mark_succeeded(&p, id, &node).await?)
}

pub(super) async fn workflow_node_rerun(
    State(a): State<Service>,
    Caller(p): Caller,
    names: Names,
) -> ApiResult<InstanceView> {
    let (id, node) = instance_and_node(names)?;
    ok(a.workflows().rerun(&p, id, &node).await?)
}
