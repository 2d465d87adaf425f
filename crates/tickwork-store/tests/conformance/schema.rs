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
