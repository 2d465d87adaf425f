//! The executor API (`registry`, `registryRemove`, `callback`): executors drive the pipeline
//! with it. It takes no principal: an executor is known by its access token, a group's own
//! or the global one.

use std::collections::HashMap;

use subtle::ConstantTimeEq;
use tickwork_core::run::RunState;
use tickwork_protocol::{HandleCallbackParam, RegistryParam};
use tickwork_store::{Group, RegistryBeat, RegistryKey, RunComplete};
use tracing::{info, warn};

use super::Scheduler;
use crate::Error;

/// Who an executor call comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutorCaller {
    /// The admin's global token: acts for the groups without a token of their own (and for
    /// app names no group has yet).
    Global,
    /// A group's own token: acts for that group only.
    Group(i64),
}

/// An executor call's caller, with the groups as they were when its token was checked.
#[derive(Clone)]
pub struct ExecutorAuth {
    caller: ExecutorCaller,
    groups: Vec<Group>,
}

impl ExecutorAuth {
    pub fn caller(&self) -> ExecutorCaller {
        self.caller
    }

    /// The caller a group's executors must be: the group itself when it has a token.
    fn expected(group: Option<&Group>) -> ExecutorCaller {
        match group {
            Some(g) if g.access_token.is_some() => ExecutorCaller::Group(g.id),
            _ => ExecutorCaller::Global,
        }
    }

    /// Whether the caller's token is the one of `app_name`'s executors: the group's own, or
    /// the global one for a group without a token of its own (or an app no group has yet).
    pub fn stands_for_app(&self, app_name: &str) -> bool {
        self.check_app(app_name).is_ok()
    }

    /// Whether the caller stands for every group: the global token while no group has a token
    /// of its own. Then no result needs its run's group looked up.
    fn acts_for_every_group(&self) -> bool {
        self.caller == ExecutorCaller::Global
            && self.groups.iter().all(|g| g.access_token.is_none())
    }

    /// Whether the caller may report results of runs of `group_id`.
    fn may_act_for(&self, group_id: i64) -> bool {
        self.caller == Self::expected(self.groups.iter().find(|g| g.id == group_id))
    }

    /// `Forbidden` unless the caller may register or remove executors of `app_name`.
    fn check_app(&self, app_name: &str) -> Result<(), Error> {
        let group = self.groups.iter().find(|g| g.app_name == app_name);
        if self.caller == Self::expected(group) {
            Ok(())
        } else {
            Err(Error::Forbidden(format!(
                "registryKey: this access token may not register executors of {app_name:?}"
            )))
        }
    }
}

/// The executor API's operations on the pipeline.
#[derive(Clone)]
pub struct ExecutorApi {
    pub(super) scheduler: Scheduler,
}

impl ExecutorApi {
    /// Who an executor call comes from, by its access token (compared in constant time):
    /// a group's own token, or the global one. `None`: no such token.
    pub async fn executor_auth(&self, token: &str) -> Result<Option<ExecutorAuth>, Error> {
        let groups = self.scheduler.inner.store.groups_list().await?;
        let presented = token.as_bytes();
        let mut caller = None;
        // Every group's token is compared, so the time taken does not say which matched.
        for g in &groups {
            if let Some(t) = &g.access_token
                && bool::from(t.as_bytes().ct_eq(presented))
            {
                caller = Some(ExecutorCaller::Group(g.id));
            }
        }
        let global = self.scheduler.inner.config.access_token.as_bytes();
        if caller.is_none() && !presented.is_empty() && bool::from(global.ct_eq(presented)) {
            caller = Some(ExecutorCaller::Global);
        }
        Ok(caller.map(|caller| ExecutorAuth { caller, groups }))
    }

    /// `api/registry`: an executor's heartbeat. A `pull://` address is refused: only the
    /// admin that holds a pull executor's connection registers it.
    pub async fn registry_beat(&self, auth: &ExecutorAuth, p: RegistryParam) -> Result<(), Error> {
        if tickwork_protocol::pull::is_pull_address(p.registry_value.trim()) {
            return Err(Error::invalid_field(
                "registryValue",
                "a pull:// address is registered by the executor's own connection, not by a call",
            ));
        }
        self.register(auth, p).await
    }

    /// Records an executor's heartbeat under its address.
    pub(crate) async fn register(
        &self,
        auth: &ExecutorAuth,
        p: RegistryParam,
    ) -> Result<(), Error> {
        if !p.is_complete() {
            return Err(Error::invalid(tickwork_protocol::msg::ILLEGAL_ARGUMENT));
        }
        let beat = RegistryBeat {
            app_name: p.registry_key.trim().to_owned(),
            address: p.registry_value.trim().to_owned(),
            now: self.scheduler.inner.clock.now_ms(),
        };
        auth.check_app(&beat.app_name)?;
        self.scheduler
            .inner
            .store
            .registry_heartbeat(beat.clone())
            .await?;
        // A new executor becomes routable at its first beat, not after the cache expires.
        self.scheduler
            .inner
            .addresses
            .executor_seen(&beat.app_name, &beat.address);
        Ok(())
    }

    /// `api/registryRemove`: an executor is shutting down. Its address leaves every group's
    /// list at once, so no run goes to it from now on.
    pub async fn registry_remove(
        &self,
        auth: &ExecutorAuth,
        p: RegistryParam,
    ) -> Result<(), Error> {
        if !p.is_complete() {
            return Err(Error::invalid(tickwork_protocol::msg::ILLEGAL_ARGUMENT));
        }
        let key = RegistryKey {
            app_name: p.registry_key.trim().to_owned(),
            address: p.registry_value.trim().to_owned(),
        };
        auth.check_app(&key.app_name)?;
        self.scheduler
            .inner
            .store
            .registry_remove(key.clone())
            .await?;
        info!(app = %key.app_name, address = %key.address, "executor deregistered");
        self.scheduler
            .inner
            .addresses
            .executor_gone(&key.app_name, &key.address);
        Ok(())
    }

    /// `api/callback`: run results. Each is recorded before this returns, so an executor
    /// whose callback was answered with success never needs to resend it. A result for a run
    /// of a group the caller's token does not stand for is refused; the others are recorded,
    /// and the answer names the refused ones.
    pub async fn callbacks(
        &self,
        auth: &ExecutorAuth,
        items: Vec<HandleCallbackParam>,
    ) -> Result<(), Error> {
        let at = self.scheduler.inner.clock.now_ms();
        // Callbacks are the hot path of a busy admin: the runs' groups are read only when
        // the token could be refused for some of them.
        let owners: HashMap<i64, i64> = if auth.acts_for_every_group() {
            HashMap::new()
        } else {
            let ids: Vec<i64> = items.iter().map(|i| i.log_id).collect();
            self.scheduler
                .inner
                .store
                .runs_groups(&ids)
                .await?
                .into_iter()
                .map(|r| (r.run_id, r.group_id))
                .collect()
        };
        let mut batch = Vec::with_capacity(items.len());
        let mut refused = Vec::new();
        for item in items {
            // Unknown runs go on: the store ignores them, as it does repeated results.
            if let Some(&group_id) = owners.get(&item.log_id)
                && !auth.may_act_for(group_id)
            {
                warn!(
                    log_id = item.log_id,
                    group_id, "callback refused: the run belongs to another executor group"
                );
                refused.push(item.log_id);
                continue;
            }
            let Some(state) = RunState::from_handle_code(item.handle_code) else {
                warn!(
                    log_id = item.log_id,
                    code = item.handle_code,
                    "callback without a final code ignored"
                );
                continue;
            };
            batch.push(RunComplete {
                run_id: item.log_id,
                handle_code: item.handle_code,
                handle_msg: item.handle_msg,
                state,
                at,
            });
        }
        let sent = batch.len();
        let results = super::results::Results {
            scheduler: self.scheduler.clone(),
        };
        let done = results.record(batch).await?;
        if done < sent {
            info!(
                ignored = sent - done,
                "repeated or unknown callbacks ignored"
            );
        }
        if !refused.is_empty() {
            return Err(Error::Forbidden(format!(
                "logId: {refused:?} are runs of another executor group; this access token may \
                 not report them (the other results were recorded)"
            )));
        }
        Ok(())
    }
}
