//! Passwords, users and API tokens as people manage them: one's own password in the console
//! (the current one, the new one twice), an admin setting another user's and deleting users
//! (console and REST), a viewer's own API tokens in the console. Every refused form changes
//! nothing: no password, no session, no audit record.

use axum::http::Method;
use serde_json::{Value, json};

use crate::api::{Api, BUILTIN, FORM, Harness, location};

/// A console session of `user`: its cookie (`name=value`) and CSRF token.
async fn session(h: &Harness, user: &str, password: &str) -> (String, String) {
    let auth = h.service().auth();
    let s = auth
        .login(user, password, [127, 0, 0, 1].into())
        .await
        .unwrap_or_else(|e| panic!("login of {user}: {e}"));
    let cookie = auth.session_cookie(&s);
    (cookie.split(';').next().unwrap().to_owned(), s.csrf_token)
}

/// Whether `user` can sign in with `password`.
async fn can_login(h: &Harness, user: &str, password: &str) -> bool {
    h.service()
        .auth()
        .login(user, password, [127, 0, 0, 2].into())
        .await
        .is_ok()
}

/// Posts a console form with a session; status, `Location` and body.
async fn post(
    h: &Harness,
    (cookie, csrf): &(String, String),
    path: &str,
    fields: &[(&str, &str)],
) -> (u16, String, String) {
    let mut form = vec![("_csrf", csrf.as_str())];
    form.extend_from_slice(fields);
    let resp = h
        .send(
            Method::POST,
            path,
            &[("cookie", cookie), ("content-type", FORM)],
            Some(serde_urlencoded::to_string(&form).unwrap()),
        )
        .await;
    (resp.status().as_u16(), location(&resp), resp.text())
}

/// The audit records of user `id`, newest first.
async fn user_audit(h: &Harness, id: i64) -> Vec<Value> {
    h.get(
        "/audit",
        &format!("/audit?target_type=user&target_id={id}&size=100"),
        BUILTIN,
    )
    .await
    .ok()["items"]
        .as_array()
        .unwrap()
        .clone()
}

async fn create_user(h: &Harness, name: &str, role: &str, password: &str) -> i64 {
    h.call(
        Method::POST,
        "/users",
        "/users",
        BUILTIN,
        Some(json!({ "username": name, "password": password, "role": role })),
    )
    .await
    .ok()["id"]
        .as_i64()
        .unwrap()
}

#[tokio::test]
async fn everyone_changes_their_own_password_in_the_console() {
    let h = Harness::start().await;
    let old = "vera-old-password";
    let new = "vera-new-password";
    let vera = create_user(&h, "vera", "viewer", old).await;
    let s = session(&h, "vera", old).await;

    // The top bar links to the form, which asks the current password and the new one twice.
    let page = h.page("/", &s.0).await.text();
    assert!(page.contains(r#"href="/password""#), "top bar: {page}");
    let form = h.page("/password", &s.0).await;
    assert_eq!(form.status(), 200);
    let form = form.text();
    for f in ["f-current_password", "f-password", "f-password2"] {
        assert!(form.contains(f), "{f} on the form");
    }
    assert!(!form.contains("read-only"), "no read-only banner: {form}");

    // Wrong current password, new ones that differ, a new one too short: each is shown at its
    // field and changes nothing.
    let audit_before = h.audit_total().await;
    for (fields, field) in [
        (
            [
                ("current_password", "wrong"),
                ("password", new),
                ("password2", new),
            ],
            "err-current_password",
        ),
        (
            [
                ("current_password", old),
                ("password", new),
                ("password2", "vera-new-passw0rd"),
            ],
            "err-password2",
        ),
        (
            [
                ("current_password", old),
                ("password", "short"),
                ("password2", "short"),
            ],
            "err-password",
        ),
    ] {
        let (status, _, body) = post(&h, &s, "/password", &fields).await;
        assert_eq!(status, 400, "{fields:?}");
        assert!(body.contains(field), "{field} shown for {fields:?}: {body}");
        assert!(
            !body.contains(new),
            "password fields are not filled in again"
        );
    }
    assert_eq!(h.audit_total().await, audit_before, "nothing audited");
    assert!(
        can_login(&h, "vera", old).await,
        "the old password still works"
    );
    assert_eq!(h.page("/", &s.0).await.status(), 200, "still signed in");

    // The right one: every session ends, this one too, and the login page says why.
    let (status, to, _) = post(
        &h,
        &s,
        "/password",
        &[
            ("current_password", old),
            ("password", new),
            ("password2", new),
        ],
    )
    .await;
    assert_eq!((status, to.as_str()), (303, "/login?ok=password_changed"));
    let after = h.page("/", &s.0).await;
    assert_eq!(after.status(), 303, "the session ended");
    assert!(location(&after).starts_with("/login"));
    let login = h
        .send(Method::GET, "/login?ok=password_changed", &[], None)
        .await
        .text();
    assert!(login.contains("login-notice"), "{login}");
    assert!(login.contains("sign in with the new one"), "{login}");
    // Only that note: a link cannot make the login page say something else.
    let other = h.send(Method::GET, "/login?ok=deleted", &[], None).await;
    assert!(!other.text().contains("login-notice"));
    assert!(!can_login(&h, "vera", old).await);
    assert!(can_login(&h, "vera", new).await);
    let audit = user_audit(&h, vera).await;
    assert_eq!(audit[0]["action"], "user.password");
    assert_eq!(audit[0]["actor"], "vera");
    assert!(!audit[0].to_string().contains(new), "no password audited");
    h.stop().await;
}

#[tokio::test]
async fn admins_set_passwords_and_delete_users_in_the_console() {
    let h = Harness::start().await;
    let admin = h.console().await;
    let vera = create_user(&h, "vera", "viewer", "vera-password-1").await;
    create_user(&h, "olaf", "operator", "olaf-password-1").await;
    let vera_token = h
        .call(
            Method::POST,
            "/tokens",
            "/tokens",
            BUILTIN,
            Some(json!({ "name": "vera's", "user_id": vera })),
        )
        .await
        .ok()["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let vera_session = session(&h, "vera", "vera-password-1").await;

    // The users page offers both for other users, not for oneself.
    let users = h.page("/users", &admin.0).await.text();
    assert!(users.contains(&format!("reset-password-{vera}")), "{users}");
    assert!(users.contains(&format!("delete-user-{vera}")));
    assert!(!users.contains("reset-password-1\""), "not for oneself");
    assert!(!users.contains("delete-user-1\""), "not for oneself");

    // Setting vera's password: no current password asked; the two must agree.
    let form = h.page(&format!("/users/{vera}/password"), &admin.0).await;
    assert_eq!(form.status(), 200);
    let form = form.text();
    assert!(form.contains("vera") && !form.contains("f-current_password"));
    let audit_before = h.audit_total().await;
    let path = format!("/users/{vera}/password");
    let (status, _, body) = post(
        &h,
        &admin,
        &path,
        &[
            ("password", "vera-reset-pw-1"),
            ("password2", "vera-reset-pw-2"),
        ],
    )
    .await;
    assert_eq!(status, 400);
    assert!(body.contains("err-password2"), "{body}");
    let (status, _, body) = post(&h, &admin, &path, &[("password", "x"), ("password2", "x")]).await;
    assert_eq!(status, 400);
    assert!(body.contains("err-password"), "{body}");
    assert_eq!(h.audit_total().await, audit_before);
    assert!(can_login(&h, "vera", "vera-password-1").await);
    let (status, to, _) = post(
        &h,
        &admin,
        &path,
        &[
            ("password", "vera-reset-pw-1"),
            ("password2", "vera-reset-pw-1"),
        ],
    )
    .await;
    assert_eq!((status, to.as_str()), (303, "/users?ok=password_set"));
    assert!(can_login(&h, "vera", "vera-reset-pw-1").await);
    assert!(!can_login(&h, "vera", "vera-password-1").await);
    assert_eq!(
        h.page("/", &vera_session.0).await.status(),
        303,
        "vera's sessions ended"
    );
    let audit = user_audit(&h, vera).await;
    assert_eq!(
        (audit[0]["action"].as_str(), audit[0]["actor"].as_str()),
        (Some("user.password"), Some("admin"))
    );
    // The admin's own session goes on.
    assert_eq!(h.page("/users", &admin.0).await.status(), 200);

    // Others may neither set another's password nor delete anyone.
    let olaf_s = session(&h, "olaf", "olaf-password-1").await;
    let before = h.audit_total().await;
    assert_eq!(
        h.page(&format!("/users/{vera}/password"), &olaf_s.0)
            .await
            .status(),
        403
    );
    let (status, _, body) = post(
        &h,
        &olaf_s,
        &path,
        &[
            ("password", "olaf-was-here"),
            ("password2", "olaf-was-here"),
        ],
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let (status, to, _) = post(&h, &olaf_s, &format!("/users/{vera}/delete"), &[]).await;
    assert_eq!(status, 303);
    assert!(to.starts_with("/users?err="), "{to}");
    assert_eq!(h.audit_total().await, before, "refused: nothing audited");
    assert!(can_login(&h, "vera", "vera-reset-pw-1").await);

    // An admin deletes neither themselves nor an unknown user.
    let (_, to, _) = post(&h, &admin, "/users/1/delete", &[]).await;
    assert!(to.starts_with("/users?err="), "{to}");
    let (_, to, _) = post(&h, &admin, "/users/999/delete", &[]).await;
    assert!(to.starts_with("/users?err="), "{to}");
    assert_eq!(h.audit_total().await, before);

    // Deleting vera: her sessions and tokens go with her, the record keeps who she was.
    let vera_session = session(&h, "vera", "vera-reset-pw-1").await;
    let (status, to, _) = post(&h, &admin, &format!("/users/{vera}/delete"), &[]).await;
    assert_eq!((status, to.as_str()), (303, "/users?ok=deleted"));
    assert_eq!(h.page("/", &vera_session.0).await.status(), 303);
    h.get("/me", "/me", &vera_token)
        .await
        .refused(401, "unauthorized");
    assert!(!can_login(&h, "vera", "vera-reset-pw-1").await);
    let users = h.page("/users", &admin.0).await.text();
    assert!(!users.contains(&format!("user-{vera}\"")), "{users}");
    let audit = user_audit(&h, vera).await;
    assert_eq!(audit[0]["action"], "user.delete");
    assert_eq!(audit[0]["before"]["username"], "vera");
    assert!(audit[0]["after"].is_null());
    h.stop().await;
}

#[tokio::test]
async fn users_are_deleted_through_the_rest_api_but_never_the_last_admin() {
    let h = Harness::start().await;
    let (viewer_id, viewer) = h.user_with_token("vic", "viewer", &[]).await;
    let (admin2_id, admin2) = h.user_with_token("ada", "admin", &[]).await;
    let del = |id: i64| format!("/users/{id}");
    let before = h.audit_total().await;
    h.call(
        Method::DELETE,
        "/users/{id}",
        &del(admin2_id),
        &viewer,
        None,
    )
    .await
    .refused(403, "forbidden");
    h.call(
        Method::DELETE,
        "/users/{id}",
        &del(admin2_id),
        &admin2,
        None,
    )
    .await
    .refused(409, "conflict");
    h.call(Method::DELETE, "/users/{id}", &del(999), BUILTIN, None)
        .await
        .refused(404, "not_found");
    assert_eq!(h.audit_total().await, before, "refused: nothing audited");

    // Ada deletes the first admin; then she is the last admin, whom nobody deletes.
    let gone = h
        .call(Method::DELETE, "/users/{id}", &del(1), &admin2, None)
        .await
        .ok();
    assert_eq!(gone, json!({ "deleted": 1 }));
    h.get("/users/{id}", &del(1), BUILTIN)
        .await
        .refused(404, "not_found");
    let last = h
        .call(
            Method::DELETE,
            "/users/{id}",
            &del(admin2_id),
            BUILTIN,
            None,
        )
        .await;
    last.refused(409, "conflict");
    assert!(
        last.body["message"]
            .as_str()
            .unwrap()
            .contains("last admin"),
        "{last:?}"
    );
    h.get("/me", "/me", &admin2).await.ok();
    h.call(
        Method::DELETE,
        "/users/{id}",
        &del(viewer_id),
        BUILTIN,
        None,
    )
    .await
    .ok();
    h.get("/me", "/me", &viewer)
        .await
        .refused(401, "unauthorized");
    assert_eq!(h.audit_total().await, before + 2);
    h.stop().await;
}

#[tokio::test]
async fn viewers_manage_their_own_api_tokens_in_the_console() {
    let h = Harness::start().await;
    let (_, other_token) = h.user_with_token("otto", "viewer", &[]).await;
    let other_id = h.get("/tokens", "/tokens", BUILTIN).await.ok()[0]["id"]
        .as_i64()
        .unwrap();
    create_user(&h, "vera", "viewer", "vera-password-1").await;
    let s = session(&h, "vera", "vera-password-1").await;

    let page = h.page("/tokens", &s.0).await.text();
    assert!(page.contains("token-form"), "the form is shown: {page}");
    assert!(!page.contains("id=\"read-only\""), "{page}");
    assert!(!page.contains("otto token"), "only her own tokens");

    // An empty name: refused, nothing created.
    let before = h.audit_total().await;
    let (status, to, _) = post(&h, &s, "/tokens", &[("name", "  ")]).await;
    assert_eq!(status, 303);
    assert!(to.starts_with("/tokens?err="), "{to}");
    assert_eq!(h.audit_total().await, before);

    // A token: its secret shown once, acting as vera.
    let (status, _, body) = post(&h, &s, "/tokens", &[("name", "laptop")]).await;
    assert_eq!(status, 200);
    let secret = body
        .split("<code>")
        .nth(1)
        .and_then(|rest| rest.split("</code>").next())
        .expect("the secret on the page")
        .to_owned();
    assert!(secret.starts_with("tw_"), "{secret}");
    assert_eq!(h.get("/me", "/me", &secret).await.ok()["username"], "vera");
    let mine = h.get("/tokens", "/tokens", &secret).await.ok();
    let mine_id = mine[0]["id"].as_i64().unwrap();

    // Someone else's token: refused, it keeps working.
    let (_, to, _) = post(&h, &s, &format!("/tokens/{other_id}/revoke"), &[]).await;
    assert!(to.starts_with("/tokens?err="), "{to}");
    h.get("/me", "/me", &other_token).await.ok();

    // Her own: revoked at once.
    let (_, to, _) = post(&h, &s, &format!("/tokens/{mine_id}/revoke"), &[]).await;
    assert_eq!(to, "/tokens?ok=revoked");
    h.get("/me", "/me", &secret)
        .await
        .refused(401, "unauthorized");
    h.stop().await;
}

#[tokio::test]
async fn wrong_current_passwords_are_limited_like_logins_so_a_stolen_token_cannot_guess_one() {
    let h = Harness::start().await;
    let (id, token) = h.user_with_token("gus", "viewer", &[]).await;
    let (ida, other_token) = h.user_with_token("ida", "viewer", &[]).await;
    let path = format!("/users/{id}/password");
    let change =
        |current: &str| json!({ "current_password": current, "password": "gus-brand-new-pass" });
    // Five wrong guesses (the login limit) are answered as wrong...
    for i in 0..5 {
        h.call(
            Method::PUT,
            "/users/{id}/password",
            &path,
            &token,
            Some(change(&format!("guess-{i}"))),
        )
        .await
        .refused(400, "invalid_input");
    }
    // ...then even the right one is refused for the window, and nothing changes.
    let before = h.audit_total().await;
    h.call(
        Method::PUT,
        "/users/{id}/password",
        &path,
        &token,
        Some(change("gus-password-1")),
    )
    .await
    .refused(429, "rate_limited");
    assert_eq!(h.audit_total().await, before);
    assert!(can_login(&h, "gus", "gus-password-1").await);
    // Logins and other users keep their own counts.
    h.call(
        Method::PUT,
        "/users/{id}/password",
        &format!("/users/{ida}/password"),
        &other_token,
        Some(json!({ "current_password": "ida-password-1", "password": "ida-brand-new-pass" })),
    )
    .await
    .ok();
    h.stop().await;
}
