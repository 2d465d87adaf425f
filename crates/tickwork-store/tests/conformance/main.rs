//! The store's conformance suite: every test is written once, as an `async fn(Ctx)` in the
//! module of its area, and run on SQLite, PostgreSQL and MySQL/MariaDB by the `conformance!`
//! list at the end.

mod support;

mod accounts;
mod alarms;
mod audit;
mod claim;
mod cluster;
mod fire_check;
mod follow_ups;
mod groups;
mod jobs;
mod jobs_bulk;
mod jobs_sort;
mod recovery;
mod retention;
mod runs;
mod schema;
mod scripts;
mod send_fence;
mod state_machine;
mod submissions;
mod workflows;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use support::Ctx;
use tickwork_core::run::{RunMove, RunState};
use tickwork_core::{
    BlockStrategy, GlueType, MisfireStrategy, RouteStrategy, ScheduleType, TriggerType, follow_up,
    misfire,
};
use tickwork_store::*;

/// A fixed "now": the store never reads the clock, every instant is an input.
const NOW: i64 = 1_700_000_000_000;

// ---- helpers ----

/// The operations that end runs, with no follow-ups, shaped as the tests about run states
/// read them.
trait EndsRuns {
    async fn complete_plain(&self, complete: RunComplete) -> Result<Option<Run>, Error>;
    async fn complete_batch_plain(&self, batch: &[RunComplete]) -> Result<Vec<Run>, Error>;
    async fn trigger_failed_plain(&self, failed: TriggerFailed) -> Result<Option<Run>, Error>;
    async fn misfire_plain(&self, misfired: MarkMisfired) -> Result<u64, Error>;
}

impl EndsRuns for dyn Store {
    async fn complete_plain(&self, complete: RunComplete) -> Result<Option<Run>, Error> {
        let ended = self.run_complete(complete, NO_FOLLOW_UPS).await?;
        Ok(ended.runs.into_iter().next())
    }

    async fn complete_batch_plain(&self, batch: &[RunComplete]) -> Result<Vec<Run>, Error> {
        Ok(self.runs_complete(batch, NO_FOLLOW_UPS).await?.runs)
    }

    async fn trigger_failed_plain(&self, failed: TriggerFailed) -> Result<Option<Run>, Error> {
        let ended = self.run_mark_trigger_failed(failed, NO_FOLLOW_UPS).await?;
        Ok(ended.runs.into_iter().next())
    }

    async fn misfire_plain(&self, misfired: MarkMisfired) -> Result<u64, Error> {
        let ended = self.runs_mark_misfired(misfired, NO_FOLLOW_UPS).await?;
        Ok(ended.runs.len() as u64)
    }
}

async fn group(store: &dyn Store, app_name: &str) -> Group {
    store
        .group_create(GroupNew {
            app_name: app_name.to_owned(),
            title: format!("{app_name} executors"),
            address_mode: AddressMode::Auto,
            addresses: Vec::new(),
            now: NOW,
        })
        .await
        .expect("create group")
}

fn job_new(group_id: i64, key: &str) -> JobNew {
    let mut spec = JobSpec::new(group_id, format!("{key}Handler"));
    spec.description = format!("job {key}");
    spec.owner = "ops".to_owned();
    spec.params = format!("params of {key}");
    JobNew {
        key: key.to_owned(),
        spec,
        status: JobStatus::Stopped,
        next_fire_at: None,
        now: NOW,
    }
}

/// A running fixed-rate job whose next fire is `next`.
async fn running_job(store: &dyn Store, group_id: i64, key: &str, next: i64) -> Job {
    let mut new = job_new(group_id, key);
    new.spec.schedule_type = ScheduleType::FixRate;
    new.spec.schedule_conf = "1".to_owned();
    new.status = JobStatus::Running;
    new.next_fire_at = Some(next);
    store.job_create(new).await.expect("create job")
}

/// Starts or stops the job `id` as the service does, with an audit record of the change:
/// the job as written, `None` when it is not there.
async fn set_status(
    store: &dyn Store,
    id: i64,
    status: JobStatus,
    next_fire_at: Option<i64>,
    now: i64,
) -> Option<Job> {
    let change = JobsStatusChange {
        status,
        jobs: vec![(id, next_fire_at)],
        now,
    };
    let mut written = store
        .jobs_set_status(change, &jobs_bulk::status_record)
        .await
        .expect("set a job's status");
    written.pop()
}

/// A planner for a fixed-rate schedule: every instant from the job's next fire up to
/// `horizon`, then continues after the last.
fn fixed_rate(interval: i64, horizon: i64) -> impl Fn(&Job, i64) -> JobPlan + Send + Sync {
    move |job, _now| {
        let mut at = job.next_fire_at.expect("a claimed job has a next fire");
        let mut fires = Vec::new();
        while at <= horizon {
            fires.push(PlannedFire::on_time(at, TriggerType::FixRate));
            at += interval;
        }
        JobPlan {
            fires,
            next_fire_at: Some(at),
        }
    }
}

fn claim(node: &str, now: i64, lookahead_ms: i64, limit: u32) -> ClaimParams {
    ClaimParams {
        node_id: node.to_owned(),
        now,
        lookahead_ms,
        limit,
    }
}

/// Every run of the database, oldest first.
async fn all_runs(store: &dyn Store, job_id: Option<i64>) -> Vec<Run> {
    let mut runs = Vec::new();
    let mut offset = 0;
    loop {
        let page = store
            .runs_list(RunFilter {
                job_id,
                page: PageReq {
                    offset,
                    limit: PageReq::MAX_LIMIT,
                },
                ..RunFilter::default()
            })
            .await
            .expect("list runs");
        let n = page.items.len() as u64;
        runs.extend(page.items);
        offset += n;
        if n < PageReq::MAX_LIMIT {
            break;
        }
    }
    runs.reverse();
    runs
}

fn assert_invalid<T: std::fmt::Debug>(result: Result<T, Error>) {
    assert!(
        matches!(result, Err(Error::Invalid(_))),
        "expected Invalid, got {result:?}"
    );
}

fn assert_conflict<T: std::fmt::Debug>(result: Result<T, Error>) {
    assert!(
        matches!(result, Err(Error::Conflict(_))),
        "expected Conflict, got {result:?}"
    );
}

fn assert_not_found<T: std::fmt::Debug>(result: Result<T, Error>) {
    assert!(
        matches!(result, Err(Error::NotFound { .. })),
        "expected NotFound, got {result:?}"
    );
}

async fn beat(store: &dyn Store, node: &str, at: i64) {
    store
        .node_heartbeat(NodeBeat {
            id: node.to_owned(),
            address: format!("http://{node}:8080"),
            now: at,
        })
        .await
        .expect("node heartbeat");
}

/// A planned manual run of `job_id` owned by `owner`, due at `at`.
async fn planned(store: &dyn Store, job_id: i64, owner: Option<&str>, at: i64) -> Run {
    store
        .run_insert(RunNew {
            scheduled_at: at,
            owner_node: owner.map(str::to_owned),
            ..RunNew::new(job_id, TriggerType::Manual, NOW)
        })
        .await
        .expect("insert run")
}

/// Moves a planned run to `sending` as its owner does before `/run` (no heartbeat condition);
/// returns the owner. A run that is sent has an owner: only its owner sends it.
async fn begin_send(store: &dyn Store, run_id: i64) -> String {
    let run = store.run_get(run_id).await.expect("get run");
    let owner = run
        .owner_node
        .unwrap_or_else(|| panic!("run {run_id} has no owner, so nobody can send it"));
    let moved = store
        .runs_begin_send(BeginSend {
            node_id: owner.clone(),
            run_ids: vec![run_id],
            live_since: None,
        })
        .await
        .expect("begin send");
    assert_eq!(moved, [run_id], "run {run_id} was planned and {owner}'s");
    owner
}

/// The dispatch record of one accepted `/run`.
fn dispatched(run_id: i64, address: &str, at: i64) -> Dispatched {
    Dispatched {
        run_id,
        address: address.to_owned(),
        trigger_code: 200,
        trigger_msg: None,
        at,
    }
}

/// `node` writes the dispatch records `runs`; how many changed.
async fn mark_dispatched(store: &dyn Store, node: &str, runs: Vec<Dispatched>) -> u64 {
    store
        .runs_mark_dispatched(MarkDispatched {
            node_id: node.to_owned(),
            runs,
        })
        .await
        .expect("mark dispatched")
}

/// Sends a planned run as its owner does: `sending`, then the dispatch record.
async fn dispatch(store: &dyn Store, run_id: i64, address: &str, at: i64) {
    let owner = begin_send(store, run_id).await;
    let n = mark_dispatched(store, &owner, vec![dispatched(run_id, address, at)]).await;
    assert_eq!(n, 1);
}

/// Completes a pending run with `state`. A planned run is sent first: a callback's result
/// ends a `sending` run early; a kill or a lost run found by the monitor ends a dispatched
/// run, so for those a planned run is dispatched.
async fn complete(store: &dyn Store, run_id: i64, state: RunState) {
    if store.run_get(run_id).await.expect("get run").state == RunState::Planned {
        if RunState::EARLY_RESULTS.contains(&state) {
            begin_send(store, run_id).await;
        } else {
            dispatch(store, run_id, "http://exec:1", NOW).await;
        }
    }
    store
        .complete_plain(RunComplete {
            run_id,
            handle_code: state.handle_code().max(500),
            handle_msg: None,
            state,
            at: NOW,
        })
        .await
        .expect("complete")
        .expect("the run was pending");
}

/// The trigger failure `node` records for `run_id`.
fn trigger_failed(run_id: i64, node: &str, at: i64) -> TriggerFailed {
    TriggerFailed {
        run_id,
        node_id: node.to_owned(),
        address: None,
        trigger_code: 500,
        trigger_msg: "no executor".to_owned(),
        at,
    }
}

fn adopt(node: &str, dead_before: i64, limit: u32) -> AdoptParams {
    AdoptParams {
        node_id: node.to_owned(),
        dead_before: Some(dead_before),
        limit,
    }
}

fn result(run_id: i64, state: RunState, at: i64) -> RunComplete {
    RunComplete {
        run_id,
        handle_code: state.handle_code(),
        handle_msg: None,
        state,
        at,
    }
}

conformance! {
    schema: [migrations_apply_twice, log_checkpoint_copies_the_log],
    groups: [
        group_crud,
        group_conflicts_and_validation,
        registry_heartbeat_upserts_and_lists_sorted,
        registry_remove_and_sweep,
        group_token_is_per_group_and_rotates_at_once,
    ],
    jobs: [
        job_crud_round_trips_every_field,
        job_key_conflict_and_validation,
        job_update_is_optimistic_when_asked,
        jobs_list_filters_and_paginates,
        job_status_and_next_fire,
        job_delete_removes_its_runs,
    ],
    jobs_bulk: [
        jobs_create_writes_jobs_versions_and_records_together,
        jobs_create_is_all_or_nothing,
        jobs_created_by_two_admins_at_once_have_ids_of_their_own,
        jobs_set_status_changes_jobs_and_records_together,
        jobs_set_status_and_delete_are_all_or_nothing,
        jobs_delete_removes_jobs_with_their_runs_together,
    ],
    jobs_sort: [
        jobs_list_sorts_by_every_key_in_the_database,
        jobs_list_pages_through_a_sorted_filtered_list,
        runs_last_of_jobs_finds_each_jobs_newest_run_that_happened,
    ],
    claim: [
        claim_writes_every_fire_in_window,
        claim_stops_job_when_plan_has_no_next,
        claim_respects_limit_and_order,
        claim_returns_only_planned_runs,
        claim_rejects_a_planner_state_that_is_not_a_fire,
        claim_plans_a_known_job_with_its_held_definition_and_fresh_due_columns,
        ledger_skips_a_forced_duplicate_fire,
        ledger_racing_claimers_write_each_fire_once,
        concurrent_claimers_never_share_a_job,
    ],
    runs: [
        runs_mark_dispatched_in_one_batch,
        batch_writes_keep_any_text_exactly,
        runs_complete_finishes_a_batch_once,
        run_set_shard_records_a_broadcast_shard,
        run_skip_ends_only_unsent_runs_of_its_node,
        runs_mark_skipped_ends_what_each_skip_would_in_one_batch,
        run_complete_moves_to_final_state_once,
        run_mark_trigger_failed_ends_the_run,
        runs_mark_trigger_failed_ends_each_run_of_a_batch_it_applies_to,
        runs_complete_dispatched_writes_results_with_dispatch_records,
        run_insert_manual_runs_have_no_fire_key_and_coexist,
        runs_list_filters,
        runs_pending_owned_by_node,
        runs_groups_names_the_group_of_each_run,
        kill_intent_turns_a_later_failure_into_killed,
    ],
    retention: [
        reports_and_state_counts,
        retention_purges_in_batches,
        runs_clear_deletes_only_final_runs_matching,
    ],
    cluster: [
        node_heartbeat_and_list,
        lease_acquire_renew_and_steal_after_expiry,
        node_leave_and_sweep,
        pull_calls_are_taken_once_answered_and_collected,
        pull_calls_are_notified_where_the_database_can,
    ],
    recovery: [
        adopt_orphaned_takes_runs_of_dead_and_departed_nodes,
        adoption_race_two_adopters_never_share_a_run,
        misfire_marking_catch_up_and_ownership,
        one_catch_up_per_job_between_claims_and_takeovers,
        lost_run_selection,
        runs_dispatched_to_one_address,
        callbacks_racing_the_ledger_are_never_lost,
        callbacks_racing_the_ledger_and_a_claim_are_never_lost,
    ],
    alarms: [
        alarms_are_queued_once,
        alarm_channel_crud,
        alarm_deliveries_are_queued_once_per_run_and_channel,
        alarm_delivery_claim_retry_and_finish,
        alarm_delivery_claimers_never_share_a_delivery,
        alarms_of_a_job_are_grouped_per_channel_a_window_apart,
    ],
    fire_check: [
        fires_to_check_reads_what_may_be_late_or_missed,
        fire_alerts_move_the_cursor_once_and_join_recent_ones,
    ],
    accounts: [
        users_create_update_password_and_list,
        sessions_touch_delete_and_purge,
        api_tokens_create_find_touch_revoke,
        users_are_deleted_with_their_sessions_and_tokens,
    ],
    audit: [audit_append_and_list_filters_and_pages],
    scripts: [script_versions_number_per_job_and_go_with_the_job],
    state_machine: [store_obeys_the_run_state_machine],
    send_fence: [
        begin_send_moves_only_the_nodes_planned_runs,
        begin_send_refuses_a_paused_node_and_adopted_runs,
        unsend_moves_only_the_nodes_sending_runs_back,
        hand_back_releases_only_the_nodes_planned_runs,
        adoption_without_dead_before_takes_only_unowned_planned_runs,
        adoption_takes_a_dead_nodes_sending_runs_keeping_them_sending,
        resumed_admin_cannot_fail_runs_another_admin_adopted_and_fired,
        send_fence_operations_refuse_a_bad_node_id,
    ],
    submissions: [
        submissions_are_created_kept_and_replaced_by_key,
        a_submission_is_cancelled_with_its_job_and_runs_unless_one_is_live,
        the_claim_counts_fires_left_down_and_stops_the_job_at_none,
        each_end_of_a_submissions_run_is_kept_until_acknowledged,
        ends_with_a_channel_are_due_for_posting_and_retried,
        a_fire_the_claim_misfires_leaves_a_completion,
    ],
    follow_ups: [
        completion_writes_retries_and_children_in_its_transaction,
        a_follow_up_that_cannot_be_written_leaves_the_run_pending,
        misfiring_a_fixed_delay_fire_moves_its_job_on,
        ending_runs_reads_only_jobs_that_can_follow,
    ],
    workflows: [
        workflows_are_created_changed_and_deleted_by_key,
        fires_are_admitted_under_the_cap_started_queued_or_skipped,
        an_instance_steps_only_from_the_version_it_was_read_at,
        a_retry_of_a_node_run_is_linked_to_the_same_node,
        a_scheduled_fire_is_claimed_once_with_its_instance,
    ],
}
