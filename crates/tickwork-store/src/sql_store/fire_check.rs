//! The ledger's check of scheduled fires: its cursor, the windows it reads, and its alerts.

use tickwork_core::fire_check::{DoubledFire, FireAlert, FireAlertKind, FireRecord};

use super::alarms::{DeliveryNew, insert_delivery};
use super::*;

const FIRE_ALERT_COLUMNS: &str =
    "id, job_id, kind, fires, first_at, last_at, worst_late_ms, run_id, created_at";

type FireAlertRow = (i64, i64, String, i64, i64, i64, i64, i64, i64);

fn fire_alert(row: FireAlertRow) -> Result<FireAlertRecord, Error> {
    let (id, job_id, kind, fires, first_at, last_at, worst_late_ms, run_id, created_at) = row;
    Ok(FireAlertRecord {
        id,
        alert: FireAlert {
            job_id,
            kind: parse::<FireAlertKind>("kind", &kind)?,
            fires,
            first_at,
            last_at,
            worst_late_ms,
            run_id,
        },
        created_at,
    })
}

/// The states a fire may be judged missed in, or still wait in: the others are judged by
/// their lateness alone.
static UNSETTLED_OR_MISSED: LazyLock<String> = LazyLock::new(|| {
    use RunState::*;
    state_in(&[Planned, Sending, Misfired, Failed, Lost])
});

fn check_scan(scan: &FireScan) -> Result<(), Error> {
    if scan.until < scan.after {
        return Err(Error::Invalid(format!(
            "the window ends ({}) before it starts ({})",
            scan.until, scan.after
        )));
    }
    Ok(())
}

#[async_trait]
impl<B: Backend> FireCheckStore for SqlStore<B> {
    async fn fire_cursor_open(&self, open: CursorOpen) -> Result<i64, Error> {
        check_required("cursor name", &open.name, LEASE_NAME_MAX)?;
        let mut q = Query::new(B::KIND.insert_or_skip());
        q.push("tw_ledger_cursors (name, position, updated_at) VALUES (?, ?, ?)");
        let mut q = q.bind(&open.name).bind(open.start).bind(open.now);
        q.push(&B::KIND.on_conflict_skip("name"));
        self.execute(q).await?;
        let read =
            Query::new("SELECT position FROM tw_ledger_cursors WHERE name = ?").bind(&open.name);
        match self.fetch_optional::<(i64,)>(read).await? {
            Some((position,)) => Ok(position),
            None => Err(Error::corrupt(format!(
                "cursor {:?} was written and is not there",
                open.name
            ))),
        }
    }

    async fn fires_to_check(&self, scan: FireScan) -> Result<Vec<FireRecord>, Error> {
        check_scan(&scan)?;
        let mut q = Query::new(format!(
            "SELECT r.id, r.job_id, r.fire_key, r.scheduled_at, r.state, r.trigger_code, \
             r.dispatched_at, r.finished_at, COALESCE(j.lateness_budget_ms, 0) \
             FROM tw_runs r LEFT JOIN tw_jobs j ON j.id = r.job_id \
             WHERE r.scheduled_at > ? AND r.scheduled_at <= ? AND r.fire_key IS NOT NULL \
             AND (r.state{} OR (j.lateness_budget_ms > 0 AND \
             COALESCE(r.dispatched_at, r.finished_at) - r.scheduled_at > j.lateness_budget_ms)) \
             ORDER BY r.scheduled_at, r.id",
            *UNSETTLED_OR_MISSED
        ))
        .bind(scan.after)
        .bind(scan.until);
        if let Some(limit) = scan.limit {
            q.push(" LIMIT ").push_bind(i64::from(limit));
        }
        type Row = (
            i64,
            i64,
            i64,
            i64,
            String,
            i32,
            Option<i64>,
            Option<i64>,
            i64,
        );
        self.fetch_all::<Row>(q)
            .await?
            .into_iter()
            .map(|r| {
                Ok(FireRecord {
                    run_id: r.0,
                    job_id: r.1,
                    fire_key: r.2,
                    scheduled_at: r.3,
                    state: parse::<RunState>("state", &r.4)?,
                    trigger_code: r.5,
                    dispatched_at: r.6,
                    finished_at: r.7,
                    lateness_budget_ms: r.8,
                })
            })
            .collect()
    }

    async fn fires_doubled(&self, scan: FireScan) -> Result<Vec<DoubledFire>, Error> {
        check_scan(&scan)?;
        let q = Query::new(
            "SELECT job_id, fire_key, MIN(scheduled_at), COUNT(*), MAX(id) FROM tw_runs \
             WHERE scheduled_at > ? AND scheduled_at <= ? AND fire_key IS NOT NULL \
             GROUP BY job_id, fire_key HAVING COUNT(*) > 1 ORDER BY MIN(scheduled_at), job_id",
        )
        .bind(scan.after)
        .bind(scan.until);
        Ok(self
            .fetch_all::<(i64, i64, i64, i64, i64)>(q)
            .await?
            .into_iter()
            .map(
                |(job_id, fire_key, scheduled_at, runs, run_id)| DoubledFire {
                    job_id,
                    fire_key,
                    scheduled_at,
                    runs,
                    run_id,
                },
            )
            .collect())
    }

    async fn jobs_first_unclaimed_fire(&self, not_before: i64) -> Result<Option<i64>, Error> {
        // i64::MAX is a fixed-delay job waiting for its run: nothing of it is unclaimed.
        let q = Query::new(
            "SELECT MIN(next_fire_at) FROM tw_jobs WHERE status = 'running' \
             AND next_fire_at >= ? AND next_fire_at < ?",
        )
        .bind(not_before)
        .bind(i64::MAX);
        Ok(self
            .fetch_optional::<(Option<i64>,)>(q)
            .await?
            .and_then(|(min,)| min))
    }

    async fn fire_alerts_record(
        &self,
        record: FireAlertsRecord,
    ) -> Result<Option<Vec<FireAlertWritten>>, Error> {
        if record.until <= record.from {
            return Err(Error::Invalid(format!(
                "the cursor must move forward, not from {} to {}",
                record.from, record.until
            )));
        }
        retry_deadlocks(|| async {
            let mut tx = B::begin_write(&self.writes).await?;
            let moved = Query::new(
                "UPDATE tw_ledger_cursors SET position = ?, updated_at = ? \
                 WHERE name = ? AND position = ?",
            )
            .bind(record.until)
            .bind(record.now)
            .bind(&record.name)
            .bind(record.from);
            if B::execute(&mut *tx, moved).await?.rows == 0 {
                tx.commit().await?;
                return Ok(None);
            }
            let mut written = Vec::with_capacity(record.alerts.len());
            for new in &record.alerts {
                let a = &new.alert;
                let recent = Query::new(
                    "SELECT id FROM tw_fire_alerts WHERE job_id = ? AND kind = ? \
                     AND created_at >= ? ORDER BY created_at DESC, id DESC LIMIT 1",
                )
                .bind(a.job_id)
                .bind(a.kind.as_str())
                .bind(record.quiet_since);
                if let Some((id,)) = B::fetch_optional::<(i64,)>(&mut *tx, recent).await? {
                    let add = Query::new(
                        "UPDATE tw_fire_alerts SET fires = fires + ?, \
                         last_at = CASE WHEN last_at < ? THEN ? ELSE last_at END, \
                         worst_late_ms = CASE WHEN worst_late_ms < ? THEN ? ELSE worst_late_ms END \
                         WHERE id = ?",
                    )
                    .bind(a.fires)
                    .bind(a.last_at)
                    .bind(a.last_at)
                    .bind(a.worst_late_ms)
                    .bind(a.worst_late_ms)
                    .bind(id);
                    B::execute(&mut *tx, add).await?;
                    written.push(FireAlertWritten::Added {
                        id,
                        alert: a.clone(),
                    });
                    continue;
                }
                let q = Query::new(
                    "INSERT INTO tw_fire_alerts (job_id, kind, fires, first_at, last_at, \
                     worst_late_ms, run_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                )
                .bind(a.job_id)
                .bind(a.kind.as_str())
                .bind(a.fires)
                .bind(a.first_at)
                .bind(a.last_at)
                .bind(a.worst_late_ms)
                .bind(a.run_id)
                .bind(record.now);
                let id = Self::insert_id(&mut tx, q)
                    .await?
                    .ok_or_else(|| Error::corrupt("the alert insert wrote no row".to_owned()))?;
                let mut channels = new.channel_ids.clone();
                channels.sort_unstable();
                channels.dedup();
                for channel_id in channels {
                    let delivery = DeliveryNew {
                        run_id: a.run_id,
                        job_id: a.job_id,
                        alert_id: id,
                        channel_id,
                        due_at: record.now,
                        now: record.now,
                        enabled_only: true,
                    };
                    insert_delivery::<B>(&mut tx, delivery).await?;
                }
                written.push(FireAlertWritten::New(FireAlertRecord {
                    id,
                    alert: a.clone(),
                    created_at: record.now,
                }));
            }
            tx.commit().await?;
            Ok(Some(written))
        })
        .await
    }

    async fn fire_alert_get(&self, id: i64) -> Result<FireAlertRecord, Error> {
        let q = Query::new(format!(
            "SELECT {FIRE_ALERT_COLUMNS} FROM tw_fire_alerts WHERE id = ?"
        ))
        .bind(id);
        match self.fetch_optional::<FireAlertRow>(q).await? {
            Some(row) => fire_alert(row),
            None => Err(Error::not_found("fire alert", id)),
        }
    }

    async fn fire_alerts_totals(&self, range: TimeRange) -> Result<Vec<FireAlertTotal>, Error> {
        // SUM of a BIGINT is NUMERIC on PostgreSQL and DECIMAL on MySQL: cast back.
        let int = match B::KIND {
            Kind::MySql => "SIGNED",
            Kind::Sqlite | Kind::Postgres => "BIGINT",
        };
        let mut q = Query::new(format!(
            "SELECT kind, COUNT(*), CAST(SUM(fires) AS {int}) FROM tw_fire_alerts WHERE 1 = 1"
        ));
        push_range(&mut q, "created_at", range);
        q.push(" GROUP BY kind");
        let mut totals = Vec::new();
        for (kind, alerts, fires) in self.fetch_all::<(String, i64, i64)>(q).await? {
            totals.push(FireAlertTotal {
                kind: parse::<FireAlertKind>("kind", &kind)?,
                alerts: alerts.max(0) as u64,
                fires: fires.max(0) as u64,
            });
        }
        totals.sort_by_key(|t| t.kind);
        Ok(totals)
    }

    async fn fire_alerts_recent(
        &self,
        range: TimeRange,
        limit: u32,
    ) -> Result<Vec<FireAlertRecord>, Error> {
        let mut q = Query::new(format!(
            "SELECT {FIRE_ALERT_COLUMNS} FROM tw_fire_alerts WHERE 1 = 1"
        ));
        push_range(&mut q, "created_at", range);
        q.push(" ORDER BY id DESC LIMIT ")
            .push_bind(i64::from(limit));
        self.fetch_all::<FireAlertRow>(q)
            .await?
            .into_iter()
            .map(fire_alert)
            .collect()
    }

    async fn fire_alerts_purge(&self, before: i64) -> Result<u64, Error> {
        let q = Query::new("DELETE FROM tw_fire_alerts WHERE created_at < ?").bind(before);
        Ok(self.execute(q).await?)
    }
}
