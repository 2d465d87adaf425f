//! API tokens as the service layer manages them: everyone manages their own, admins see
//! everyone's; the secret is shown once and never audited.

use tickwork_protocol::api::{TokenCreated, TokenInput, TokenView};
use tickwork_store::{ApiToken, ApiTokenNew, ApiTokenRevoke};

use super::audit::Target;
use super::{Service, invalid};
use crate::Error;
use crate::auth::{self, API_TOKEN_PREFIX, Principal};
use crate::timer::now_ms;

/// The API view of a token (no secret, no digest).
pub(crate) fn token_view(t: ApiToken) -> TokenView {
    TokenView {
        id: t.id,
        name: t.name,
        user_id: t.user_id,
        created_at: t.created_at,
        last_used_at: t.last_used_at,
        revoked_at: t.revoked_at,
    }
}

impl Service {
    /// API tokens: admins see everyone's, others their own.
    pub async fn tokens_list(&self, by: &Principal) -> Result<Vec<TokenView>, Error> {
        let of = if by.is_admin() {
            None
        } else {
            Some(by.user_id)
        };
        Ok(self
            .inner
            .store
            .api_tokens_list(of)
            .await?
            .into_iter()
            .map(token_view)
            .collect())
    }

    /// Creates an API token for the caller (an admin may name another user). The secret is
    /// returned this once; only its digest is kept. The token acts with its user's role.
    pub async fn token_create(
        &self,
        by: &Principal,
        input: TokenInput,
    ) -> Result<TokenCreated, Error> {
        let name = input.name.trim();
        if name.is_empty() || name.chars().count() > 128 {
            return Err(invalid("name", "must be 1 to 128 characters"));
        }
        let user_id = match input.user_id {
            Some(u) if u != by.user_id => {
                by.require_admin()?;
                u
            }
            Some(u) => u,
            None if by.user_id > 0 => by.user_id,
            None => {
                return Err(invalid(
                    "user_id",
                    "the built-in API token has no user; name the user the token acts as",
                ));
            }
        };
        match self.inner.store.user_get(user_id).await {
            Ok(_) => {}
            Err(tickwork_store::Error::NotFound { .. }) => {
                return Err(invalid("user_id", format!("user {user_id} does not exist")));
            }
            Err(e) => return Err(e.into()),
        }
        let secret = format!("{API_TOKEN_PREFIX}{}", auth::random_hex(32)?);
        let token = self
            .inner
            .store
            .api_token_create(ApiTokenNew {
                name: name.to_owned(),
                token_hash: auth::digest(&secret),
                user_id,
                now: now_ms(),
            })
            .await?;
        let view = token_view(token);
        self.audit(
            by,
            "token.create",
            Target::ApiToken(view.id),
            None::<&()>,
            Some(&view),
        )
        .await?;
        Ok(TokenCreated {
            token: view,
            secret,
        })
    }

    /// Revokes a token: its own user or an admin.
    pub async fn token_revoke(&self, by: &Principal, id: i64) -> Result<TokenView, Error> {
        let before = self.inner.store.api_token_get(id).await?;
        if before.user_id != by.user_id {
            by.require_admin()?;
        }
        let after = self
            .inner
            .store
            .api_token_revoke(ApiTokenRevoke { id, now: now_ms() })
            .await?;
        let (before, after) = (token_view(before), token_view(after));
        self.audit(
            by,
            "token.revoke",
            Target::ApiToken(id),
            Some(&before),
            Some(&after),
        )
        .await?;
        Ok(after)
    }
}
