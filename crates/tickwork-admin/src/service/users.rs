//! Users as the service layer manages them: admins manage users; everyone changes their own
//! password; every change is audited without password hashes.

use tickwork_protocol::api::{PasswordInput, UserInput, UserUpdateInput, UserView};
use tickwork_store::{User, UserNew, UserPassword, UserUpdate};
use tracing::info;

use super::audit::Target;
use super::{Users, invalid};
use crate::Error;
use crate::auth::{self, Principal, Role};
use crate::timer::now_ms;

/// The API view of a user (no password hash).
pub(crate) fn user_view(u: User) -> UserView {
    UserView {
        id: u.id,
        username: u.username,
        role: u.role.as_str().to_owned(),
        group_ids: u.group_ids,
        locale: u.locale,
        disabled: u.disabled,
        created_at: u.created_at,
        updated_at: u.updated_at,
    }
}

fn validate_username(name: &str) -> Result<(), Error> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'))
    {
        return Err(invalid(
            "username",
            format!("{name:?} must be 1 to 64 letters, digits, '.', '_', '-' or '@'"),
        ));
    }
    Ok(())
}

fn validate_locale(locale: &Option<String>) -> Result<Option<String>, Error> {
    match locale.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(l) if l.len() <= 16 && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') => {
            Ok(Some(l.to_owned()))
        }
        Some(l) => Err(invalid("locale", format!("{l:?} is not a language tag"))),
    }
}

impl Users<'_> {
    /// Checks an operator's groups: each must exist; other roles have none.
    async fn role_groups(self, role: Role, groups: &[i64]) -> Result<Vec<i64>, Error> {
        if role != Role::Operator {
            if !groups.is_empty() {
                return Err(invalid("group_ids", format!("a {role} has no groups")));
            }
            return Ok(Vec::new());
        }
        let mut out: Vec<i64> = Vec::with_capacity(groups.len());
        for &g in groups {
            match self.inner.store.group_get(g).await {
                Ok(_) => {}
                Err(tickwork_store::Error::NotFound { .. }) => {
                    return Err(invalid(
                        "group_ids",
                        format!("executor group {g} does not exist"),
                    ));
                }
                Err(e) => return Err(e.into()),
            }
            if !out.contains(&g) {
                out.push(g);
            }
        }
        Ok(out)
    }

    /// Every user (admins only).
    pub async fn list(self, by: &Principal) -> Result<Vec<UserView>, Error> {
        by.require_admin()?;
        Ok(self
            .inner
            .store
            .users_list()
            .await?
            .into_iter()
            .map(user_view)
            .collect())
    }

    /// One user: admins see anyone, others themselves.
    pub async fn get(self, by: &Principal, id: i64) -> Result<UserView, Error> {
        if by.user_id != id {
            by.require_admin()?;
        }
        Ok(user_view(self.inner.store.user_get(id).await?))
    }

    /// Creates a user (admins only).
    pub async fn create(self, by: &Principal, input: UserInput) -> Result<UserView, Error> {
        by.require_admin()?;
        let username = input.username.trim();
        validate_username(username)?;
        let role: Role = input.role.parse()?;
        auth::validate_password(&input.password)?;
        let group_ids = self.role_groups(role, &input.group_ids).await?;
        let locale = validate_locale(&input.locale)?;
        let user = self
            .inner
            .store
            .user_create(UserNew {
                username: username.to_owned(),
                password_hash: auth::hash_password(&input.password).await?,
                role: role.stored(),
                group_ids,
                locale,
                now: now_ms(),
            })
            .await?;
        let view = user_view(user);
        self.inner
            .audit(
                by,
                "user.create",
                Target::User(view.id),
                None::<&()>,
                Some(&view),
            )
            .await?;
        Ok(view)
    }

    /// Changes a user's role, groups, locale or disabled flag (admins only). Disabling ends
    /// the user's sessions; an admin cannot demote or disable themselves, so that there is
    /// always someone left to undo it.
    pub async fn update(
        self,
        by: &Principal,
        id: i64,
        input: UserUpdateInput,
    ) -> Result<UserView, Error> {
        by.require_admin()?;
        let before = self.inner.store.user_get(id).await?;
        let role: Role = input.role.parse()?;
        if by.user_id == id && (role != Role::Admin || input.disabled) {
            return Err(Error::Conflict(
                "admins cannot demote or disable themselves; ask another admin".into(),
            ));
        }
        let group_ids = self.role_groups(role, &input.group_ids).await?;
        let locale = validate_locale(&input.locale)?;
        let user = self
            .inner
            .store
            .user_update(UserUpdate {
                id,
                role: role.stored(),
                group_ids,
                locale,
                disabled: input.disabled,
                now: now_ms(),
            })
            .await?;
        if user.disabled || user.role != before.role {
            // Sessions carry no role of their own, but a disabled user must be out at once.
            self.inner.store.sessions_delete_for_user(id).await?;
        }
        let (before, after) = (user_view(before), user_view(user));
        self.inner
            .audit(
                by,
                "user.update",
                Target::User(id),
                Some(&before),
                Some(&after),
            )
            .await?;
        Ok(after)
    }

    /// Deletes a user with their sessions and API tokens (admins only). Nobody deletes
    /// themselves, nor the last admin, so that someone is always left to manage the users.
    pub async fn delete(self, by: &Principal, id: i64) -> Result<(), Error> {
        by.require_admin()?;
        if by.user_id == id {
            return Err(Error::Conflict(
                "admins cannot delete themselves; ask another admin".into(),
            ));
        }
        let user = self.inner.store.user_get(id).await?;
        if Role::from_stored(user.role) == Role::Admin {
            let admins = self
                .inner
                .store
                .users_list()
                .await?
                .iter()
                .filter(|u| Role::from_stored(u.role) == Role::Admin)
                .count();
            if admins <= 1 {
                return Err(Error::Conflict(format!(
                    "{} is the last admin and cannot be deleted",
                    user.username
                )));
            }
        }
        self.inner.store.user_delete(id).await?;
        info!(user = %user.username, by = %by.username, "user deleted");
        let before = user_view(user);
        self.inner
            .audit(
                by,
                "user.delete",
                Target::User(id),
                Some(&before),
                None::<&()>,
            )
            .await
    }

    /// Sets a password: users their own (giving the current one), admins anyone's. Every
    /// session of the user ends.
    pub async fn set_password(
        self,
        by: &Principal,
        id: i64,
        input: PasswordInput,
    ) -> Result<(), Error> {
        let user = if by.user_id == id {
            let user = self.inner.store.user_get(id).await?;
            let current = input.current_password.as_deref().unwrap_or("");
            if !self
                .inner
                .auth
                .check_current_password(&user, current)
                .await?
            {
                return Err(invalid("current_password", "is wrong"));
            }
            user
        } else {
            by.require_admin()?;
            self.inner.store.user_get(id).await?
        };
        auth::validate_password(&input.password)?;
        self.inner
            .store
            .user_set_password(UserPassword {
                id,
                password_hash: auth::hash_password(&input.password).await?,
                now: now_ms(),
            })
            .await?;
        self.inner.store.sessions_delete_for_user(id).await?;
        info!(user = %user.username, by = %by.username, "password changed");
        let what = serde_json::json!({ "username": user.username, "password": "changed" });
        self.inner
            .audit(
                by,
                "user.password",
                Target::User(id),
                None::<&()>,
                Some(&what),
            )
            .await
    }
}
