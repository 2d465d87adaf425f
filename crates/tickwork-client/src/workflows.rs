//! Workflows and their instances (`/workflows`, `/workflow-instances`), borrowed from a
//! [`crate::Client`]: `client.workflows().run("nightly-etl", "")`.

use tickwork_protocol::workflows::{
    InstanceSummary, InstanceView, WorkflowInput, WorkflowRunInput, WorkflowView,
};

use crate::{Error, Transport, segment};

/// Workflows, borrowed from a [`crate::Client`].
#[derive(Clone, Copy)]
pub struct Workflows<'a> {
    pub(crate) api: &'a Transport,
}

impl Workflows<'_> {
    /// Every workflow, by key.
    pub async fn list(&self) -> Result<Vec<WorkflowView>, Error> {
        self.api.get("/workflows").await
    }

    pub async fn get(&self, key: &str) -> Result<WorkflowView, Error> {
        self.api.get(&format!("/workflows/{}", segment(key))).await
    }

    pub async fn create(&self, input: &WorkflowInput) -> Result<WorkflowView, Error> {
        self.api.post("/workflows", input).await
    }

    /// Rewrites the workflow `input.key`; running instances keep their DAG.
    pub async fn update(&self, input: &WorkflowInput) -> Result<WorkflowView, Error> {
        let path = format!("/workflows/{}", segment(&input.key));
        self.api
            .call(reqwest::Method::PUT, &path, Some(input))
            .await
    }

    /// Deletes a workflow with its ended instances; refused while one is live.
    pub async fn delete(&self, key: &str) -> Result<WorkflowView, Error> {
        let path = format!("/workflows/{}", segment(key));
        self.api
            .call(reqwest::Method::DELETE, &path, None::<&()>)
            .await
    }

    /// Runs a workflow now with `params` (the context's `params`).
    pub async fn run(&self, key: &str, params: &str) -> Result<InstanceView, Error> {
        let body = WorkflowRunInput {
            params: params.to_owned(),
        };
        self.api
            .post(&format!("/workflows/{}/run", segment(key)), &body)
            .await
    }

    /// The workflow's newest instances, at most `limit` (50 when `None`).
    pub async fn instances(
        &self,
        key: &str,
        limit: Option<u64>,
    ) -> Result<Vec<InstanceSummary>, Error> {
        let limit = limit.map(|l| format!("?limit={l}")).unwrap_or_default();
        self.api
            .get(&format!("/workflows/{}/instances{limit}", segment(key)))
            .await
    }

    /// One instance, node by node.
    pub async fn instance(&self, id: i64) -> Result<InstanceView, Error> {
        self.api.get(&format!("/workflow-instances/{id}")).await
    }

    pub async fn stop(&self, id: i64) -> Result<InstanceView, Error> {
        self.api
            .post(&format!("/workflow-instances/{id}/stop"), &())
            .await
    }

    /// Resumes a failed or stopped instance: succeeded nodes kept, the others run again.
    pub async fn resume(&self, id: i64) -> Result<InstanceView, Error> {
        self.api
            .post(&format!("/workflow-instances/{id}/resume"), &())
            .await
    }

    pub async fn mark_succeeded(&self, id: i64, node: &str) -> Result<InstanceView, Error> {
        let path = format!(
            "/workflow-instances/{id}/nodes/{}/mark-succeeded",
            segment(node)
        );
        self.api.post(&path, &()).await
    }

    pub async fn rerun(&self, id: i64, node: &str) -> Result<InstanceView, Error> {
        let path = format!("/workflow-instances/{id}/nodes/{}/rerun", segment(node));
        self.api.post(&path, &()).await
    }
}
