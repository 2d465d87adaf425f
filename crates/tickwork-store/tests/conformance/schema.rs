//! Migrations.

use super::*;

pub(crate) async fn migrations_apply_twice(ctx: Ctx) {
    let g = group(&*ctx.store, "survivor").await;
    // Each connect runs the migrator: the second and third find everything applied.
    let again = ctx.connect_again().await;
    let third = ctx.connect_again().await;
    assert_eq!(again.group_get(g.id).await.unwrap(), g);
    assert_eq!(third.groups_list().await.unwrap(), vec![g]);
    assert_eq!(again.backend(), ctx.store.backend());
    again.close().await;
    third.close().await;
}

pub(crate) async fn log_checkpoint_copies_the_log(ctx: Ctx) {
    let g = group(&*ctx.store, "logged").await;
    let done = ctx.store.log_checkpoint().await.unwrap();
    if ctx.store.backend() == "sqlite" {
        // The group's write is in the log, and with no reader in the way all of it is copied.
        assert!(done.frames > 0, "{done:?}");
        assert_eq!(done.copied, done.frames, "{done:?}");
    } else {
        assert_eq!(done, LogCheckpoint::default());
    }
    // Copying changed nothing that is read.
    assert_eq!(ctx.store.group_get(g.id).await.unwrap(), g);
}
