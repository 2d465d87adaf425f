//! GLUE script versions.

use super::*;

pub(crate) async fn script_versions_number_per_job_and_go_with_the_job(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "scripts").await;
    let a = store.job_create(job_new(g.id, "script-a")).await.unwrap();
    let b = store.job_create(job_new(g.id, "script-b")).await.unwrap();
    let version = |job_id, source: &str| ScriptVersionNew {
        job_id,
        glue_type: GlueType::Shell,
        source: source.to_owned(),
        comment: format!("saved {source}"),
        author: "ann".to_owned(),
        now: NOW,
    };
    let a1 = store
        .script_version_append(version(a.id, "echo 1"))
        .await
        .unwrap();
    let b1 = store
        .script_version_append(version(b.id, "echo b"))
        .await
        .unwrap();
    let a2 = store
        .script_version_append(version(a.id, "echo 2"))
        .await
        .unwrap();
    assert_eq!((a1.version, b1.version, a2.version), (1, 1, 2));
    assert_not_found(store.script_version_append(version(999, "x")).await);
    assert_invalid(
        store
            .script_version_append(ScriptVersionNew {
                author: String::new(),
                ..version(a.id, "x")
            })
            .await,
    );
    let list = store.script_versions_list(a.id).await.unwrap();
    assert_eq!(list.iter().map(|v| v.version).collect::<Vec<_>>(), [2, 1]);
    assert_eq!(list[1], a1);
    let got = store
        .script_version_get(ScriptVersionKey {
            job_id: a.id,
            version: 2,
        })
        .await
        .unwrap();
    assert_eq!(
        (got.source.as_str(), got.glue_type),
        ("echo 2", GlueType::Shell)
    );
    assert_not_found(
        store
            .script_version_get(ScriptVersionKey {
                job_id: a.id,
                version: 3,
            })
            .await,
    );
    // Concurrent appends to one job get distinct numbers.
    let mut tasks = Vec::new();
    for i in 0..6 {
        let store = ctx.store.clone();
        let v = version(b.id, &format!("echo {i}"));
        tasks.push(tokio::spawn(
            async move { store.script_version_append(v).await },
        ));
    }
    let mut numbers = Vec::new();
    for t in tasks {
        numbers.push(t.await.unwrap().expect("append").version);
    }
    numbers.sort_unstable();
    assert_eq!(numbers, [2, 3, 4, 5, 6, 7]);
    store.job_delete(a.id).await.unwrap();
    assert!(store.script_versions_list(a.id).await.unwrap().is_empty());
    assert_eq!(store.script_versions_list(b.id).await.unwrap().len(), 7);
}
