//! PostgreSQL's ledger under the write path's load: its updates of a fire and their index
//! entries (`heap_only`), and the plans of the store's statements once it has grown (`plans`).

use tickwork_core::TriggerType;
use tickwork_store::*;

mod heap_only;
mod plans;

/// A fixed "now": the store never reads the clock.
const NOW: i64 = 1_700_000_000_000;
const NODE: &str = "node-a";

/// A stopped job of a group of its own and `runs` manual runs of it owned by [`NODE`], `planned`
/// and one millisecond apart from [`NOW`] on; the runs' ids in that order.
async fn planned_runs(store: &dyn Store, name: &str, runs: usize) -> (Job, Vec<i64>) {
    let group = store
        .group_create(GroupNew {
            app_name: name.to_owned(),
            title: name.to_owned(),
            address_mode: AddressMode::Auto,
            addresses: Vec::new(),
            now: NOW,
        })
        .await
        .expect("create group");
    let job = store
        .job_create(JobNew {
            key: name.to_owned(),
            spec: JobSpec::new(group.id, format!("{name}Handler")),
            status: JobStatus::Stopped,
            next_fire_at: None,
            now: NOW,
        })
        .await
        .expect("create job");
    let mut ids = Vec::with_capacity(runs);
    for n in 0..runs as i64 {
        let mut run = RunNew::new(job.id, TriggerType::Manual, NOW + n);
        run.owner_node = Some(NODE.to_owned());
        ids.push(store.run_insert(run).await.expect("insert run").id);
    }
    (job, ids)
}
