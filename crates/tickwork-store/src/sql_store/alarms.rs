//! Alarms: the runs that call for one, channels and deliveries.

use tickwork_core::alarm::{self, Grouping, LatestAlarm};

use super::*;

/// How often a queueing round starts over because another node queued one of its runs first.
const QUEUE_RACES: u32 = 5;

impl<B: Backend> SqlStore<B> {
    /// The ids of the jobs whose alarm channels list `name`.
    async fn jobs_using_channel(conn: &mut Conn<B>, name: &str) -> Result<Vec<i64>, Error> {
        // LIKE narrows the scan; the exact match is decided on the split list.
        let q = Query::new(
            "SELECT id, alarm_channels FROM tw_jobs WHERE LOWER(alarm_channels) LIKE ? \
             ESCAPE '!' ORDER BY id",
        )
        .bind(contains_pattern(name));
        Ok(B::fetch_all::<(i64, String)>(conn, q)
            .await?
            .into_iter()
            .filter(|(_, list)| split_list(list).any(|n| n == name))
            .map(|(id, _)| id)
            .collect())
    }

    /// One attempt of [`AlarmStore::alarm_deliveries_queue`]: what it wrote, or `None` when
    /// another node queued one of the runs first (nothing is then written).
    async fn queue_deliveries_once(
        &self,
        queue: &AlarmDeliveriesQueue,
    ) -> Result<Option<AlarmDeliveriesQueued>, Error> {
        let mut tx = B::begin_write(&self.writes).await?;
        let mut still =
            Query::new("SELECT id, job_id FROM tw_runs WHERE alarm_status = ").one_off();
        still.push_bind(AlarmStatus::Queued.code());
        still.push(" AND id IN ");
        still.push_list(queue.runs.iter().map(|r| r.run_id));
        let jobs: HashMap<i64, i64> = B::fetch_all::<(i64, i64)>(&mut *tx, still)
            .await?
            .into_iter()
            .collect();
        let mut written = AlarmDeliveriesQueued::default();
        for run in &queue.runs {
            let Some(&job_id) = jobs.get(&run.run_id) else {
                continue;
            };
            let mut wanted = run.channel_ids.clone();
            wanted.sort_unstable();
            wanted.dedup();
            let (mut own, mut joined) = (0, 0);
            for &channel in &wanted {
                let latest = latest_alarm::<B>(&mut tx, job_id, channel).await?;
                let window = queue.group_window_ms;
                let mut grouping = alarm::group(latest.map(|(_, l)| l), queue.now, window);
                if let (Grouping::Join, Some((id, l))) = (grouping, latest) {
                    let join = Query::new(
                        "UPDATE tw_alarm_deliveries SET grouped_runs = grouped_runs + 1, \
                         last_run_id = ?, updated_at = ? WHERE id = ? AND state = 'pending' \
                         AND attempts = 0 AND claimed_by IS NULL",
                    )
                    .bind(run.run_id)
                    .bind(queue.now)
                    .bind(id);
                    if B::execute(&mut *tx, join).await?.rows == 1 {
                        joined += 1;
                        continue;
                    }
                    // A sender took it in between: this run's alarm waits a window after it.
                    let taken = LatestAlarm { open: false, ..l };
                    grouping = alarm::group(Some(taken), queue.now, window);
                }
                let due_at = match grouping {
                    Grouping::New { due_at } => due_at,
                    Grouping::Join => queue.now,
                };
                own += insert_delivery::<B>(
                    &mut tx,
                    DeliveryNew {
                        run_id: run.run_id,
                        job_id,
                        alert_id: 0,
                        channel_id: channel,
                        due_at,
                        now: queue.now,
                        enabled_only: false,
                    },
                )
                .await?;
            }
            written.deliveries += own;
            written.joined += u64::from(own == 0 && joined > 0);
            let status = if own == 0 && joined > 0 {
                AlarmStatus::Grouped
            } else if own == 0 {
                AlarmStatus::NotNeeded
            } else {
                AlarmStatus::Delivering
            };
            let q = Query::new(format!(
                "UPDATE tw_runs SET alarm_status = ? WHERE id = ? AND alarm_status{}",
                alarm_in(AlarmStatus::sources_of(status))
            ))
            .bind(status.code())
            .bind(run.run_id);
            if B::execute(&mut *tx, q).await?.rows == 0 {
                tx.rollback().await?;
                return Ok(None);
            }
        }
        tx.commit().await?;
        Ok(Some(written))
    }

    async fn channel_in(conn: &mut Conn<B>, id: i64) -> Result<AlarmChannel, Error> {
        let q = Query::new(format!(
            "SELECT {ALARM_CHANNEL_COLUMNS} FROM tw_alarm_channels WHERE id = ?"
        ))
        .bind(id);
        match B::fetch_optional::<AlarmChannelRow>(conn, q).await? {
            Some(row) => row.try_into(),
            None => Err(Error::not_found("alarm channel", id)),
        }
    }
}

/// A pending delivery to write on one channel: a failed run's alarm, or a fire alert's.
pub(super) struct DeliveryNew {
    pub(super) run_id: i64,
    pub(super) job_id: i64,
    /// The fire alert it sends; 0 for a failed run's alarm.
    pub(super) alert_id: i64,
    pub(super) channel_id: i64,
    /// When it is first due.
    pub(super) due_at: i64,
    pub(super) now: i64,
    /// Writes nothing on a disabled channel (a fire alert takes its job's list as it is; a
    /// run's channels come filtered).
    pub(super) enabled_only: bool,
}

/// Writes `d`; how many rows it wrote: none for an unknown (or, with `enabled_only`, disabled)
/// channel, or when the delivery is there already. The channel's name and kind are copied, so
/// the row still reads well after the channel is renamed or deleted.
pub(super) async fn insert_delivery<B: Backend>(
    conn: &mut Conn<B>,
    d: DeliveryNew,
) -> Result<u64, Error> {
    let mut q = Query::new(B::KIND.insert_or_skip());
    q.push(
        "tw_alarm_deliveries (run_id, job_id, alert_id, channel_id, channel_name, kind, state, \
         attempts, next_attempt_at, due_at, created_at, updated_at) \
         SELECT ?, ?, ?, id, name, kind, 'pending', 0, ?, ?, ?, ? \
         FROM tw_alarm_channels WHERE id = ?",
    );
    let mut q = q
        .bind(d.run_id)
        .bind(d.job_id)
        .bind(d.alert_id)
        .bind(d.due_at)
        .bind(d.due_at)
        .bind(d.now)
        .bind(d.now)
        .bind(d.channel_id);
    if d.enabled_only {
        q.push(" AND enabled = 1");
    }
    q.push(&B::KIND.on_conflict_skip("run_id, channel_id, alert_id"));
    Ok(B::execute(&mut *conn, q).await?.rows)
}

/// The newest delivery of a run of `job_id` on `channel`, and where it stands.
async fn latest_alarm<B: Backend>(
    conn: &mut Conn<B>,
    job_id: i64,
    channel: i64,
) -> Result<Option<(i64, LatestAlarm)>, Error> {
    let q = Query::new(
        "SELECT id, due_at, state, attempts, claimed_by FROM tw_alarm_deliveries \
         WHERE job_id = ? AND channel_id = ? AND alert_id = 0 \
         ORDER BY due_at DESC, id DESC LIMIT 1",
    )
    .bind(job_id)
    .bind(channel);
    let row = B::fetch_optional::<(i64, i64, String, i32, Option<String>)>(conn, q).await?;
    Ok(row.map(|(id, due_at, state, attempts, claimed_by)| {
        let open =
            state == DeliveryState::Pending.as_str() && attempts == 0 && claimed_by.is_none();
        (id, LatestAlarm { due_at, open })
    }))
}

/// Validates a channel's name and config.
fn check_channel(name: &str, config: &str) -> Result<(), Error> {
    check_required("name", name, CHANNEL_NAME_MAX)?;
    if name.contains(',') || name.trim() != name {
        return Err(Error::Invalid(format!(
            "name {name:?} must not contain a comma or surrounding spaces"
        )));
    }
    check_bytes("config", config, TEXT_MAX_BYTES)
}

fn in_use(name: &str, jobs: &[i64]) -> Error {
    let ids: Vec<String> = jobs.iter().map(i64::to_string).collect();
    Error::Conflict(format!(
        "alarm channel {name:?} is used by job(s) {}",
        ids.join(", ")
    ))
}

#[async_trait]
impl<B: Backend> AlarmStore for SqlStore<B> {
    async fn runs_queue_alarms(&self, limit: u32) -> Result<Vec<Run>, Error> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut tx = B::begin_write(&self.writes).await?;
        let select = Query::new(format!(
            "SELECT id FROM tw_runs WHERE alarm_status{} AND {} ORDER BY id LIMIT ?{}",
            alarm_in(AlarmStatus::sources_of(AlarmStatus::Queued)),
            B::KIND.alarm_runs(),
            B::KIND.skip_locked()
        ))
        .bind(i64::from(limit));
        let ids: Vec<i64> = B::fetch_all::<(i64,)>(&mut *tx, select)
            .await?
            .into_iter()
            .map(|(id,)| id)
            .collect();
        let mut runs = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(ROWS_PER_STATEMENT) {
            let mut q = Query::new("UPDATE tw_runs SET alarm_status = ").one_off();
            q.push_bind(AlarmStatus::Queued.code());
            // `+ 0`: every new run is undecided, so an index on the column is no help next
            // to the ids (see `Kind::state_beside_ids`).
            q.push(" WHERE alarm_status + 0")
                .push(&alarm_in(AlarmStatus::sources_of(AlarmStatus::Queued)));
            q.push(" AND id IN ");
            q.push_list(chunk.iter().copied());
            B::execute(&mut *tx, q).await?;
            let mut read =
                Query::new(format!("SELECT {RUN_COLUMNS} FROM tw_runs WHERE id IN ")).one_off();
            read.push_list(chunk.iter().copied());
            for row in B::fetch_all::<RunRow>(&mut *tx, read).await? {
                runs.push(Run::try_from(row)?);
            }
        }
        tx.commit().await?;
        runs.sort_by_key(|r| r.id);
        Ok(runs)
    }

    async fn runs_awaiting_alarm(&self, limit: u32) -> Result<Vec<Run>, Error> {
        let q = Query::new(format!(
            "SELECT {RUN_COLUMNS} FROM tw_runs WHERE alarm_status{} AND {} \
             ORDER BY id LIMIT ?",
            alarm_in(&[AlarmStatus::Queued]),
            B::KIND.alarm_runs()
        ))
        .bind(i64::from(limit));
        convert(self.fetch_all::<RunRow>(q).await?)
    }

    async fn alarm_channel_create(&self, channel: AlarmChannelNew) -> Result<AlarmChannel, Error> {
        check_channel(&channel.name, &channel.config)?;
        let q = Query::new(
            "INSERT INTO tw_alarm_channels (name, kind, config, enabled, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(&channel.name)
        .bind(channel.kind.as_str())
        .bind(&channel.config)
        .bind(i32::from(channel.enabled))
        .bind(channel.now)
        .bind(channel.now);
        let mut conn = self.writes.acquire().await?;
        let name = &channel.name;
        let id = Self::insert_id(&mut conn, q)
            .await
            .map_err(|e| {
                unique_or(e, || {
                    Error::Conflict(format!("alarm channel name {name:?} is taken"))
                })
            })?
            .ok_or_else(|| Error::corrupt("the channel insert wrote no row".to_owned()))?;
        Ok(AlarmChannel {
            id,
            name: channel.name,
            kind: channel.kind,
            config: channel.config,
            enabled: channel.enabled,
            created_at: channel.now,
            updated_at: channel.now,
        })
    }

    async fn alarm_channel_update(
        &self,
        channel: AlarmChannelUpdate,
    ) -> Result<AlarmChannel, Error> {
        check_channel(&channel.name, &channel.config)?;
        let mut tx = B::begin_write(&self.writes).await?;
        let old = Self::channel_in(&mut tx, channel.id).await?;
        if old.name != channel.name {
            let jobs = Self::jobs_using_channel(&mut tx, &old.name).await?;
            if !jobs.is_empty() {
                return Err(in_use(&old.name, &jobs));
            }
        }
        let name = &channel.name;
        let q = Query::new(
            "UPDATE tw_alarm_channels SET name = ?, kind = ?, config = ?, enabled = ?, \
             updated_at = ? WHERE id = ?",
        )
        .bind(name)
        .bind(channel.kind.as_str())
        .bind(&channel.config)
        .bind(i32::from(channel.enabled))
        .bind(channel.now)
        .bind(channel.id);
        B::execute(&mut *tx, q).await.map_err(|e| {
            unique_or(e, || {
                Error::Conflict(format!("alarm channel name {name:?} is taken"))
            })
        })?;
        let updated = Self::channel_in(&mut tx, channel.id).await?;
        tx.commit().await?;
        Ok(updated)
    }

    async fn alarm_channel_delete(&self, id: i64, now: i64) -> Result<(), Error> {
        let mut tx = B::begin_write(&self.writes).await?;
        let channel = Self::channel_in(&mut tx, id).await?;
        let jobs = Self::jobs_using_channel(&mut tx, &channel.name).await?;
        if !jobs.is_empty() {
            return Err(in_use(&channel.name, &jobs));
        }
        let q = Query::new(
            "UPDATE tw_alarm_deliveries SET state = 'failed', last_error = ?, \
             claimed_by = NULL, claimed_until = NULL, updated_at = ? \
             WHERE channel_id = ? AND state = 'pending'",
        )
        .bind("the alarm channel was deleted")
        .bind(now)
        .bind(id);
        B::execute(&mut *tx, q).await?;
        B::execute(
            &mut *tx,
            Query::new("DELETE FROM tw_alarm_channels WHERE id = ?").bind(id),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn alarm_channel_get(&self, id: i64) -> Result<AlarmChannel, Error> {
        let mut conn = self.pool.acquire().await?;
        Self::channel_in(&mut conn, id).await
    }

    async fn alarm_channels_list(&self) -> Result<Vec<AlarmChannel>, Error> {
        let q = Query::new(format!(
            "SELECT {ALARM_CHANNEL_COLUMNS} FROM tw_alarm_channels ORDER BY id"
        ));
        convert(self.fetch_all::<AlarmChannelRow>(q).await?)
    }

    async fn alarm_deliveries_queue(
        &self,
        queue: AlarmDeliveriesQueue,
    ) -> Result<AlarmDeliveriesQueued, Error> {
        if queue.runs.is_empty() {
            return Ok(AlarmDeliveriesQueued::default());
        }
        if queue.group_window_ms < 0 {
            return Err(Error::Invalid(
                "alarm group window must not be negative".to_owned(),
            ));
        }
        // A run another node queued between our read and our write (an admin that lost the
        // maintenance lease mid-round) makes the batch start over without it, so no run is
        // counted in a delivery twice.
        for _ in 0..QUEUE_RACES {
            let written = retry_deadlocks(|| self.queue_deliveries_once(&queue)).await?;
            if let Some(written) = written {
                return Ok(written);
            }
        }
        Err(Error::Conflict(
            "alarm deliveries kept being queued by another node at once".to_owned(),
        ))
    }

    async fn alarm_deliveries_claim_due(
        &self,
        claim: DeliveryClaim,
    ) -> Result<Vec<AlarmDelivery>, Error> {
        check_required("node id", &claim.node_id, NODE_ID_MAX)?;
        if claim.limit == 0 {
            return Ok(Vec::new());
        }
        if claim.hold_ms <= 0 {
            return Err(Error::Invalid("claim hold must be positive".to_owned()));
        }
        retry_deadlocks(|| async {
            let mut tx = B::begin_write(&self.writes).await?;
            let select = Query::new(format!(
                "SELECT id FROM tw_alarm_deliveries WHERE state = 'pending' \
                 AND next_attempt_at <= ? AND (claimed_until IS NULL OR claimed_until <= ?) \
                 ORDER BY next_attempt_at, id LIMIT ?{}",
                B::KIND.skip_locked()
            ))
            .bind(claim.now)
            .bind(claim.now)
            .bind(i64::from(claim.limit));
            let ids: Vec<i64> = B::fetch_all::<(i64,)>(&mut *tx, select)
                .await?
                .into_iter()
                .map(|(id,)| id)
                .collect();
            if ids.is_empty() {
                // Ended here, not by the drop: a dropped transaction is rolled back only when
                // its connection is next used, and until then InnoDB keeps the locks of the
                // rows this SELECT looked at, which the next claim would skip.
                tx.commit().await?;
                return Ok(Vec::new());
            }
            let mut q = Query::new("UPDATE tw_alarm_deliveries SET claimed_by = ").one_off();
            q.push_bind(claim.node_id.as_str());
            q.push(", claimed_until = ")
                .push_bind(claim.now.saturating_add(claim.hold_ms));
            q.push(" WHERE state = 'pending' AND id IN ");
            q.push_list(ids.iter().copied());
            B::execute(&mut *tx, q).await?;
            let mut read = Query::new(format!(
                "SELECT {DELIVERY_COLUMNS} FROM tw_alarm_deliveries WHERE claimed_by = "
            ))
            .one_off();
            read.push_bind(claim.node_id.as_str());
            read.push(" AND id IN ");
            read.push_list(ids.iter().copied());
            read.push(" ORDER BY next_attempt_at, id");
            let rows = convert(B::fetch_all::<DeliveryRow>(&mut *tx, read).await?)?;
            tx.commit().await?;
            Ok(rows)
        })
        .await
    }

    async fn alarm_delivery_finish(&self, finish: DeliveryFinish) -> Result<bool, Error> {
        let (state, next, error, sent_at) = match &finish.outcome {
            DeliveryOutcome::Sent => (DeliveryState::Sent, None, None, Some(finish.now)),
            DeliveryOutcome::Retry {
                error,
                next_attempt_at,
            } => (
                DeliveryState::Pending,
                Some(*next_attempt_at),
                clip(Some(error)),
                None,
            ),
            DeliveryOutcome::Failed { error } => {
                (DeliveryState::Failed, None, clip(Some(error)), None)
            }
        };
        retry_deadlocks(|| async {
            let mut tx = B::begin_write(&self.writes).await?;
            let mut q = Query::new(
                "UPDATE tw_alarm_deliveries SET state = ?, attempts = attempts + 1, \
                 claimed_by = NULL, claimed_until = NULL, updated_at = ?",
            )
            .bind(state.as_str())
            .bind(finish.now);
            if let Some(next) = next {
                q.push(", next_attempt_at = ").push_bind(next);
            }
            if error.is_some() {
                q.push(", last_error = ").push_bind(error.clone());
            }
            if let Some(at) = sent_at {
                q.push(", sent_at = ").push_bind(at);
            }
            q.push(" WHERE id = ").push_bind(finish.id);
            q.push(" AND state = 'pending' AND claimed_by = ")
                .push_bind(finish.node_id.as_str());
            if B::execute(&mut *tx, q).await?.rows == 0 {
                // Ended here for the same reason as in the claim: no locks left behind.
                tx.commit().await?;
                return Ok(false);
            }
            let run_status = match state {
                DeliveryState::Pending => None,
                DeliveryState::Sent => Some(AlarmStatus::Sent),
                DeliveryState::Failed => Some(AlarmStatus::SendFailed),
            };
            if let Some(status) = run_status {
                // A failure on one channel is what the run shows, whatever the others did.
                let q = Query::new(format!(
                    "UPDATE tw_runs SET alarm_status = ? WHERE id = \
                     (SELECT run_id FROM tw_alarm_deliveries WHERE id = ? AND alert_id = 0) \
                     AND alarm_status{}",
                    alarm_in(AlarmStatus::sources_of(status))
                ))
                .bind(status.code())
                .bind(finish.id);
                B::execute(&mut *tx, q).await?;
            }
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    async fn alarm_delivery_get(&self, id: i64) -> Result<AlarmDelivery, Error> {
        let q = Query::new(format!(
            "SELECT {DELIVERY_COLUMNS} FROM tw_alarm_deliveries WHERE id = ?"
        ))
        .bind(id);
        match self.fetch_optional::<DeliveryRow>(q).await? {
            Some(row) => row.try_into(),
            None => Err(Error::not_found("alarm delivery", id)),
        }
    }

    async fn alarm_deliveries_list(
        &self,
        filter: DeliveryFilter,
    ) -> Result<Paged<AlarmDelivery>, Error> {
        let (offset, limit) = check_page(filter.page)?;
        let mut clause = Query::new(" WHERE 1 = 1");
        if let Some(run) = filter.run_id {
            clause.push(" AND run_id = ").push_bind(run);
        }
        if let Some(job) = filter.job_id {
            clause.push(" AND job_id = ").push_bind(job);
        }
        if let Some(state) = filter.state {
            clause.push(" AND state = ").push_bind(state.as_str());
        }
        let total = self.count("tw_alarm_deliveries", &clause).await?;
        let mut q = Query::new(format!(
            "SELECT {DELIVERY_COLUMNS} FROM tw_alarm_deliveries"
        ));
        q.append(&clause);
        q.push(" ORDER BY id DESC LIMIT ").push_bind(limit);
        q.push(" OFFSET ").push_bind(offset);
        let items = convert(self.fetch_all::<DeliveryRow>(q).await?)?;
        Ok(Paged { items, total })
    }
}
