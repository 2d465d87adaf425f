//! The audit log.

use super::*;

fn audit_new(at: i64, actor: &str, action: &str, target: (&str, &str)) -> AuditNew {
    AuditNew {
        at,
        actor_id: Some(1),
        actor: actor.to_owned(),
        action: action.to_owned(),
        target_type: target.0.to_owned(),
        target_id: target.1.to_owned(),
        before: Some(r#"{"description":"old"}"#.to_owned()),
        after: None,
    }
}

pub(crate) async fn audit_append_and_list_filters_and_pages(ctx: Ctx) {
    let store = &*ctx.store;
    let mut ids = Vec::new();
    for i in 0..5 {
        let actor = if i % 2 == 0 { "ann" } else { "bob" };
        ids.push(
            store
                .audit_append(audit_new(
                    NOW + i,
                    actor,
                    "job.update",
                    ("job", &i.to_string()),
                ))
                .await
                .unwrap(),
        );
    }
    let mut big = audit_new(NOW + 10, "api-token", "job.create", ("job", "9"));
    big.actor_id = None;
    big.before = None;
    big.after = Some(format!(r#"{{"glue_source":"{}"}}"#, "x".repeat(200_000)));
    store
        .audit_append(big.clone())
        .await
        .expect("a large after text");
    assert_invalid(
        store
            .audit_append(audit_new(NOW, "", "a", ("job", "1")))
            .await,
    );
    let all = store.audit_list(AuditFilter::default()).await.unwrap();
    assert_eq!(all.total, 6);
    let newest = &all.items[0];
    assert_eq!(
        (newest.actor_id, newest.after.as_ref().map(String::len)),
        (None, big.after.as_ref().map(String::len))
    );
    assert!(
        all.items.windows(2).all(|w| w[0].id > w[1].id),
        "newest first"
    );
    let ann = store
        .audit_list(AuditFilter {
            actor: Some("ann".to_owned()),
            page: PageReq {
                offset: 1,
                limit: 1,
            },
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert_eq!((ann.total, ann.items.len()), (3, 1));
    assert_eq!(ann.items[0].at, NOW + 2);
    assert_eq!(
        ann.items[0].before.as_deref(),
        Some(r#"{"description":"old"}"#)
    );
    let one = store
        .audit_list(AuditFilter {
            target_type: Some("job".to_owned()),
            target_id: Some("3".to_owned()),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert_eq!((one.total, one.items[0].actor.as_str()), (1, "bob"));
    let range = store
        .audit_list(AuditFilter {
            range: TimeRange {
                from: Some(NOW + 1),
                to: Some(NOW + 3),
            },
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(range.total, 2);
}
