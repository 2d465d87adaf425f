//! The audit log.

use super::*;

/// The columns an audit insert writes, in [`audit_args`] order.
pub(super) const AUDIT_INSERT_COLUMNS: &str = AUDIT_COLUMNS.split_at("id, ".len()).1;

/// Refuses a record the columns cannot hold.
pub(super) fn check_audit(entry: &AuditNew) -> Result<(), Error> {
    check_required("actor", &entry.actor, USERNAME_MAX)?;
    check_required("action", &entry.action, ACTION_MAX)?;
    check_required("target type", &entry.target_type, TARGET_TYPE_MAX)?;
    check_len("target id", &entry.target_id, TARGET_ID_MAX)?;
    for (field, text) in [("before", &entry.before), ("after", &entry.after)] {
        if let Some(t) = text {
            check_bytes(field, t, GLUE_MAX_BYTES)?;
        }
    }
    Ok(())
}

/// The values of [`AUDIT_INSERT_COLUMNS`].
pub(super) fn audit_args(entry: AuditNew) -> [Arg; 8] {
    [
        entry.at.into(),
        entry.actor_id.into(),
        entry.actor.into(),
        entry.action.into(),
        entry.target_type.into(),
        entry.target_id.into(),
        entry.before.into(),
        entry.after.into(),
    ]
}

#[async_trait]
impl<B: Backend> AuditStore for SqlStore<B> {
    async fn audit_append(&self, entry: AuditNew) -> Result<i64, Error> {
        check_audit(&entry)?;
        let q = Query::new(format!(
            "INSERT INTO tw_audit ({AUDIT_INSERT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        ));
        let q = audit_args(entry).into_iter().fold(q, Query::bind);
        let mut conn = self.writes.acquire().await?;
        Self::insert_id(&mut conn, q)
            .await?
            .ok_or_else(|| Error::corrupt("the audit insert wrote no row".to_owned()))
    }

    async fn audit_list(&self, filter: AuditFilter) -> Result<Paged<AuditEntry>, Error> {
        let (offset, limit) = check_page(filter.page)?;
        let mut w = Query::new(" WHERE 1 = 1");
        if let Some(actor) = &filter.actor {
            w.push(" AND actor = ").push_bind(actor.as_str());
        }
        if let Some(t) = &filter.target_type {
            w.push(" AND target_type = ").push_bind(t.as_str());
        }
        if let Some(t) = &filter.target_id {
            w.push(" AND target_id = ").push_bind(t.as_str());
        }
        push_range(&mut w, "at", filter.range);
        let total = self.count("tw_audit", &w).await?;
        let mut q = Query::new(format!("SELECT {AUDIT_COLUMNS} FROM tw_audit"));
        q.append(&w);
        q.push(" ORDER BY id DESC LIMIT ")
            .push_bind(limit)
            .push(" OFFSET ")
            .push_bind(offset);
        let items = self
            .fetch_all::<AuditRow>(q.one_off())
            .await?
            .into_iter()
            .map(AuditEntry::from)
            .collect();
        Ok(Paged { items, total })
    }
}
