//! Job lists at scale: sorted by the database on every key in both directions (ties by id,
//! missing values last), paged through a sorted list, and each job's last run found for a
//! page in one call.

use std::collections::HashMap;

use super::*;

/// Six jobs in three groups (titles "Zeta team", none so the app name "Mid", "alpha"), with
/// next fires and runs chosen so that every sort key orders them differently; returns their
/// ids (index 0 is job 1 of the comments) and the id of each job's expected last run.
async fn six_jobs(store: &dyn Store) -> (Vec<i64>, HashMap<i64, i64>) {
    let mut groups = Vec::new();
    for (app, title) in [("aaa", "Zeta team"), ("Mid", ""), ("zzz", "alpha")] {
        let g = store
            .group_create(GroupNew {
                app_name: app.to_owned(),
                title: title.to_owned(),
                address_mode: AddressMode::Auto,
                addresses: Vec::new(),
                now: NOW,
            })
            .await
            .expect("create group");
        groups.push(g.id);
    }
    let (zeta, mid, alpha) = (groups[0], groups[1], groups[2]);
    // (description, group, next fire: None stopped, Some(i64::MAX) waiting for a run)
    let specs: [(&str, i64, Option<i64>); 6] = [
        ("delta", zeta, Some(NOW + 300)),
        ("Alpha", alpha, None),
        ("charlie", mid, Some(NOW + 100)),
        ("bravo", alpha, Some(i64::MAX)),
        ("Echo", zeta, Some(NOW + 200)),
        ("alpha", mid, None),
    ];
    let mut ids = Vec::new();
    for (i, (description, group_id, next)) in specs.into_iter().enumerate() {
        let mut new = job_new(group_id, &format!("sorted-{i}"));
        new.spec.description = description.to_owned();
        if next.is_some() {
            new.status = JobStatus::Running;
            new.next_fire_at = next;
        }
        ids.push(store.job_create(new).await.expect("create job").id);
    }
    let job_ids = &ids;
    let ran = |job: usize, at: i64, state: RunState| async move {
        let run = planned(store, job_ids[job], Some("n1"), at).await;
        complete(store, run.id, state).await;
        run.id
    };
    let mut last = HashMap::new();
    // Job 1: an older run, then the last one.
    ran(0, NOW - 400, RunState::Succeeded).await;
    last.insert(ids[0], ran(0, NOW - 100, RunState::Succeeded).await);
    // Job 2: its last run, then a fire claimed ahead (planned): not a run that happened.
    last.insert(ids[1], ran(1, NOW - 300, RunState::Failed).await);
    planned(store, ids[1], Some("n1"), NOW + 1000).await;
    // Job 3: never ran. Job 5: only a fire claimed ahead.
    planned(store, ids[4], Some("n1"), NOW + 500).await;
    last.insert(ids[3], ran(3, NOW - 200, RunState::Succeeded).await);
    last.insert(ids[5], ran(5, NOW - 50, RunState::Failed).await);
    (ids, last)
}

/// The ids of a page sorted by `key`, as job numbers (1 to 6).
async fn sorted(
    store: &dyn Store,
    ids: &[i64],
    key: JobSortKey,
    descending: bool,
    status: Option<JobStatus>,
    page: PageReq,
) -> (Vec<usize>, u64) {
    let p = store
        .jobs_list(JobFilter {
            status,
            sort: JobSort { key, descending },
            page,
            ..JobFilter::default()
        })
        .await
        .expect("list jobs");
    let numbers = p
        .items
        .iter()
        .map(|j| ids.iter().position(|&id| id == j.id).expect("one of ours") + 1)
        .collect();
    (numbers, p.total)
}

pub(crate) async fn jobs_list_sorts_by_every_key_in_the_database(ctx: Ctx) {
    let store = &*ctx.store;
    let (ids, _) = six_jobs(store).await;
    let all = PageReq::first(10);
    let cases: [(JobSortKey, [usize; 6], [usize; 6]); 5] = [
        (JobSortKey::Id, [1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1]),
        // Case does not matter; equal descriptions go by id, in the same direction.
        (
            JobSortKey::Description,
            [2, 6, 4, 3, 1, 5],
            [5, 1, 3, 4, 6, 2],
        ),
        // The group's title, or its app name when it has none.
        (JobSortKey::Group, [2, 4, 3, 6, 1, 5], [5, 1, 6, 3, 4, 2]),
        // No next fire (stopped, or waiting for a fixed-delay run) comes last either way.
        (JobSortKey::NextFire, [3, 5, 1, 2, 4, 6], [1, 5, 3, 6, 4, 2]),
        // By the last run's time; never ran (or only claimed ahead) comes last either way.
        (JobSortKey::LastRun, [2, 4, 1, 6, 3, 5], [6, 1, 4, 2, 5, 3]),
    ];
    for (key, asc, desc) in cases {
        let (got, total) = sorted(store, &ids, key, false, None, all).await;
        assert_eq!((got, total), (asc.to_vec(), 6), "{key} ascending");
        let (got, _) = sorted(store, &ids, key, true, None, all).await;
        assert_eq!(got, desc.to_vec(), "{key} descending");
    }
    assert_eq!(JobFilter::default().sort.key, JobSortKey::Id);
    assert_eq!(
        "last_run".parse::<JobSortKey>().unwrap(),
        JobSortKey::LastRun
    );
    assert_invalid("name".parse::<JobSortKey>());
}

pub(crate) async fn jobs_list_pages_through_a_sorted_filtered_list(ctx: Ctx) {
    let store = &*ctx.store;
    let (ids, _) = six_jobs(store).await;
    let page = |offset| PageReq { offset, limit: 4 };
    let key = JobSortKey::LastRun;
    assert_eq!(
        sorted(store, &ids, key, true, None, page(0)).await,
        (vec![6, 1, 4, 2], 6)
    );
    assert_eq!(
        sorted(store, &ids, key, true, None, page(4)).await,
        (vec![5, 3], 6)
    );
    assert_eq!(
        sorted(store, &ids, key, true, None, page(8)).await,
        (vec![], 6)
    );
    // The filter holds on every page, the total counts what it matches.
    let running = Some(JobStatus::Running);
    let next = JobSortKey::NextFire;
    let two = |offset| PageReq { offset, limit: 2 };
    assert_eq!(
        sorted(store, &ids, next, false, running, two(0)).await,
        (vec![3, 5], 4)
    );
    assert_eq!(
        sorted(store, &ids, next, false, running, two(2)).await,
        (vec![1, 4], 4)
    );
}

pub(crate) async fn runs_last_of_jobs_finds_each_jobs_newest_run_that_happened(ctx: Ctx) {
    let store = &*ctx.store;
    let (ids, last) = six_jobs(store).await;
    let mut asked = ids.clone();
    asked.push(ids[5] + 1000);
    let found: HashMap<i64, i64> = store
        .runs_last_of_jobs(&asked)
        .await
        .expect("last runs")
        .into_iter()
        .map(|r| (r.job_id, r.id))
        .collect();
    // Jobs 3 (never ran), 5 (only claimed ahead) and the unknown id have none.
    assert_eq!(found, last);
    let one = store.runs_last_of_jobs(&ids[1..2]).await.unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(
        (one[0].state, one[0].scheduled_at),
        (RunState::Failed, NOW - 300)
    );
    assert!(store.runs_last_of_jobs(&[]).await.unwrap().is_empty());
    let too_many: Vec<i64> = (1..=PageReq::MAX_LIMIT as i64 + 1).collect();
    assert_invalid(store.runs_last_of_jobs(&too_many).await);
}
