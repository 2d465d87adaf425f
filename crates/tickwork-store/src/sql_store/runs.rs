//! The run ledger: runs outside the schedule, their state changes, recovery, retention and
//! reports. The writes that end runs are in `transitions`.

use super::*;

/// `state` condition of the runs retention may delete: every final one.
static FINAL_STATES: LazyLock<String> = LazyLock::new(|| {
    let states: Vec<RunState> = RunState::ALL
        .iter()
        .copied()
        .filter(|s| s.is_final())
        .collect();
    state_in(&states)
});

/// The states of the runs a node holds: not yet sent, or being sent.
fn owned_states() -> Vec<RunState> {
    let mut states = RunMove::Adopt.from_states().to_vec();
    states.extend_from_slice(RunMove::AdoptSending.from_states());
    states
}

/// `state` condition of the runs a node holds.
static OWNED_STATES: LazyLock<String> = LazyLock::new(|| state_in(&owned_states()));

/// [`OWNED_STATES`] as a query that finds runs by state writes it (see `open_runs_in`).
fn owned_open(kind: Kind) -> String {
    open_runs_in(kind, &owned_states())
}

/// The owners whose planned runs may be adopted (see `orphan_owners`).
struct Orphans {
    /// Owners without a recent heartbeat (or without a row: they left).
    dead: Vec<String>,
    /// Some planned run has no owner.
    unowned: bool,
}

impl<B: Backend> SqlStore<B> {
    async fn run_find(&self, id: i64) -> Result<Option<Run>, Error> {
        let q = Query::new(format!("SELECT {RUN_COLUMNS} FROM tw_runs WHERE id = ?")).bind(id);
        self.fetch_optional::<RunRow>(q)
            .await?
            .map(Run::try_from)
            .transpose()
    }

    /// Who may hold orphaned planned runs: the owners of planned runs (on PostgreSQL, of open
    /// runs), other than `params.node_id`, without a heartbeat since `params.dead_before`, and
    /// whether some planned run has no owner at all. `None`: nobody. The owners are found by
    /// walking the open-run index one owner at a time, a few probes for a few nodes, where one
    /// scan would visit every planned run of every live node at each adoption round.
    async fn orphan_owners(&self, params: &AdoptParams) -> Result<Option<Orphans>, Error> {
        let mut conn = self.pool.acquire().await?;
        // Only planned runs lose their owner (a clean stop's hand-back).
        let unowned = Query::new(format!(
            "SELECT id FROM tw_runs WHERE {} AND owner_node IS NULL LIMIT 1",
            open_runs_in(B::KIND, RunMove::Adopt.from_states())
        ));
        let unowned = B::fetch_optional::<(i64,)>(&mut *conn, unowned)
            .await?
            .is_some();
        let mut owners = BTreeSet::new();
        let Some(dead_before) = params.dead_before else {
            return Ok(unowned.then_some(Orphans {
                dead: Vec::new(),
                unowned,
            }));
        };
        // Where the index is keyed by state, then owner, one walk per state: it relies on an
        // equality on the first column. PostgreSQL's holds the open runs by owner alone (see
        // `Kind::open_run`): one walk over the owners of open runs. A dead owner of dispatched
        // runs only is then passed on too; the adoption's select keeps only runs to adopt.
        let walks: Vec<String> = if B::KIND == Kind::Postgres {
            vec![B::KIND.open_run().to_owned()]
        } else {
            [RunMove::Adopt, RunMove::AdoptSending]
                .into_iter()
                .flat_map(|m| m.from_states().iter().copied())
                .map(|state| open_runs_in(B::KIND, &[state]))
                .collect()
        };
        for walk in walks {
            let mut after = String::new();
            loop {
                let next = Query::new(format!(
                    "SELECT owner_node FROM tw_runs WHERE {walk} AND owner_node > ? \
                     ORDER BY owner_node LIMIT 1"
                ))
                .bind(after.as_str());
                let Some((owner,)) = B::fetch_optional::<(String,)>(&mut *conn, next).await? else {
                    break;
                };
                after.clone_from(&owner);
                if owner != params.node_id {
                    owners.insert(owner);
                }
            }
        }
        let mut owners: Vec<String> = owners.into_iter().collect();
        if !owners.is_empty() {
            let mut live = Query::new("SELECT id FROM tw_nodes WHERE heartbeat_at >= ? AND id IN ")
                .bind(dead_before)
                .one_off();
            live.push_list(owners.iter().map(String::as_str));
            let live: HashSet<String> = B::fetch_all::<(String,)>(&mut *conn, live)
                .await?
                .into_iter()
                .map(|(id,)| id)
                .collect();
            owners.retain(|o| !live.contains(o));
        }
        Ok((unowned || !owners.is_empty()).then_some(Orphans {
            dead: owners,
            unowned,
        }))
    }

    /// The WHERE clause of a run listing.
    fn run_filter(filter: &RunFilter) -> Query {
        let mut q = Query::new(" WHERE 1 = 1");
        if let Some(job) = filter.job_id {
            q.push(" AND job_id = ").push_bind(job);
        }
        if let Some(group) = filter.group_id {
            q.push(" AND group_id = ").push_bind(group);
        }
        if let Some(state) = filter.state {
            q.push(" AND state = ").push_bind(state.as_str());
            // Open runs have an index of their own, which a query reaches by its condition.
            if !state.is_final() {
                q.push(" AND ").push(B::KIND.open_run());
            }
        }
        push_range(&mut q, "scheduled_at", filter.range);
        q
    }
}

#[async_trait]
impl<B: Backend> RunLedger for SqlStore<B> {
    async fn run_insert(&self, run: RunNew) -> Result<Run, Error> {
        check_run_new(&run)?;
        let job_id = run.job_id;
        let id = {
            let mut conn = self.writes.acquire().await?;
            Self::insert_id(&mut conn, insert_run(run)).await?
        };
        let Some(id) = id else {
            return Err(Error::not_found("job", job_id));
        };
        self.run_get(id).await
    }

    async fn runs_begin_send(&self, send: BeginSend) -> Result<Vec<i64>, Error> {
        check_required("node id", &send.node_id, NODE_ID_MAX)?;
        if send.run_ids.is_empty() {
            return Ok(Vec::new());
        }
        retry_deadlocks(|| self.runs_begin_send_once(&send)).await
    }

    async fn runs_unsend(&self, unsend: Unsend) -> Result<Vec<i64>, Error> {
        check_required("node id", &unsend.node_id, NODE_ID_MAX)?;
        if unsend.run_ids.is_empty() {
            return Ok(Vec::new());
        }
        retry_deadlocks(|| self.runs_unsend_once(&unsend)).await
    }

    async fn runs_hand_back(&self, hand_back: HandBack) -> Result<u64, Error> {
        check_required("node id", &hand_back.node_id, NODE_ID_MAX)?;
        let q = Query::new(format!(
            "UPDATE tw_runs SET owner_node = NULL WHERE {} AND owner_node = ?",
            open_runs_in(B::KIND, RunMove::Adopt.from_states())
        ))
        .bind(hand_back.node_id.as_str());
        Ok(self.execute(q).await?)
    }

    async fn runs_mark_dispatched(&self, batch: MarkDispatched) -> Result<u64, Error> {
        check_dispatch_records(&batch)?;
        retry_deadlocks(|| self.runs_mark_dispatched_once(&batch)).await
    }

    async fn runs_mark_trigger_failed(
        &self,
        batch: &[TriggerFailed],
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error> {
        for address in batch.iter().filter_map(|f| f.address.as_deref()) {
            check_len("executor address", address, ADDRESS_MAX)?;
        }
        retry_deadlocks(|| self.runs_mark_trigger_failed_once(batch, follow)).await
    }

    async fn run_set_shard(&self, shard: RunShard) -> Result<(), Error> {
        if !(0..shard.total.max(0)).contains(&shard.index) {
            return Err(Error::Invalid(format!(
                "shard {}/{} is out of range",
                shard.index, shard.total
            )));
        }
        let q = Query::new("UPDATE tw_runs SET shard_index = ?, shard_total = ? WHERE id = ?")
            .bind(shard.index)
            .bind(shard.total)
            .bind(shard.run_id);
        if self.execute(q).await? == 0 {
            return Err(Error::not_found("run", shard.run_id));
        }
        Ok(())
    }

    async fn runs_mark_skipped(&self, skipped: MarkSkipped) -> Result<Vec<Run>, Error> {
        if skipped.run_ids.is_empty() {
            return Ok(Vec::new());
        }
        retry_deadlocks(|| async {
            let mut tx = B::begin_write(&self.writes).await?;
            let unsent = transitions::Unsent {
                end: RunMove::Skip,
                node_id: &skipped.node_id,
                run_ids: &skipped.run_ids,
                reason: &skipped.reason,
                at: skipped.at,
            };
            let ended = transitions::end_unsent::<B>(&mut tx, unsent).await?;
            // The skips and, for submissions' runs, their ends are written together.
            let job_ids: Vec<i64> = ended
                .iter()
                .map(|r| r.job_id)
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            submissions::record_ends::<B>(&mut tx, &ended, &job_ids).await?;
            tx.commit().await?;
            Ok(ended)
        })
        .await
    }

    async fn run_complete(
        &self,
        complete: RunComplete,
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error> {
        if !complete.state.is_result() {
            return Err(Error::Invalid(format!(
                "{} is not a result state",
                complete.state
            )));
        }
        retry_deadlocks(|| self.run_complete_once(&complete, follow)).await
    }

    async fn runs_complete_dispatched(
        &self,
        both: CompleteDispatched<'_>,
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error> {
        check_dispatch_records(both.dispatched)?;
        retry_deadlocks(|| self.runs_complete_once(both, follow)).await
    }

    async fn run_kill_intent(&self, intent: RunKillIntent) -> Result<bool, Error> {
        let q = Query::new(format!(
            "UPDATE tw_runs SET kill_requested_at = ? WHERE id = ? AND state{}",
            state_in(RunMove::KillIntent.from_states())
        ))
        .bind(intent.at)
        .bind(intent.run_id);
        Ok(self.execute(q).await? > 0)
    }

    async fn run_get(&self, id: i64) -> Result<Run, Error> {
        self.run_find(id)
            .await?
            .ok_or_else(|| Error::not_found("run", id))
    }

    async fn runs_list(&self, filter: RunFilter) -> Result<Paged<Run>, Error> {
        let (offset, limit) = check_page(filter.page)?;
        let clause = Self::run_filter(&filter);
        let total = self.count("tw_runs", &clause).await?;
        let mut q = Query::new(format!("SELECT {RUN_COLUMNS} FROM tw_runs"));
        q.append(&clause);
        q.push(" ORDER BY id DESC LIMIT ").push_bind(limit);
        q.push(" OFFSET ").push_bind(offset);
        let items = convert(self.fetch_all::<RunRow>(q).await?)?;
        Ok(Paged { items, total })
    }

    async fn runs_last_of_jobs(&self, job_ids: &[i64]) -> Result<Vec<Run>, Error> {
        if job_ids.is_empty() {
            return Ok(Vec::new());
        }
        if job_ids.len() as u64 > PageReq::MAX_LIMIT {
            return Err(Error::Invalid(format!(
                "ask for the last runs of at most {} jobs at once",
                PageReq::MAX_LIMIT
            )));
        }
        // Per job, one step backwards along the index (job_id, id) past the few runs claimed
        // ahead (`planned`): a page of jobs costs one probe per job, however long the ledger.
        // Ordering by job_id too, constant here, names the index's order (ordered by id alone
        // a planner may walk the primary key backwards through other jobs' runs instead);
        // `order_by` of a job list sorted by last run probes the same way. The job ids go
        // through tw_jobs so that every backend runs the probe as a scalar subquery (MySQL
        // refuses LIMIT directly inside IN).
        let mut probe = Query::new(format!(
            "SELECT (SELECT r.id FROM tw_runs r WHERE r.job_id = j.id AND r.state <> {} \
             ORDER BY r.job_id DESC, r.id DESC LIMIT 1) FROM tw_jobs j WHERE j.id IN ",
            state_literal(RunState::Planned)
        ))
        .one_off();
        probe.push_list(job_ids.iter().copied());
        let run_ids: Vec<i64> = self
            .fetch_all::<(Option<i64>,)>(probe)
            .await?
            .into_iter()
            .filter_map(|(id,)| id)
            .collect();
        if run_ids.is_empty() {
            return Ok(Vec::new());
        }
        // Then the rows by primary key, in a statement of their own: as one statement
        // (`id IN (probe)`) PostgreSQL may hash the whole ledger to join the two (measured:
        // 20 ms at 50,000 runs for 200 jobs, against well under 1 ms this way).
        let mut q = Query::new(format!("SELECT {RUN_COLUMNS} FROM tw_runs WHERE id IN ")).one_off();
        q.push_list(run_ids);
        convert(self.fetch_all::<RunRow>(q).await?)
    }

    async fn runs_pending_owned_by(&self, node: &str) -> Result<Vec<Run>, Error> {
        let q = Query::new(format!(
            "SELECT {RUN_COLUMNS} FROM tw_runs WHERE {} AND owner_node = ? \
             ORDER BY scheduled_at, id",
            owned_open(B::KIND)
        ))
        .bind(node);
        convert(self.fetch_all::<RunRow>(q).await?)
    }

    async fn runs_state_counts(&self, range: TimeRange) -> Result<Vec<(RunState, u64)>, Error> {
        let mut q = Query::new("SELECT state, COUNT(*) FROM tw_runs WHERE 1 = 1");
        push_range(&mut q, "scheduled_at", range);
        q.push(" GROUP BY state");
        let mut counts = Vec::new();
        for (state, n) in self.fetch_all::<(String, i64)>(q).await? {
            let state: RunState = state
                .parse()
                .map_err(|_| Error::corrupt(format!("state holds the unknown value {state:?}")))?;
            counts.push((state, n.max(0) as u64));
        }
        counts.sort_unstable();
        Ok(counts)
    }

    async fn runs_adopt_orphaned(&self, params: AdoptParams) -> Result<Vec<Run>, Error> {
        check_required("node id", &params.node_id, NODE_ID_MAX)?;
        if params.limit == 0 {
            return Ok(Vec::new());
        }
        let Some(orphans) = self.orphan_owners(&params).await? else {
            return Ok(Vec::new());
        };
        let mut tx = B::begin_write(&self.writes).await?;
        // Lock first, then move: a run another adopter holds is skipped, and one it already
        // moved has a live owner by the time this scan reaches it. The scan visits only the
        // runs of the owners found dead above; liveness is checked again here, under the lock.
        // Sending runs never lose their owner, so only a dead owner's are taken.
        let mut select = Query::new(format!(
            "SELECT id FROM tw_runs WHERE {} AND (",
            owned_open(B::KIND)
        ));
        if orphans.unowned {
            select.push("owner_node IS NULL");
        }
        if let (false, Some(dead_before)) = (orphans.dead.is_empty(), params.dead_before) {
            if orphans.unowned {
                select.push(" OR ");
            }
            select.push("(owner_node IN ");
            select.push_list(orphans.dead.iter().map(String::as_str));
            select.push(
                " AND NOT EXISTS (SELECT 1 FROM tw_nodes \
                 WHERE tw_nodes.id = tw_runs.owner_node AND tw_nodes.heartbeat_at >= ",
            );
            select.push_bind(dead_before);
            select.push("))");
        }
        select.push(") ORDER BY scheduled_at, id LIMIT ");
        select.push_bind(i64::from(params.limit));
        select.push(B::KIND.skip_locked());
        let select = select.one_off();
        let ids: Vec<i64> = B::fetch_all::<(i64,)>(&mut *tx, select)
            .await?
            .into_iter()
            .map(|(id,)| id)
            .collect();
        let mut runs = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(ROWS_PER_STATEMENT) {
            let mut q = Query::new("UPDATE tw_runs SET owner_node = ").one_off();
            q.push_bind(params.node_id.as_str());
            q.push(" WHERE ").push(B::KIND.state_beside_ids());
            q.push(&OWNED_STATES).push(" AND id IN ");
            q.push_list(chunk.iter().copied());
            B::execute(&mut *tx, q).await?;
            let mut read =
                Query::new(format!("SELECT {RUN_COLUMNS} FROM tw_runs WHERE id IN ")).one_off();
            read.push_list(chunk.iter().copied());
            read.push(" AND ")
                .push(B::KIND.state_beside_ids())
                .push(&OWNED_STATES)
                .push(" AND owner_node = ")
                .push_bind(params.node_id.as_str());
            for row in B::fetch_all::<RunRow>(&mut *tx, read).await? {
                runs.push(Run::try_from(row)?);
            }
        }
        tx.commit().await?;
        runs.sort_by_key(|r| (r.scheduled_at, r.id));
        Ok(runs)
    }

    async fn runs_still_owned(&self, query: OwnedRuns) -> Result<Vec<i64>, Error> {
        let mut owned = Vec::with_capacity(query.run_ids.len());
        for chunk in query.run_ids.chunks(ROWS_PER_STATEMENT) {
            let mut q = Query::new("SELECT id FROM tw_runs WHERE ").one_off();
            q.push(B::KIND.state_beside_ids());
            q.push(&OWNED_STATES);
            q.push(" AND owner_node = ");
            q.push_bind(query.node_id.as_str());
            q.push(" AND id IN ");
            q.push_list(chunk.iter().copied());
            owned.extend(
                self.fetch_all::<(i64,)>(q)
                    .await?
                    .into_iter()
                    .map(|(id,)| id),
            );
        }
        owned.sort_unstable();
        Ok(owned)
    }

    async fn runs_groups(&self, run_ids: &[i64]) -> Result<Vec<RunGroup>, Error> {
        let mut out = Vec::with_capacity(run_ids.len());
        for chunk in run_ids.chunks(ROWS_PER_STATEMENT) {
            let mut q = Query::new("SELECT id, group_id FROM tw_runs WHERE id IN ").one_off();
            q.push_list(chunk.iter().copied());
            out.extend(
                self.fetch_all::<(i64, i64)>(q)
                    .await?
                    .into_iter()
                    .map(|(run_id, group_id)| RunGroup { run_id, group_id }),
            );
        }
        Ok(out)
    }

    async fn runs_mark_misfired(
        &self,
        misfired: MarkMisfired,
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error> {
        retry_deadlocks(|| self.runs_mark_misfired_once(&misfired, follow)).await
    }

    async fn run_catch_up(&self, catch_up: CatchUp) -> Result<Option<Run>, Error> {
        let mut tx = B::begin_write(&self.writes).await?;
        // The job's row lock orders this against a claim of the same job, which may write a
        // catch-up of its own (see `skip_second_catch_ups`).
        let lock = Query::new(format!(
            "SELECT id FROM tw_jobs WHERE id = (SELECT job_id FROM tw_runs WHERE id = ?){}",
            B::KIND.for_update()
        ))
        .bind(catch_up.run_id);
        B::fetch_all::<(i64,)>(&mut *tx, lock).await?;
        let find = Query::new(format!("SELECT {RUN_COLUMNS} FROM tw_runs WHERE id = ?"))
            .bind(catch_up.run_id);
        let Some(run) = B::fetch_all::<RunRow>(&mut *tx, find).await?.pop() else {
            tx.commit().await?;
            return Ok(None);
        };
        let run = Run::try_from(run)?;
        if !RunMove::CatchUp.applies_to(run.state)
            || run.owner_node.as_deref() != Some(catch_up.node_id.as_str())
        {
            tx.commit().await?;
            return Ok(None);
        }
        if run.trigger_type != TriggerType::Misfire {
            let exists = Query::new(
                "SELECT id FROM tw_runs WHERE job_id = ? AND trigger_type = ? \
                 AND scheduled_at >= ? LIMIT 1",
            )
            .bind(run.job_id)
            .bind(TriggerType::Misfire.as_str())
            .bind(catch_up.late_since);
            if !B::fetch_all::<(i64,)>(&mut *tx, exists).await?.is_empty() {
                // The job has its catch-up already: this run stays as it is, to be misfired.
                tx.commit().await?;
                return Ok(Some(run));
            }
        }
        let q = Query::new(format!(
            "UPDATE tw_runs SET scheduled_at = ?, trigger_type = ? \
             WHERE id = ? AND state{} AND owner_node = ?",
            state_in(RunMove::CatchUp.from_states())
        ))
        .bind(catch_up.at)
        .bind(TriggerType::Misfire.as_str())
        .bind(catch_up.run_id)
        .bind(catch_up.node_id.as_str());
        B::execute(&mut *tx, q).await?;
        tx.commit().await?;
        Ok(Some(Run {
            scheduled_at: catch_up.at,
            trigger_type: TriggerType::Misfire,
            ..run
        }))
    }

    async fn runs_find_lost(&self, query: LostQuery) -> Result<Vec<Run>, Error> {
        if query.limit == 0 {
            return Ok(Vec::new());
        }
        // As XXL-JOB: the executor counts as gone when no registry row under its address has
        // beaten lately, whatever app it registered for.
        let q = Query::new(format!(
            "SELECT {RUN_COLUMNS} FROM tw_runs WHERE {} AND dispatched_at < ? \
             AND NOT EXISTS (SELECT 1 FROM tw_registry \
             WHERE tw_registry.address = tw_runs.executor_address \
             AND tw_registry.updated_at >= ?) ORDER BY dispatched_at, id LIMIT ?",
            // Only dispatched runs have an executor to be gone; a `sending` run's maybe is
            // resolved by asking, not by the monitor.
            open_runs_in(B::KIND, &[RunMove::Dispatch.to()])
        ))
        .bind(query.dispatched_before)
        .bind(query.alive_since)
        .bind(i64::from(query.limit));
        convert(self.fetch_all::<RunRow>(q).await?)
    }

    async fn runs_dispatched_to(&self, query: DispatchedTo) -> Result<Vec<Run>, Error> {
        if query.limit == 0 {
            return Ok(Vec::new());
        }
        let q = Query::new(format!(
            "SELECT {RUN_COLUMNS} FROM tw_runs WHERE {} AND executor_address = ? \
             AND dispatched_at < ? ORDER BY dispatched_at, id LIMIT ?",
            open_runs_in(B::KIND, &[RunMove::Dispatch.to()])
        ))
        .bind(query.address)
        .bind(query.dispatched_before)
        .bind(i64::from(query.limit));
        convert(self.fetch_all::<RunRow>(q).await?)
    }

    async fn runs_purge(&self, purge: RunPurge) -> Result<u64, Error> {
        if purge.limit == 0 {
            return Ok(0);
        }
        // Select, then delete by id: portable (MySQL refuses LIMIT in an IN subquery, SQLite
        // has no DELETE ... LIMIT) and each batch stays one short statement.
        let select = Query::new(format!(
            "SELECT id FROM tw_runs WHERE scheduled_at < ? AND state{} \
             ORDER BY scheduled_at, id LIMIT ?",
            *FINAL_STATES
        ))
        .bind(purge.before)
        .bind(i64::from(purge.limit));
        let ids: Vec<i64> = self
            .fetch_all::<(i64,)>(select)
            .await?
            .into_iter()
            .map(|(id,)| id)
            .collect();
        let mut deleted = 0;
        for chunk in ids.chunks(ROWS_PER_STATEMENT) {
            let mut q = Query::new("DELETE FROM tw_alarm_deliveries WHERE run_id IN ").one_off();
            q.push_list(chunk.iter().copied());
            self.execute(q).await?;
            let mut q = Query::new("DELETE FROM tw_runs WHERE id IN ").one_off();
            q.push_list(chunk.iter().copied());
            deleted += self.execute(q).await?;
        }
        Ok(deleted)
    }

    async fn reports_purge(&self, before: i64) -> Result<u64, Error> {
        let q = Query::new("DELETE FROM tw_run_reports WHERE day < ?").bind(before);
        Ok(self.execute(q).await?)
    }

    async fn report_upsert(&self, report: RunReport) -> Result<(), Error> {
        let mut q = Query::new(format!(
            "INSERT INTO tw_run_reports ({REPORT_COLUMNS}) VALUES (?, ?, ?, ?, ?)"
        ))
        .bind(report.day)
        .bind(report.running)
        .bind(report.succeeded)
        .bind(report.failed)
        .bind(report.updated_at);
        q.push(&B::KIND.on_conflict_update(
            "day",
            &[
                "running_count",
                "succeeded_count",
                "failed_count",
                "updated_at",
            ],
        ));
        self.execute(q).await?;
        Ok(())
    }

    async fn reports_list(&self, range: TimeRange) -> Result<Vec<RunReport>, Error> {
        let mut q = Query::new(format!(
            "SELECT {REPORT_COLUMNS} FROM tw_run_reports WHERE 1 = 1"
        ));
        push_range(&mut q, "day", range);
        q.push(" ORDER BY day");
        Ok(self
            .fetch_all::<ReportRow>(q)
            .await?
            .into_iter()
            .map(RunReport::from)
            .collect())
    }

    async fn runs_clear(&self, clear: RunClear) -> Result<u64, Error> {
        let mut deleted = 0;
        loop {
            // In batches, as retention does: each statement stays short on a big ledger.
            let mut select = Query::new(format!(
                "SELECT id FROM tw_runs WHERE scheduled_at < ? AND state{}",
                *FINAL_STATES
            ))
            .bind(clear.before);
            if let Some(job) = clear.job_id {
                select.push(" AND job_id = ").push_bind(job);
            }
            if let Some(group) = clear.group_id {
                select.push(" AND group_id = ").push_bind(group);
            }
            select
                .push(" ORDER BY id LIMIT ")
                .push_bind(ROWS_PER_STATEMENT as i64);
            let ids: Vec<i64> = self
                .fetch_all::<(i64,)>(select)
                .await?
                .into_iter()
                .map(|(id,)| id)
                .collect();
            if ids.is_empty() {
                return Ok(deleted);
            }
            let mut q = Query::new("DELETE FROM tw_runs WHERE id IN ").one_off();
            q.push_list(ids.iter().copied());
            deleted += self.execute(q).await?;
            if ids.len() < ROWS_PER_STATEMENT {
                return Ok(deleted);
            }
        }
    }
}

/// Refuses dispatch records without an executor address, or of no node.
fn check_dispatch_records(batch: &MarkDispatched) -> Result<(), Error> {
    if batch.runs.is_empty() {
        return Ok(());
    }
    check_required("node id", &batch.node_id, NODE_ID_MAX)?;
    for d in &batch.runs {
        check_required("executor address", &d.address, ADDRESS_MAX)?;
    }
    Ok(())
}
