//! The admin's integration tests, one binary (one link step) with a module per area: the REST API
//! and console one request at a time (and end to end where they need the pipeline or an executor),
//! passwords, users and tokens as people manage them, asking executors which runs they accepted,
//! alarms, overload (the claim bounded by the backlog), an admin on a manual clock, the address
//! cache of a dead executor, chaos (admins killed or paused mid-burst), failover, the ledger's
//! alerts of missed, late and doubled fires, follow-ups, group tokens, the schedule heatmap, job
//! keys in the console, codes by their labels, the dashboard's period and a user's groups in the
//! console, lost runs, cluster operations, a database outage, script versions in the console
//! (changes between two, loading one into the editor) and XXL-JOB 3.5 (its executors and its job
//! API), and workflows (an admin killed
//! mid-instance among them). Tests that need admins or executors as real processes start this binary again in the role
//! of the ignored `child` test.

mod accepted_runs;
mod accounts;
mod alarms;
mod api;
mod api_e2e;
mod backlog;
mod chaos;
mod clock;
mod console_labels;
mod dead_executor;
mod dispatch_records;
mod failover;
mod fire_alerts;
mod follow_ups;
mod group_tokens;
mod heatmap;
mod job_keys;
mod jobs_bulk;
mod jobs_scale;
mod log_checkpoint;
mod lost_runs;
mod operations;
mod outage;
mod pull_protocol;
mod scripts;
mod support;
mod workflow_failover;
mod workflows;
mod xxl_job_35;

#[test]
#[ignore = "the child process role of this test binary"]
fn child() {
    support::child_main();
}
