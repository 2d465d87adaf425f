//! Users, sessions and API tokens.

use super::*;

/// An operator's groups as stored: ids joined by commas.
fn group_ids_text(ids: &[i64]) -> Result<String, Error> {
    if let Some(id) = ids.iter().find(|&&id| id <= 0) {
        return Err(Error::Invalid(format!("group id {id} is not a group id")));
    }
    Ok(child_ids_text(ids))
}

#[async_trait]
impl<B: Backend> AccountStore for SqlStore<B> {
    async fn user_create(&self, user: UserNew) -> Result<User, Error> {
        let username = user.username.trim().to_owned();
        check_required("username", &username, USERNAME_MAX)?;
        check_required("password hash", &user.password_hash, PASSWORD_HASH_MAX)?;
        let groups = group_ids_text(&user.group_ids)?;
        if let Some(l) = &user.locale {
            check_len("locale", l, LOCALE_MAX)?;
        }
        let q = Query::new(format!(
            "INSERT INTO tw_users ({}) VALUES (?, ?, ?, ?, ?, 0, ?, ?)",
            &USER_COLUMNS["id, ".len()..]
        ))
        .bind(&username)
        .bind(&user.password_hash)
        .bind(user.role.as_str())
        .bind(&groups)
        .bind(user.locale.clone())
        .bind(user.now)
        .bind(user.now);
        let mut conn = self.writes.acquire().await?;
        let id = Self::insert_id(&mut conn, q)
            .await
            .map_err(|e| {
                unique_or(e, || {
                    Error::Conflict(format!("username {username:?} is taken"))
                })
            })?
            .ok_or_else(|| Error::corrupt("the user insert wrote no row".to_owned()))?;
        Ok(User {
            id,
            username,
            password_hash: user.password_hash,
            role: user.role,
            group_ids: user.group_ids,
            locale: user.locale,
            disabled: false,
            created_at: user.now,
            updated_at: user.now,
        })
    }

    async fn user_update(&self, update: UserUpdate) -> Result<User, Error> {
        let groups = group_ids_text(&update.group_ids)?;
        if let Some(l) = &update.locale {
            check_len("locale", l, LOCALE_MAX)?;
        }
        let q = Query::new(
            "UPDATE tw_users SET role = ?, group_ids = ?, locale = ?, disabled = ?, \
             updated_at = ? WHERE id = ?",
        )
        .bind(update.role.as_str())
        .bind(groups)
        .bind(update.locale)
        .bind(i64::from(update.disabled))
        .bind(update.now)
        .bind(update.id);
        if self.execute(q).await? == 0 {
            return Err(Error::not_found("user", update.id));
        }
        self.user_get(update.id).await
    }

    async fn user_set_password(&self, password: UserPassword) -> Result<(), Error> {
        check_required("password hash", &password.password_hash, PASSWORD_HASH_MAX)?;
        let q = Query::new("UPDATE tw_users SET password_hash = ?, updated_at = ? WHERE id = ?")
            .bind(password.password_hash)
            .bind(password.now)
            .bind(password.id);
        if self.execute(q).await? == 0 {
            return Err(Error::not_found("user", password.id));
        }
        Ok(())
    }

    async fn user_delete(&self, id: i64) -> Result<(), Error> {
        // Sessions and tokens go with the user (ON DELETE CASCADE on every backend).
        let q = Query::new("DELETE FROM tw_users WHERE id = ?").bind(id);
        if self.execute(q).await? == 0 {
            return Err(Error::not_found("user", id));
        }
        Ok(())
    }

    async fn user_get(&self, id: i64) -> Result<User, Error> {
        let q = Query::new(format!("SELECT {USER_COLUMNS} FROM tw_users WHERE id = ?")).bind(id);
        match self.fetch_optional::<UserRow>(q).await? {
            Some(row) => row.try_into(),
            None => Err(Error::not_found("user", id)),
        }
    }

    async fn user_get_by_username(&self, username: &str) -> Result<User, Error> {
        let q = Query::new(format!(
            "SELECT {USER_COLUMNS} FROM tw_users WHERE username = ?"
        ))
        .bind(username);
        match self.fetch_optional::<UserRow>(q).await? {
            Some(row) => row.try_into(),
            None => Err(Error::not_found("user", username)),
        }
    }

    async fn users_list(&self) -> Result<Vec<User>, Error> {
        let q = Query::new(format!("SELECT {USER_COLUMNS} FROM tw_users ORDER BY id"));
        convert(self.fetch_all::<UserRow>(q).await?)
    }

    async fn users_count(&self) -> Result<u64, Error> {
        self.count("tw_users", &Query::new("")).await
    }

    async fn session_create(&self, session: Session) -> Result<(), Error> {
        check_required("session digest", &session.id_hash, DIGEST_MAX)?;
        check_required("csrf token", &session.csrf_token, DIGEST_MAX)?;
        let q = Query::new(format!(
            "INSERT INTO tw_sessions ({SESSION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
        ))
        .bind(&session.id_hash)
        .bind(session.user_id)
        .bind(&session.csrf_token)
        .bind(session.created_at)
        .bind(session.expires_at)
        .bind(session.last_seen_at);
        self.execute(q).await.map_err(|e| {
            if is_foreign_key_violation(&e) {
                Error::Invalid(format!("user {} does not exist", session.user_id))
            } else {
                unique_or(e, || Error::Conflict("the session exists".to_owned()))
            }
        })?;
        Ok(())
    }

    async fn session_get(&self, id_hash: &str) -> Result<Option<Session>, Error> {
        let q = Query::new(format!(
            "SELECT {SESSION_COLUMNS} FROM tw_sessions WHERE id_hash = ?"
        ))
        .bind(id_hash);
        Ok(self
            .fetch_optional::<SessionRow>(q)
            .await?
            .map(Session::from))
    }

    async fn session_touch(&self, touch: SessionTouch) -> Result<bool, Error> {
        // Never moves backwards: two requests of one page may finish out of order.
        let q = Query::new(
            "UPDATE tw_sessions SET last_seen_at = CASE WHEN last_seen_at < ? THEN ? \
             ELSE last_seen_at END WHERE id_hash = ?",
        )
        .bind(touch.now)
        .bind(touch.now)
        .bind(touch.id_hash);
        Ok(self.execute(q).await? > 0)
    }

    async fn session_delete(&self, id_hash: &str) -> Result<bool, Error> {
        let q = Query::new("DELETE FROM tw_sessions WHERE id_hash = ?").bind(id_hash);
        Ok(self.execute(q).await? > 0)
    }

    async fn sessions_delete_for_user(&self, user_id: i64) -> Result<u64, Error> {
        let q = Query::new("DELETE FROM tw_sessions WHERE user_id = ?").bind(user_id);
        Ok(self.execute(q).await?)
    }

    async fn sessions_purge_expired(&self, purge: SessionPurge) -> Result<u64, Error> {
        let q = Query::new("DELETE FROM tw_sessions WHERE expires_at <= ? OR last_seen_at < ?")
            .bind(purge.now)
            .bind(purge.idle_before);
        Ok(self.execute(q).await?)
    }

    async fn api_token_create(&self, token: ApiTokenNew) -> Result<ApiToken, Error> {
        let name = token.name.trim().to_owned();
        check_required("token name", &name, TOKEN_NAME_MAX)?;
        check_required("token digest", &token.token_hash, DIGEST_MAX)?;
        let q = Query::new(
            "INSERT INTO tw_api_tokens (name, token_hash, user_id, created_at) \
             VALUES (?, ?, ?, ?)",
        )
        .bind(&name)
        .bind(&token.token_hash)
        .bind(token.user_id)
        .bind(token.now);
        let mut conn = self.writes.acquire().await?;
        let id = Self::insert_id(&mut conn, q)
            .await
            .map_err(|e| {
                if is_foreign_key_violation(&e) {
                    Error::Invalid(format!("user {} does not exist", token.user_id))
                } else {
                    unique_or(e, || Error::Conflict("the token exists".to_owned()))
                }
            })?
            .ok_or_else(|| Error::corrupt("the token insert wrote no row".to_owned()))?;
        Ok(ApiToken {
            id,
            name,
            token_hash: token.token_hash,
            user_id: token.user_id,
            created_at: token.now,
            last_used_at: None,
            revoked_at: None,
        })
    }

    async fn api_token_get(&self, id: i64) -> Result<ApiToken, Error> {
        let q = Query::new(format!(
            "SELECT {API_TOKEN_COLUMNS} FROM tw_api_tokens WHERE id = ?"
        ))
        .bind(id);
        self.fetch_optional::<ApiTokenRow>(q)
            .await?
            .map(ApiToken::from)
            .ok_or_else(|| Error::not_found("api token", id))
    }

    async fn api_token_find(&self, token_hash: &str) -> Result<Option<ApiToken>, Error> {
        let q = Query::new(format!(
            "SELECT {API_TOKEN_COLUMNS} FROM tw_api_tokens WHERE token_hash = ?"
        ))
        .bind(token_hash);
        Ok(self
            .fetch_optional::<ApiTokenRow>(q)
            .await?
            .map(ApiToken::from))
    }

    async fn api_token_touch(&self, touch: ApiTokenTouch) -> Result<(), Error> {
        let q = Query::new("UPDATE tw_api_tokens SET last_used_at = ? WHERE id = ?")
            .bind(touch.now)
            .bind(touch.id);
        self.execute(q).await?;
        Ok(())
    }

    async fn api_token_revoke(&self, revoke: ApiTokenRevoke) -> Result<ApiToken, Error> {
        let q = Query::new(
            "UPDATE tw_api_tokens SET revoked_at = CASE WHEN revoked_at IS NULL THEN ? \
             ELSE revoked_at END WHERE id = ?",
        )
        .bind(revoke.now)
        .bind(revoke.id);
        if self.execute(q).await? == 0 {
            return Err(Error::not_found("api token", revoke.id));
        }
        self.api_token_get(revoke.id).await
    }

    async fn api_tokens_list(&self, user_id: Option<i64>) -> Result<Vec<ApiToken>, Error> {
        let mut q = Query::new(format!(
            "SELECT {API_TOKEN_COLUMNS} FROM tw_api_tokens WHERE 1 = 1"
        ));
        if let Some(user) = user_id {
            q.push(" AND user_id = ").push_bind(user);
        }
        q.push(" ORDER BY id");
        Ok(self
            .fetch_all::<ApiTokenRow>(q)
            .await?
            .into_iter()
            .map(ApiToken::from)
            .collect())
    }
}
