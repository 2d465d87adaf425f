//! The console's calls into the service layer that change something, always made as the
//! session's principal: the service checks the permission and writes the audit log.

use tickwork_core::TriggerType;
use tickwork_protocol::api::{
    AlarmChannelInput, AlarmChannelView, AlarmTestResult, GroupInput, GroupTokenView, GroupView,
    JobInput, JobView, JobsActionInput, JobsActionResult, PasswordInput, RunView, ScriptInput,
    ScriptVersionView, TokenCreated, TokenInput, TokenView, TriggerInput, UserInput,
    UserUpdateInput, UserView,
};

use super::auth::Principal;
use crate::{Error, Service};

/// The service layer as one signed-in person uses it.
pub(super) struct Ops<'a> {
    pub a: &'a Service,
    pub p: &'a Principal,
}

impl Ops<'_> {
    pub(super) async fn job_create(&self, input: JobInput) -> Result<JobView, Error> {
        self.a.jobs().create(self.p, input).await
    }

    pub(super) async fn job_update(&self, id: i64, input: JobInput) -> Result<JobView, Error> {
        self.a.jobs().update(self.p, id, input).await
    }

    pub(super) async fn job_delete(&self, id: i64) -> Result<(), Error> {
        self.a.jobs().delete(self.p, id).await
    }

    pub(super) async fn job_start(&self, id: i64) -> Result<JobView, Error> {
        self.a.jobs().start(self.p, id).await
    }

    pub(super) async fn job_stop(&self, id: i64) -> Result<JobView, Error> {
        self.a.jobs().stop(self.p, id).await
    }

    pub(super) async fn job_trigger(&self, id: i64, input: TriggerInput) -> Result<RunView, Error> {
        self.a
            .jobs()
            .trigger(self.p, id, input, TriggerType::Manual)
            .await
    }

    /// An action on the ticked jobs; runs it triggers are manual ones.
    pub(super) async fn jobs_act(&self, input: JobsActionInput) -> Result<JobsActionResult, Error> {
        self.a
            .jobs()
            .act_many(self.p, input, TriggerType::Manual)
            .await
    }

    pub(super) async fn script_save(
        &self,
        job_id: i64,
        input: ScriptInput,
    ) -> Result<ScriptVersionView, Error> {
        self.a.scripts().save(self.p, job_id, input).await
    }

    pub(super) async fn script_restore(
        &self,
        job_id: i64,
        version: i64,
    ) -> Result<ScriptVersionView, Error> {
        self.a.scripts().restore(self.p, job_id, version).await
    }

    pub(super) async fn run_kill(&self, id: i64) -> Result<RunView, Error> {
        self.a.runs().kill(self.p, id).await
    }

    pub(super) async fn runs_clear(&self, before: i64, job_id: Option<i64>) -> Result<u64, Error> {
        self.a.runs().clear(self.p, before, job_id, None).await
    }

    pub(super) async fn group_create(&self, input: GroupInput) -> Result<GroupView, Error> {
        self.a.groups().create(self.p, input).await
    }

    pub(super) async fn group_update(
        &self,
        id: i64,
        input: GroupInput,
    ) -> Result<GroupView, Error> {
        self.a.groups().update(self.p, id, input).await
    }

    pub(super) async fn group_delete(&self, id: i64) -> Result<(), Error> {
        self.a.groups().delete(self.p, id).await
    }

    pub(super) async fn group_rotate_token(&self, id: i64) -> Result<GroupTokenView, Error> {
        self.a.groups().rotate_token(self.p, id).await
    }

    pub(super) async fn user_create(&self, input: UserInput) -> Result<UserView, Error> {
        self.a.users().create(self.p, input).await
    }

    pub(super) async fn user_update(
        &self,
        id: i64,
        input: UserUpdateInput,
    ) -> Result<UserView, Error> {
        self.a.users().update(self.p, id, input).await
    }

    pub(super) async fn user_delete(&self, id: i64) -> Result<(), Error> {
        self.a.users().delete(self.p, id).await
    }

    pub(super) async fn user_set_password(
        &self,
        id: i64,
        input: PasswordInput,
    ) -> Result<(), Error> {
        self.a.users().set_password(self.p, id, input).await
    }

    pub(super) async fn token_create(&self, input: TokenInput) -> Result<TokenCreated, Error> {
        self.a.tokens().create(self.p, input).await
    }

    pub(super) async fn token_revoke(&self, id: i64) -> Result<TokenView, Error> {
        self.a.tokens().revoke(self.p, id).await
    }

    pub(super) async fn alarm_channel_create(
        &self,
        input: AlarmChannelInput,
    ) -> Result<AlarmChannelView, Error> {
        self.a.alarms().channel_create(self.p, input).await
    }

    pub(super) async fn alarm_channel_update(
        &self,
        id: i64,
        input: AlarmChannelInput,
    ) -> Result<AlarmChannelView, Error> {
        self.a.alarms().channel_update(self.p, id, input).await
    }

    pub(super) async fn alarm_channel_delete(&self, id: i64) -> Result<(), Error> {
        self.a.alarms().channel_delete(self.p, id).await
    }

    pub(super) async fn alarm_channel_test(&self, id: i64) -> Result<AlarmTestResult, Error> {
        self.a.alarms().channel_test(self.p, id).await
    }
}
