//! Executor groups and their registry.

use super::*;

/// An executor access token travels in an HTTP header: 16 to 128 visible ASCII characters.
fn check_token(token: &str) -> Result<(), Error> {
    if !(16..=128).contains(&token.len()) || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Error::Invalid(
            "access_token must be 16 to 128 visible ascii characters".to_owned(),
        ));
    }
    Ok(())
}

/// Validates a group and joins its address list for storage.
fn group_fields(app_name: &str, title: &str, addresses: &[String]) -> Result<String, Error> {
    check_required("app_name", app_name, APP_NAME_MAX)?;
    check_len("title", title, TITLE_MAX)?;
    for a in addresses {
        check_required("address", a, ADDRESS_MAX)?;
        if a.contains(',') {
            return Err(Error::Invalid(format!("address {a:?} contains a comma")));
        }
    }
    let joined = addresses
        .iter()
        .map(|a| a.trim())
        .collect::<Vec<_>>()
        .join(",");
    check_bytes("addresses", &joined, TEXT_MAX_BYTES)?;
    Ok(joined)
}

#[async_trait]
impl<B: Backend> GroupStore for SqlStore<B> {
    async fn group_create(&self, group: GroupNew) -> Result<Group, Error> {
        let addresses = group_fields(&group.app_name, &group.title, &group.addresses)?;
        let app_name = group.app_name.trim().to_owned();
        let q = Query::new(
            "INSERT INTO tw_groups (app_name, title, address_mode, addresses, created_at, \
             updated_at) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(&app_name)
        .bind(&group.title)
        .bind(group.address_mode.as_str())
        .bind(&addresses)
        .bind(group.now)
        .bind(group.now);
        let mut conn = self.writes.acquire().await?;
        let id = Self::insert_id(&mut conn, q)
            .await
            .map_err(|e| {
                unique_or(e, || {
                    Error::Conflict(format!("app_name {app_name:?} is taken"))
                })
            })?
            .ok_or_else(|| Error::corrupt("the group insert wrote no row".to_owned()))?;
        Ok(Group {
            id,
            app_name,
            title: group.title,
            address_mode: group.address_mode,
            addresses: split_list(&addresses).map(str::to_owned).collect(),
            access_token: None,
            created_at: group.now,
            updated_at: group.now,
        })
    }

    async fn group_update(&self, group: GroupUpdate) -> Result<Group, Error> {
        let addresses = group_fields(&group.app_name, &group.title, &group.addresses)?;
        let app_name = group.app_name.trim().to_owned();
        let q = Query::new(
            "UPDATE tw_groups SET app_name = ?, title = ?, address_mode = ?, addresses = ?, \
             updated_at = ? WHERE id = ?",
        )
        .bind(&app_name)
        .bind(&group.title)
        .bind(group.address_mode.as_str())
        .bind(addresses)
        .bind(group.now)
        .bind(group.id);
        let changed = self.execute(q).await.map_err(|e| {
            unique_or(e, || {
                Error::Conflict(format!("app_name {app_name:?} is taken"))
            })
        })?;
        if changed == 0 {
            return Err(Error::not_found("group", group.id));
        }
        self.group_get(group.id).await
    }

    async fn group_delete(&self, id: i64) -> Result<(), Error> {
        let q = Query::new("DELETE FROM tw_groups WHERE id = ?").bind(id);
        let deleted = self.execute(q).await.map_err(|e| {
            if is_foreign_key_violation(&e) {
                Error::Conflict(format!("group {id} still has jobs"))
            } else {
                Error::Database(e)
            }
        })?;
        if deleted == 0 {
            return Err(Error::not_found("group", id));
        }
        Ok(())
    }

    async fn group_get(&self, id: i64) -> Result<Group, Error> {
        let q = Query::new(format!(
            "SELECT {GROUP_COLUMNS} FROM tw_groups WHERE id = ?"
        ))
        .bind(id);
        match self.fetch_optional::<GroupRow>(q).await? {
            Some(row) => row.try_into(),
            None => Err(Error::not_found("group", id)),
        }
    }

    async fn group_get_by_app_name(&self, app_name: &str) -> Result<Group, Error> {
        let q = Query::new(format!(
            "SELECT {GROUP_COLUMNS} FROM tw_groups WHERE app_name = ?"
        ))
        .bind(app_name);
        match self.fetch_optional::<GroupRow>(q).await? {
            Some(row) => row.try_into(),
            None => Err(Error::not_found("group", app_name)),
        }
    }

    async fn groups_list(&self) -> Result<Vec<Group>, Error> {
        let q = Query::new(format!("SELECT {GROUP_COLUMNS} FROM tw_groups ORDER BY id"));
        convert(self.fetch_all::<GroupRow>(q).await?)
    }

    async fn group_set_token(&self, set: GroupTokenSet) -> Result<Group, Error> {
        if let Some(t) = &set.token {
            check_token(t)?;
        }
        let q = Query::new("UPDATE tw_groups SET access_token = ?, updated_at = ? WHERE id = ?")
            .bind(set.token.clone())
            .bind(set.now)
            .bind(set.id);
        // No row changed is either no such group (the read says so) or, on MySQL, the same
        // values again.
        self.execute(q).await?;
        self.group_get(set.id).await
    }

    async fn registry_heartbeat(&self, beat: RegistryBeat) -> Result<(), Error> {
        check_required("app_name", &beat.app_name, APP_NAME_MAX)?;
        check_required("address", &beat.address, ADDRESS_MAX)?;
        let mut q =
            Query::new("INSERT INTO tw_registry (app_name, address, updated_at) VALUES (?, ?, ?)")
                .bind(beat.app_name.trim())
                .bind(beat.address.trim())
                .bind(beat.now);
        q.push(&B::KIND.on_conflict_update("app_name, address", &["updated_at"]));
        self.execute(q).await?;
        Ok(())
    }

    async fn registry_remove(&self, key: RegistryKey) -> Result<bool, Error> {
        let q = Query::new("DELETE FROM tw_registry WHERE app_name = ? AND address = ?")
            .bind(key.app_name.trim())
            .bind(key.address.trim());
        Ok(self.execute(q).await? > 0)
    }

    async fn registry_sweep(&self, older_than: i64) -> Result<u64, Error> {
        let q = Query::new("DELETE FROM tw_registry WHERE updated_at < ?").bind(older_than);
        Ok(self.execute(q).await?)
    }

    async fn registry_live_entries(&self, query: LiveQuery) -> Result<Vec<RegistryEntry>, Error> {
        let q = Query::new(format!(
            "SELECT {REGISTRY_COLUMNS} FROM tw_registry WHERE app_name = ? AND updated_at >= ?"
        ))
        .bind(query.app_name.trim())
        .bind(query.alive_since);
        // Sorted here, not in SQL: PostgreSQL orders text by the database's locale, the others
        // by bytes, and routing (first, last, round robin) must see one order everywhere.
        let mut entries: Vec<RegistryEntry> = self
            .fetch_all::<RegistryRow>(q)
            .await?
            .into_iter()
            .map(RegistryEntry::from)
            .collect();
        entries.sort_unstable_by(|a, b| a.address.cmp(&b.address));
        Ok(entries)
    }

    async fn registry_list(&self) -> Result<Vec<RegistryEntry>, Error> {
        let q = Query::new(format!("SELECT {REGISTRY_COLUMNS} FROM tw_registry"));
        let mut entries: Vec<RegistryEntry> = self
            .fetch_all::<RegistryRow>(q)
            .await?
            .into_iter()
            .map(RegistryEntry::from)
            .collect();
        entries.sort_unstable_by(|a, b| (&a.app_name, &a.address).cmp(&(&b.app_name, &b.address)));
        Ok(entries)
    }
}
