//! Workflows and their instances: definitions, fires admitted under the cap with the
//! workflow's row locked, and steps written only at the version they were computed from.

use tickwork_core::workflow::step::{self, Admit, InstanceState, NodeState};

use super::*;
use crate::store::WorkflowStore;

/// The longest DAG, snapshot or node list, in bytes (a workflow has at most 200 nodes).
const WORKFLOW_TEXT_MAX: usize = 1024 * 1024;
const WORKFLOW_NAME_MAX: usize = 255;
/// The context's cap (core's) with room for its JSON escapes.
const CONTEXT_MAX: usize = 4 * tickwork_core::workflow::context::CONTEXT_BYTES;

const WORKFLOW_COLUMNS: &str = "id, workflow_key, name, group_id, dag, failure_policy, \
     max_instances, overflow, schedule_type, schedule_conf, time_zone, misfire_strategy, \
     status, next_fire_at, version, created_at, updated_at";

#[derive(sqlx::FromRow)]
struct WorkflowRow {
    id: i64,
    workflow_key: String,
    name: String,
    group_id: i64,
    dag: String,
    failure_policy: String,
    max_instances: i64,
    overflow: String,
    schedule_type: String,
    schedule_conf: String,
    time_zone: String,
    misfire_strategy: String,
    status: String,
    next_fire_at: Option<i64>,
    version: i64,
    created_at: i64,
    updated_at: i64,
}

fn workflow(r: WorkflowRow) -> Result<Workflow, Error> {
    Ok(Workflow {
        id: r.id,
        def: WorkflowDef {
            key: r.workflow_key,
            name: r.name,
            group_id: r.group_id,
            dag: r.dag,
            failure_policy: named(&r.failure_policy)?,
            max_instances: r.max_instances,
            overflow: named(&r.overflow)?,
            schedule_type: named(&r.schedule_type)?,
            schedule_conf: r.schedule_conf,
            time_zone: r.time_zone,
            misfire_strategy: named(&r.misfire_strategy)?,
        },
        status: r.status.parse()?,
        next_fire_at: r.next_fire_at,
        version: r.version,
        created_at: r.created_at,
        updated_at: r.updated_at,
    })
}

const INSTANCE_COLUMNS: &str = "id, workflow_id, state, snapshot, nodes, context, trigger_type, \
     fire_key, version, created_at, ended_at";

type InstanceRow = (
    i64,
    i64,
    String,
    String,
    String,
    String,
    String,
    Option<i64>,
    i64,
    i64,
    Option<i64>,
);

fn instance(r: InstanceRow) -> Result<Instance, Error> {
    let nodes: Vec<String> = serde_json::from_str(&r.4)
        .map_err(|e| Error::corrupt(format!("instance {} has unreadable nodes: {e}", r.0)))?;
    Ok(Instance {
        id: r.0,
        workflow_id: r.1,
        state: named(&r.2)?,
        snapshot: r.3,
        nodes: nodes.iter().map(|s| named(s)).collect::<Result<_, _>>()?,
        context: r.5,
        trigger_type: named(&r.6)?,
        fire_key: r.7,
        version: r.8,
        created_at: r.9,
        ended_at: r.10,
    })
}

/// A stored name read back; an unknown one is a corrupt row.
fn named<T: std::str::FromStr<Err = tickwork_core::Error>>(s: &str) -> Result<T, Error> {
    s.parse().map_err(|e| Error::corrupt(format!("{e}")))
}

fn nodes_json(nodes: &[NodeState]) -> String {
    let names: Vec<&str> = nodes.iter().map(|s| s.as_str()).collect();
    serde_json::to_string(&names).unwrap_or_else(|_| "[]".to_owned())
}

fn check_def(def: &WorkflowDef) -> Result<(), Error> {
    check_required("workflow key", &def.key, JOB_KEY_MAX)?;
    check_len("schedule conf", &def.schedule_conf, SCHEDULE_CONF_MAX)?;
    check_required("time zone", &def.time_zone, TIME_ZONE_MAX)?;
    check_required("workflow name", &def.name, WORKFLOW_NAME_MAX)?;
    check_bytes("dag", &def.dag, WORKFLOW_TEXT_MAX)?;
    if def.max_instances < 1 {
        return Err(Error::Invalid(format!(
            "max_instances {} must be at least 1",
            def.max_instances
        )));
    }
    Ok(())
}

/// `q` with `def`'s fields bound after its key, in [`WORKFLOW_COLUMNS`]' order (name to
/// misfire strategy): what a create and an update write alike.
fn bind_def(q: Query, def: &WorkflowDef) -> Query {
    q.bind(&def.name)
        .bind(def.group_id)
        .bind(&def.dag)
        .bind(def.failure_policy.as_str())
        .bind(def.max_instances)
        .bind(def.overflow.as_str())
        .bind(def.schedule_type.as_str())
        .bind(&def.schedule_conf)
        .bind(&def.time_zone)
        .bind(def.misfire_strategy.as_str())
}

fn check_instance_text(snapshot: &str, context: &str) -> Result<(), Error> {
    check_bytes("snapshot", snapshot, WORKFLOW_TEXT_MAX)?;
    check_bytes("context", context, CONTEXT_MAX)
}

/// Writes `runs` and links each to its node of `instance_id`; the runs as written.
async fn insert_node_runs<B: Backend>(
    conn: &mut Conn<B>,
    instance_id: i64,
    runs: Vec<NodeRunNew>,
) -> Result<Vec<Run>, Error> {
    let mut ids = Vec::with_capacity(runs.len());
    for NodeRunNew { node, run } in runs {
        check_run_new(&run)?;
        let job_id = run.job_id;
        let Some(id) = SqlStore::<B>::insert_id(&mut *conn, insert_run(run)).await? else {
            return Err(Error::not_found("job", job_id));
        };
        let q = Query::new(
            "INSERT INTO tw_workflow_runs (run_id, instance_id, node_index) VALUES (?, ?, ?)",
        )
        .bind(id)
        .bind(instance_id)
        .bind(i64::try_from(node).unwrap_or(i64::MAX));
        B::execute(&mut *conn, q).await?;
        ids.push(id);
    }
    read_runs::<B>(conn, &ids).await
}

async fn read_runs<B: Backend>(conn: &mut Conn<B>, ids: &[i64]) -> Result<Vec<Run>, Error> {
    let mut runs = Vec::with_capacity(ids.len());
    let select = format!("SELECT {RUN_COLUMNS} FROM tw_runs WHERE id IN ");
    for q in in_ids::<B>(&select, ids) {
        runs.extend(convert::<RunRow, Run>(
            B::fetch_all::<RunRow>(&mut *conn, q).await?,
        )?);
    }
    runs.sort_by_key(|r| r.id);
    Ok(runs)
}

/// A workflow node's own retry settings, over its job's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NodeRules {
    retry_count: Option<i32>,
    retry_backoff_ms: Option<i64>,
}

impl NodeRules {
    /// `job` as the follow-up planner sees it for a run of this node: the node's retries, and
    /// no child jobs (the workflow's edges say what follows a node).
    pub(super) fn apply(self, job: &Job) -> Job {
        let mut job = job.clone();
        if let Some(n) = self.retry_count {
            job.spec.retry_count = n;
        }
        if let Some(ms) = self.retry_backoff_ms {
            job.spec.retry_backoff_ms = ms;
        }
        job.spec.child_job_ids.clear();
        job
    }
}

/// The rules of the nodes whose runs are among `ended` (node runs and their retries), by run
/// id, read in the caller's transaction (the one that ends the runs).
pub(super) async fn node_rules<B: Backend>(
    conn: &mut Conn<B>,
    ended: &[Run],
) -> Result<HashMap<i64, NodeRules>, Error> {
    let ids: Vec<i64> = ended
        .iter()
        .filter(|r| matches!(r.trigger_type, TriggerType::Workflow | TriggerType::Retry))
        .map(|r| r.id)
        .collect();
    let mut rules = HashMap::new();
    let select = "SELECT w.run_id, w.node_index, i.snapshot FROM tw_workflow_runs w \
                  JOIN tw_workflow_instances i ON i.id = w.instance_id WHERE w.run_id IN ";
    for q in in_ids::<B>(select, &ids) {
        for (run_id, node, snapshot) in B::fetch_all::<(i64, i64, String)>(&mut *conn, q).await? {
            // An instance whose snapshot does not read leaves its runs to their job's rules:
            // ending runs is never held up by a workflow's record.
            let Ok(snapshot) = serde_json::from_str::<tickwork_core::workflow::Snapshot>(&snapshot)
            else {
                continue;
            };
            let Some(n) = usize::try_from(node)
                .ok()
                .and_then(|n| snapshot.dag.nodes.get(n))
            else {
                continue;
            };
            rules.insert(
                run_id,
                NodeRules {
                    retry_count: n.retry_count,
                    retry_backoff_ms: n.retry_backoff_ms,
                },
            );
        }
    }
    Ok(rules)
}

/// Links each retry written for a run of a node to the same node, in the caller's transaction
/// (the one that writes the retries): `(retry id, parent run id)`.
pub(super) async fn link_retries<B: Backend>(
    conn: &mut Conn<B>,
    retries: &[(i64, i64)],
) -> Result<(), Error> {
    for &(retry, parent) in retries {
        let q = Query::new(
            "INSERT INTO tw_workflow_runs (run_id, instance_id, node_index) \
             SELECT ?, instance_id, node_index FROM tw_workflow_runs WHERE run_id = ?",
        )
        .bind(retry)
        .bind(parent);
        B::execute(&mut *conn, q).await?;
    }
    Ok(())
}

async fn find_workflow<B: Backend>(
    conn: &mut Conn<B>,
    id: i64,
    lock: bool,
) -> Result<Workflow, Error> {
    let q = Query::new(format!(
        "SELECT {WORKFLOW_COLUMNS} FROM tw_workflows WHERE id = ?{}",
        if lock { B::KIND.for_update() } else { "" }
    ))
    .bind(id);
    match B::fetch_optional::<WorkflowRow>(conn, q).await? {
        Some(row) => workflow(row),
        None => Err(Error::not_found("workflow", id)),
    }
}

async fn find_instance<B: Backend>(conn: &mut Conn<B>, id: i64) -> Result<Instance, Error> {
    let q = Query::new(format!(
        "SELECT {INSTANCE_COLUMNS} FROM tw_workflow_instances WHERE id = ?"
    ))
    .bind(id);
    match B::fetch_optional::<InstanceRow>(conn, q).await? {
        Some(row) => instance(row),
        None => Err(Error::not_found("workflow instance", id)),
    }
}

/// How many of the workflow's instances are running and queued.
async fn live_counts<B: Backend>(
    conn: &mut Conn<B>,
    workflow_id: i64,
) -> Result<(usize, usize), Error> {
    let q = Query::new(
        "SELECT state, COUNT(*) FROM tw_workflow_instances \
         WHERE workflow_id = ? AND state IN ('RUNNING', 'QUEUED') GROUP BY state",
    )
    .bind(workflow_id);
    let (mut running, mut queued) = (0, 0);
    for (state, n) in B::fetch_all::<(String, i64)>(conn, q).await? {
        let n = usize::try_from(n).unwrap_or(0);
        match named::<InstanceState>(&state)? {
            InstanceState::Running => running = n,
            _ => queued = n,
        }
    }
    Ok((running, queued))
}

/// Admits `start` under `wf`'s cap (its row locked by the caller) and writes the instance and
/// its runs, in the caller's transaction.
async fn start_in<B: Backend>(
    conn: &mut Conn<B>,
    wf: &Workflow,
    start: InstanceStart,
) -> Result<InstanceStarted, Error> {
    let (running, queued) = live_counts::<B>(conn, wf.id).await?;
    let cap = u32::try_from(wf.def.max_instances).unwrap_or(u32::MAX);
    let admitted = step::admit(running, queued, cap, wf.def.overflow);
    let state = match admitted {
        Admit::Start => InstanceState::Running,
        Admit::Queue => InstanceState::Queued,
        Admit::Skip => {
            return Ok(InstanceStarted {
                admitted,
                instance: None,
                runs: Vec::new(),
            });
        }
    };
    // A queued instance has started nothing: its runs are not written, its nodes wait.
    let nodes = if state == InstanceState::Running {
        start.nodes
    } else {
        vec![NodeState::Waiting; start.nodes.len()]
    };
    let q = Query::new(format!(
        "INSERT INTO tw_workflow_instances ({}) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, NULL)",
        &INSTANCE_COLUMNS["id, ".len()..]
    ))
    .bind(wf.id)
    .bind(state.as_str())
    .bind(&start.snapshot)
    .bind(nodes_json(&nodes))
    .bind(&start.context)
    .bind(start.trigger_type.as_str())
    .bind(start.fire_key)
    .bind(start.now);
    let id = SqlStore::<B>::insert_id(&mut *conn, q)
        .await
        .map_err(|e| {
            unique_or(e, || {
                Error::Conflict(format!(
                    "workflow {:?} already fired for {:?}",
                    wf.def.key, start.fire_key
                ))
            })
        })?
        .ok_or_else(|| Error::corrupt("the instance insert wrote no row".to_owned()))?;
    let runs = if state == InstanceState::Running {
        insert_node_runs::<B>(conn, id, start.runs).await?
    } else {
        Vec::new()
    };
    Ok(InstanceStarted {
        admitted,
        instance: Some(Instance {
            id,
            workflow_id: wf.id,
            state,
            snapshot: start.snapshot,
            nodes,
            context: start.context,
            trigger_type: start.trigger_type,
            fire_key: start.fire_key,
            version: 1,
            created_at: start.now,
            ended_at: None,
        }),
        runs,
    })
}

#[async_trait]
impl<B: Backend> WorkflowStore for SqlStore<B> {
    async fn workflow_create(&self, new: WorkflowNew) -> Result<Workflow, Error> {
        let def = new.def;
        check_def(&def)?;
        let q = Query::new(format!(
            "INSERT INTO tw_workflows ({}) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)",
            &WORKFLOW_COLUMNS["id, ".len()..]
        ))
        .bind(&def.key);
        let q = bind_def(q, &def)
            .bind(new.status.as_str())
            .bind(new.next_fire_at)
            .bind(new.now)
            .bind(new.now);
        let mut conn = self.writes.acquire().await?;
        let id = Self::insert_id(&mut conn, q)
            .await
            .map_err(|e| {
                if is_foreign_key_violation(&e) {
                    return Error::not_found("group", def.group_id);
                }
                unique_or(e, || {
                    Error::Conflict(format!("workflow key {:?} is taken", def.key))
                })
            })?
            .ok_or_else(|| Error::corrupt("the workflow insert wrote no row".to_owned()))?;
        Ok(Workflow {
            id,
            def,
            status: new.status,
            next_fire_at: new.next_fire_at,
            version: 1,
            created_at: new.now,
            updated_at: new.now,
        })
    }

    async fn workflow_update(&self, update: WorkflowUpdate) -> Result<Workflow, Error> {
        check_def(&update.def)?;
        let mut tx = B::begin_write(&self.writes).await?;
        let there = find_workflow::<B>(&mut tx, update.id, true).await?;
        if let Some(v) = update.expected_version
            && v != there.version
        {
            return Err(Error::Conflict(format!(
                "workflow {} is at version {}, not {v}",
                there.id, there.version
            )));
        }
        if update.def.key != there.def.key {
            return Err(Error::Invalid("a workflow's key cannot change".to_owned()));
        }
        let def = update.def;
        let q = Query::new(
            "UPDATE tw_workflows SET name = ?, group_id = ?, dag = ?, failure_policy = ?, \
             max_instances = ?, overflow = ?, schedule_type = ?, schedule_conf = ?, \
             time_zone = ?, misfire_strategy = ?, next_fire_at = ?, version = version + 1, \
             updated_at = ? WHERE id = ?",
        );
        let q = bind_def(q, &def)
            .bind(update.next_fire_at)
            .bind(update.now)
            .bind(there.id);
        B::execute(&mut *tx, q).await.map_err(|e| {
            if is_foreign_key_violation(&e) {
                Error::not_found("group", def.group_id)
            } else {
                e.into()
            }
        })?;
        tx.commit().await?;
        Ok(Workflow {
            def,
            next_fire_at: update.next_fire_at,
            version: there.version + 1,
            updated_at: update.now,
            ..there
        })
    }

    async fn workflow_delete(&self, id: i64) -> Result<Workflow, Error> {
        let mut tx = B::begin_write(&self.writes).await?;
        let there = find_workflow::<B>(&mut tx, id, true).await?;
        let (running, queued) = live_counts::<B>(&mut tx, id).await?;
        if running + queued > 0 {
            return Err(Error::Conflict(format!(
                "workflow {:?} has {} instance(s) running or queued; stop them first",
                there.def.key,
                running + queued
            )));
        }
        for sql in [
            "DELETE FROM tw_workflow_runs WHERE instance_id IN \
             (SELECT id FROM tw_workflow_instances WHERE workflow_id = ?)",
            "DELETE FROM tw_workflow_instances WHERE workflow_id = ?",
            "DELETE FROM tw_workflows WHERE id = ?",
        ] {
            B::execute(&mut *tx, Query::new(sql).bind(id)).await?;
        }
        tx.commit().await?;
        Ok(there)
    }

    async fn workflow_get(&self, id: i64) -> Result<Workflow, Error> {
        let mut conn = self.pool.acquire().await?;
        find_workflow::<B>(&mut conn, id, false).await
    }

    async fn workflow_get_by_key(&self, key: &str) -> Result<Workflow, Error> {
        let q = Query::new(format!(
            "SELECT {WORKFLOW_COLUMNS} FROM tw_workflows WHERE workflow_key = ?"
        ))
        .bind(key);
        let mut conn = self.pool.acquire().await?;
        match B::fetch_optional::<WorkflowRow>(&mut conn, q).await? {
            Some(row) => workflow(row),
            None => Err(Error::not_found("workflow", key)),
        }
    }

    async fn workflows_list(&self) -> Result<Vec<Workflow>, Error> {
        let q = Query::new(format!(
            "SELECT {WORKFLOW_COLUMNS} FROM tw_workflows ORDER BY workflow_key"
        ));
        let mut conn = self.pool.acquire().await?;
        B::fetch_all::<WorkflowRow>(&mut conn, q)
            .await?
            .into_iter()
            .map(workflow)
            .collect()
    }

    async fn workflow_instance_start(
        &self,
        start: InstanceStart,
    ) -> Result<InstanceStarted, Error> {
        check_instance_text(&start.snapshot, &start.context)?;
        let mut tx = B::begin_write(&self.writes).await?;
        // The lock makes the count and the insert one step: two fires at once see each other.
        let wf = find_workflow::<B>(&mut tx, start.workflow_id, true).await?;
        let started = start_in::<B>(&mut tx, &wf, start).await?;
        tx.commit().await?;
        Ok(started)
    }

    async fn workflow_set_status(&self, change: WorkflowStatusChange) -> Result<Workflow, Error> {
        let mut tx = B::begin_write(&self.writes).await?;
        let there = find_workflow::<B>(&mut tx, change.id, true).await?;
        let q = Query::new(
            "UPDATE tw_workflows SET status = ?, next_fire_at = ?, version = version + 1, \
             updated_at = ? WHERE id = ?",
        )
        .bind(change.status.as_str())
        .bind(change.next_fire_at)
        .bind(change.now)
        .bind(there.id);
        B::execute(&mut *tx, q).await?;
        tx.commit().await?;
        Ok(Workflow {
            status: change.status,
            next_fire_at: change.next_fire_at,
            version: there.version + 1,
            updated_at: change.now,
            ..there
        })
    }

    async fn workflows_due(&self, due: WorkflowsDue) -> Result<Vec<Workflow>, Error> {
        let q = Query::new(format!(
            "SELECT {WORKFLOW_COLUMNS} FROM tw_workflows \
             WHERE status = 'running' AND next_fire_at <= ? ORDER BY next_fire_at LIMIT ?"
        ))
        .bind(due.now)
        .bind(i64::try_from(due.limit.clamp(1, PageReq::MAX_LIMIT)).unwrap_or(1000));
        let mut conn = self.pool.acquire().await?;
        B::fetch_all::<WorkflowRow>(&mut conn, q)
            .await?
            .into_iter()
            .map(workflow)
            .collect()
    }

    async fn workflow_fire(&self, fire: WorkflowFire) -> Result<Option<InstanceStarted>, Error> {
        if let Some(start) = &fire.start {
            check_instance_text(&start.snapshot, &start.context)?;
        }
        let mut tx = B::begin_write(&self.writes).await?;
        let status = if fire.next_fire_at.is_some() {
            JobStatus::Running
        } else {
            JobStatus::Stopped
        };
        let q = Query::new(
            "UPDATE tw_workflows SET next_fire_at = ?, status = ? \
             WHERE id = ? AND status = 'running' AND next_fire_at = ?",
        )
        .bind(fire.next_fire_at)
        .bind(status.as_str())
        .bind(fire.workflow_id)
        .bind(fire.seen);
        if B::execute(&mut *tx, q).await?.rows == 0 {
            return Ok(None);
        }
        let started = match fire.start {
            Some(start) => {
                let wf = find_workflow::<B>(&mut tx, fire.workflow_id, true).await?;
                start_in::<B>(&mut tx, &wf, start).await?
            }
            None => InstanceStarted {
                admitted: Admit::Skip,
                instance: None,
                runs: Vec::new(),
            },
        };
        tx.commit().await?;
        Ok(Some(started))
    }

    async fn workflow_instance_step(&self, step: InstanceStep) -> Result<Stepped, Error> {
        check_instance_text("", &step.context)?;
        let mut tx = B::begin_write(&self.writes).await?;
        let q = Query::new(
            "UPDATE tw_workflow_instances SET state = ?, nodes = ?, context = ?, ended_at = ?, \
             version = version + 1 WHERE id = ? AND version = ?",
        )
        .bind(step.state.as_str())
        .bind(nodes_json(&step.nodes))
        .bind(&step.context)
        .bind(step.ended_at)
        .bind(step.id)
        .bind(step.expected_version);
        if B::execute(&mut *tx, q).await?.rows == 0 {
            let there = find_instance::<B>(&mut tx, step.id).await?;
            return Err(Error::Conflict(format!(
                "workflow instance {} is at version {}, not {}",
                there.id, there.version, step.expected_version
            )));
        }
        let runs = insert_node_runs::<B>(&mut tx, step.id, step.runs).await?;
        let instance = find_instance::<B>(&mut tx, step.id).await?;
        tx.commit().await?;
        Ok(Stepped { instance, runs })
    }

    async fn workflow_instance_get(&self, id: i64) -> Result<InstanceWithRuns, Error> {
        let mut conn = self.pool.acquire().await?;
        let instance = find_instance::<B>(&mut conn, id).await?;
        let q = Query::new(
            "SELECT run_id, node_index FROM tw_workflow_runs WHERE instance_id = ? ORDER BY run_id",
        )
        .bind(id);
        let links = B::fetch_all::<(i64, i64)>(&mut conn, q).await?;
        let ids: Vec<i64> = links.iter().map(|&(run, _)| run).collect();
        let mut by_id: HashMap<i64, Run> = read_runs::<B>(&mut conn, &ids)
            .await?
            .into_iter()
            .map(|r| (r.id, r))
            .collect();
        // A run deleted with its job leaves its node without it.
        let runs = links
            .into_iter()
            .filter_map(|(run, node)| {
                Some(NodeRun {
                    node: usize::try_from(node).ok()?,
                    run: by_id.remove(&run)?,
                })
            })
            .collect();
        Ok(InstanceWithRuns { instance, runs })
    }

    async fn workflow_instances_list(&self, query: InstancesQuery) -> Result<Vec<Instance>, Error> {
        let mut q = Query::new(format!(
            "SELECT {INSTANCE_COLUMNS} FROM tw_workflow_instances WHERE 1 = 1"
        ))
        .one_off();
        if let Some(w) = query.workflow_id {
            q.push(" AND workflow_id = ").push_bind(w);
        }
        if !query.states.is_empty() {
            q.push(" AND state IN ");
            q.push_list(query.states.iter().map(|s| s.as_str()));
        }
        let limit = query.limit.clamp(1, PageReq::MAX_LIMIT);
        q.push(" ORDER BY id DESC LIMIT ")
            .push_bind(i64::try_from(limit).unwrap_or(1000));
        let mut conn = self.pool.acquire().await?;
        B::fetch_all::<InstanceRow>(&mut conn, q)
            .await?
            .into_iter()
            .map(instance)
            .collect()
    }

    async fn workflow_instances_of_runs(&self, run_ids: &[i64]) -> Result<Vec<i64>, Error> {
        let mut conn = self.pool.acquire().await?;
        let mut out = BTreeSet::new();
        let select = "SELECT instance_id FROM tw_workflow_runs WHERE run_id IN ";
        for q in in_ids::<B>(select, run_ids) {
            for (id,) in B::fetch_all::<(i64,)>(&mut conn, q).await? {
                out.insert(id);
            }
        }
        Ok(out.into_iter().collect())
    }
}
