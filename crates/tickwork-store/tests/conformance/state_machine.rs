//! The run state machine, as the store obeys it: every operation tried on runs in
//! every state.

use super::*;

/// How a run is brought into the state an operation is tried on, with the store's own
/// operations.
#[derive(Debug, Clone, Copy)]
enum Path {
    Planned,
    /// Taken by its owner to be sent.
    Sending,
    /// Taken to be sent, then given back unsent: planned again.
    Unsent,
    Dispatched,
    /// Dispatched, then this result.
    Result(RunState),
    /// Sending, then a callback with this result before the dispatch record (which is then
    /// missing).
    Early(RunState),
    /// Sending, then lost: maybe sent, and nobody could say.
    MaybeLost,
    /// Sending, then refused by the executor.
    TriggerFailure,
    Misfired,
    /// Sending, then misfired by its owner, which never called `/run`.
    MisfiredUnsent,
    Skipped,
    /// Sending, then skipped by its owner, which never called `/run`.
    SkippedUnsent,
}

impl Path {
    const ALL: &[Path] = &[
        Path::Planned,
        Path::Sending,
        Path::Unsent,
        Path::Dispatched,
        Path::Result(RunState::Succeeded),
        Path::Result(RunState::Failed),
        Path::Result(RunState::TimedOut),
        Path::Result(RunState::Killed),
        Path::Result(RunState::Lost),
        Path::Early(RunState::Succeeded),
        Path::Early(RunState::Failed),
        Path::Early(RunState::TimedOut),
        Path::MaybeLost,
        Path::TriggerFailure,
        Path::Misfired,
        Path::MisfiredUnsent,
        Path::Skipped,
        Path::SkippedUnsent,
    ];

    fn state(self) -> RunState {
        match self {
            Path::Planned | Path::Unsent => RunState::Planned,
            Path::Sending => RunState::Sending,
            Path::Dispatched => RunState::Dispatched,
            Path::Result(r) | Path::Early(r) => r,
            Path::MaybeLost => RunState::Lost,
            Path::TriggerFailure => RunState::Failed,
            Path::Misfired | Path::MisfiredUnsent => RunState::Misfired,
            Path::Skipped | Path::SkippedUnsent => RunState::Skipped,
        }
    }

    fn label(self) -> String {
        match self {
            Path::Unsent => "planned (unsent)".to_owned(),
            Path::Early(r) => format!("{r} (early callback)"),
            Path::MaybeLost => "lost (while sending)".to_owned(),
            Path::TriggerFailure => "failed (trigger failure)".to_owned(),
            Path::MisfiredUnsent => "misfired (while sending)".to_owned(),
            Path::SkippedUnsent => "skipped (while sending)".to_owned(),
            other => other.state().to_string(),
        }
    }

    /// Whether the run is taken to be sent on the way.
    fn sends(self) -> bool {
        !matches!(self, Path::Planned | Path::Misfired | Path::Skipped)
    }
}

/// A store operation that moves a run, or writes it only in given states.
#[derive(Debug, Clone, Copy)]
enum Op {
    Send,
    Unsend,
    Dispatch,
    TriggerFail,
    Complete(RunState),
    CompleteBatch(RunState),
    /// A kill intent, then the result.
    KillThenComplete(RunState),
    KillThenCompleteBatch(RunState),
    Misfire,
    Skip,
    CatchUp,
    /// Adoption of a gone node's run that is taken as `planned`.
    Adopt,
    /// Adoption of a gone node's run that is taken as `sending`.
    AdoptSending,
    KillIntent,
}

impl Op {
    fn all() -> Vec<Op> {
        let mut ops = vec![Op::Send, Op::Unsend, Op::Dispatch, Op::TriggerFail];
        for &r in RunState::RESULTS {
            ops.extend([
                Op::Complete(r),
                Op::CompleteBatch(r),
                Op::KillThenComplete(r),
                Op::KillThenCompleteBatch(r),
            ]);
        }
        ops.extend([
            Op::Misfire,
            Op::Skip,
            Op::CatchUp,
            Op::Adopt,
            Op::AdoptSending,
            Op::KillIntent,
        ]);
        ops
    }

    /// The core operation this store call makes.
    fn core(self) -> RunMove {
        match self {
            Op::Send => RunMove::Send,
            Op::Unsend => RunMove::Unsend,
            Op::Dispatch => RunMove::Dispatch,
            Op::TriggerFail => RunMove::TriggerFail,
            Op::Complete(r)
            | Op::CompleteBatch(r)
            | Op::KillThenComplete(r)
            | Op::KillThenCompleteBatch(r) => RunMove::Complete(r),
            Op::Misfire => RunMove::Misfire,
            Op::Skip => RunMove::Skip,
            Op::CatchUp => RunMove::CatchUp,
            Op::Adopt => RunMove::Adopt,
            Op::AdoptSending => RunMove::AdoptSending,
            Op::KillIntent => RunMove::KillIntent,
        }
    }

    fn label(self) -> String {
        match self {
            Op::Send => "runs_begin_send".to_owned(),
            Op::Unsend => "runs_unsend".to_owned(),
            Op::Dispatch => "runs_mark_dispatched".to_owned(),
            Op::TriggerFail => "run_mark_trigger_failed".to_owned(),
            Op::Complete(r) => format!("run_complete {r}"),
            Op::CompleteBatch(r) => format!("runs_complete {r}"),
            Op::KillThenComplete(r) => format!("run_kill_intent + run_complete {r}"),
            Op::KillThenCompleteBatch(r) => format!("run_kill_intent + runs_complete {r}"),
            Op::Misfire => "runs_mark_misfired".to_owned(),
            Op::Skip => "run_skip".to_owned(),
            Op::CatchUp => "run_catch_up".to_owned(),
            Op::Adopt => "runs_adopt_orphaned (as planned)".to_owned(),
            Op::AdoptSending => "runs_adopt_orphaned (as sending)".to_owned(),
            Op::KillIntent => "run_kill_intent".to_owned(),
        }
    }
}

/// A new run of `job_id` owned by `owner` (a node that never beat), brought along `path`.
async fn run_along(store: &dyn Store, job_id: i64, owner: &str, path: Path) -> Run {
    let run = planned(store, job_id, Some(owner), NOW).await;
    let result = |state: RunState| RunComplete {
        run_id: run.id,
        handle_code: state.handle_code().max(500),
        handle_msg: None,
        state,
        at: NOW + 2,
    };
    let misfire = || MarkMisfired {
        node_id: owner.to_owned(),
        run_ids: vec![run.id],
        reason: "too late".to_owned(),
        at: NOW + 1,
    };
    let skip = || RunSkip {
        run_id: run.id,
        node_id: owner.to_owned(),
        reason: "job stopped".to_owned(),
        at: NOW + 1,
    };
    if path.sends() {
        begin_send(store, run.id).await;
    }
    match path {
        Path::Planned | Path::Sending => {}
        Path::Unsent => {
            let unsend = Unsend {
                node_id: owner.to_owned(),
                run_ids: vec![run.id],
            };
            assert_eq!(store.runs_unsend(unsend).await.unwrap(), [run.id]);
        }
        Path::Dispatched => {
            let n = mark_dispatched(
                store,
                owner,
                vec![dispatched(run.id, "http://exec:1", NOW + 1)],
            );
            assert_eq!(n.await, 1);
        }
        Path::Result(r) => {
            let n = mark_dispatched(
                store,
                owner,
                vec![dispatched(run.id, "http://exec:1", NOW + 1)],
            );
            assert_eq!(n.await, 1);
            store
                .run_complete(result(r), NO_FOLLOW_UPS)
                .await
                .unwrap()
                .runs
                .pop()
                .expect("result");
        }
        Path::Early(r) => {
            store
                .run_complete(result(r), NO_FOLLOW_UPS)
                .await
                .unwrap()
                .runs
                .pop()
                .expect("early");
        }
        Path::MaybeLost => {
            store
                .run_complete(result(RunState::Lost), NO_FOLLOW_UPS)
                .await
                .unwrap()
                .runs
                .pop()
                .expect("lost while sending");
        }
        Path::TriggerFailure => {
            store
                .run_mark_trigger_failed(trigger_failed(run.id, owner, NOW + 1), NO_FOLLOW_UPS)
                .await
                .unwrap()
                .runs
                .pop()
                .expect("trigger failure");
        }
        Path::Misfired | Path::MisfiredUnsent => {
            let ended = store
                .runs_mark_misfired(misfire(), NO_FOLLOW_UPS)
                .await
                .unwrap();
            assert_eq!(ended.runs.len(), 1);
        }
        Path::Skipped | Path::SkippedUnsent => {
            store.run_skip(skip()).await.unwrap().expect("skip");
        }
    }
    let run = store.run_get(run.id).await.unwrap();
    assert_eq!(run.state, path.state(), "setup of {}", path.label());
    run
}

/// Tries `op` on `run` (owned by `owner`, as every operation with a node names it); whether
/// the store said it did something, and whether a kill intent was recorded on the way.
async fn try_op(store: &dyn Store, op: Op, run: &Run, owner: &str) -> (bool, bool) {
    let at = NOW + 10;
    let result = |state: RunState| RunComplete {
        run_id: run.id,
        handle_code: state.handle_code().max(500),
        handle_msg: Some("result".to_owned()),
        state,
        at,
    };
    let kill = || RunKillIntent {
        run_id: run.id,
        at: Some(at),
    };
    match op {
        Op::Send => {
            let send = BeginSend {
                node_id: owner.to_owned(),
                run_ids: vec![run.id],
                live_since: None,
            };
            (
                store.runs_begin_send(send).await.unwrap() == [run.id],
                false,
            )
        }
        Op::Unsend => {
            let unsend = Unsend {
                node_id: owner.to_owned(),
                run_ids: vec![run.id],
            };
            (store.runs_unsend(unsend).await.unwrap() == [run.id], false)
        }
        Op::Dispatch => {
            let d = dispatched(run.id, "http://exec:2", at);
            (mark_dispatched(store, owner, vec![d]).await > 0, false)
        }
        Op::TriggerFail => {
            let failed = TriggerFailed {
                trigger_msg: "refused".to_owned(),
                ..trigger_failed(run.id, owner, at)
            };
            let done = store
                .run_mark_trigger_failed(failed, NO_FOLLOW_UPS)
                .await
                .unwrap();
            (!done.runs.is_empty(), false)
        }
        Op::Complete(r) => (
            !store
                .run_complete(result(r), NO_FOLLOW_UPS)
                .await
                .unwrap()
                .runs
                .is_empty(),
            false,
        ),
        Op::CompleteBatch(r) => (
            !store
                .runs_complete(&[result(r)], NO_FOLLOW_UPS)
                .await
                .unwrap()
                .runs
                .is_empty(),
            false,
        ),
        Op::KillThenComplete(r) => {
            let killing = store.run_kill_intent(kill()).await.unwrap();
            let done = store.run_complete(result(r), NO_FOLLOW_UPS).await.unwrap();
            (!done.runs.is_empty(), killing)
        }
        Op::KillThenCompleteBatch(r) => {
            let killing = store.run_kill_intent(kill()).await.unwrap();
            let done = store
                .runs_complete(&[result(r)], NO_FOLLOW_UPS)
                .await
                .unwrap();
            (!done.runs.is_empty(), killing)
        }
        Op::Misfire => {
            let misfired = MarkMisfired {
                node_id: owner.to_owned(),
                run_ids: vec![run.id],
                reason: "late".to_owned(),
                at,
            };
            (
                !store
                    .runs_mark_misfired(misfired, NO_FOLLOW_UPS)
                    .await
                    .unwrap()
                    .runs
                    .is_empty(),
                false,
            )
        }
        Op::Skip => {
            let skip = RunSkip {
                run_id: run.id,
                node_id: owner.to_owned(),
                reason: "stopped".to_owned(),
                at,
            };
            (store.run_skip(skip).await.unwrap().is_some(), false)
        }
        Op::CatchUp => {
            let catch_up = CatchUp {
                run_id: run.id,
                node_id: owner.to_owned(),
                at,
                late_since: NOW,
            };
            store.run_catch_up(catch_up).await.unwrap();
            let after = store.run_get(run.id).await.unwrap();
            let moved = after.trigger_type == TriggerType::Misfire && after.scheduled_at == at;
            (moved, false)
        }
        Op::Adopt | Op::AdoptSending => {
            // The owner never beat: it counts as gone. One call makes both moves; each op
            // reports the one it names: the run taken, in that state.
            let adopted = store
                .runs_adopt_orphaned(adopt("adopter", NOW, 10_000))
                .await
                .unwrap();
            let taken = adopted.iter().find(|r| r.id == run.id).is_some_and(|r| {
                r.state == op.core().to() && r.owner_node.as_deref() == Some("adopter")
            });
            (taken, false)
        }
        Op::KillIntent => (store.run_kill_intent(kill()).await.unwrap(), false),
    }
}

/// One case: `op` tried on a new run (of its own job and owner) brought along `path`. What
/// is wrong with it, and the move the store made, if any.
async fn check_case(
    store: &dyn Store,
    group_id: i64,
    (i, op): (usize, Op),
    (j, path): (usize, Path),
) -> (Vec<String>, Option<(RunState, RunState)>) {
    let mut wrong = Vec::new();
    // A job and an owner per case: catch-up looks at the job's other runs, and adoption
    // takes every run of a gone owner.
    let job = store
        .job_create(job_new(group_id, &format!("m{i}-{j}")))
        .await
        .unwrap();
    let owner = format!("owner-{i}-{j}");
    let before = run_along(store, job.id, &owner, path).await;
    let (reported, killing) = try_op(store, op, &before, &owner).await;
    let after = store.run_get(before.id).await.unwrap();
    let (from, mv) = (before.state, op.core());
    let case = format!("{} on {}", op.label(), path.label());
    let applies = mv.applies_to(from);
    if mv.keeps_state() {
        if after.state != from {
            wrong.push(format!("{case}: moved to {}, core keeps it", after.state));
        }
        if reported != applies {
            wrong.push(format!(
                "{case}: applied {reported}, core's {mv} applies {applies}"
            ));
        }
        return (wrong, None);
    }
    let to = if killing {
        mv.to_with_kill_intent()
    } else {
        mv.to()
    };
    let moved = after.state != from;
    if moved && !from.can_move_to(after.state) {
        wrong.push(format!(
            "{case}: moved {from} -> {}, which core forbids",
            after.state
        ));
    } else if moved != from.can_move_to(to) || moved != applies {
        wrong.push(format!(
            "{case}: {from} -> {to} moved {moved}, core allows {} ({mv} applies {applies})",
            from.can_move_to(to)
        ));
    } else if moved && after.state != to {
        wrong.push(format!("{case}: ended in {}, core says {to}", after.state));
    }
    // A dispatch record still lands on a run an early callback ended (while it was sending),
    // without moving it.
    let recorded = matches!((op, path), (Op::Dispatch, Path::Early(_)));
    if reported != (moved || recorded) {
        wrong.push(format!("{case}: reported {reported}, moved {moved}"));
    }
    if recorded && after.dispatched_at != Some(NOW + 10) {
        wrong.push(format!("{case}: the dispatch record is missing"));
    }
    (wrong, moved.then_some((from, after.state)))
}

/// Every operation that moves a run, tried on a run in every state (reached by every path
/// there): the store moves the run exactly when core's operation applies to its state,
/// lands where core says, never makes a move `can_move_to` refuses, and together the
/// operations make every move core allows.
pub(crate) async fn store_obeys_the_run_state_machine(ctx: Ctx) {
    const LANES: usize = 4;
    let g = group(&*ctx.store, "machine").await;
    let (adoptions, others): (Vec<_>, Vec<_>) = Op::all()
        .into_iter()
        .enumerate()
        .partition(|(_, op)| matches!(op, Op::Adopt | Op::AdoptSending));
    // Cases touch only their own job and run, so they run side by side (a few commits at a
    // time: minutes alone on MariaDB); adoption takes every orphaned run of the database, so
    // its cases run alone afterwards.
    let mut lanes = Vec::new();
    for lane in 0..LANES {
        let store = ctx.store.clone();
        let ops: Vec<(usize, Op)> = others.iter().copied().skip(lane).step_by(LANES).collect();
        lanes.push(tokio::spawn(async move {
            let mut found = Vec::new();
            for op in ops {
                for path in Path::ALL.iter().copied().enumerate() {
                    found.push(check_case(&*store, g.id, op, path).await);
                }
            }
            found
        }));
    }
    let mut found = Vec::new();
    for lane in lanes {
        found.extend(lane.await.expect("a lane of cases"));
    }
    for op in adoptions {
        for path in Path::ALL.iter().copied().enumerate() {
            found.push(check_case(&*ctx.store, g.id, op, path).await);
        }
    }
    let mut wrong = Vec::new();
    let mut made = HashSet::new();
    for (case_wrong, moved) in found {
        wrong.extend(case_wrong);
        made.extend(moved);
    }
    let allowed: HashSet<(RunState, RunState)> = RunState::ALL
        .iter()
        .flat_map(|&a| RunState::ALL.iter().map(move |&b| (a, b)))
        .filter(|(a, b)| a.can_move_to(*b))
        .collect();
    for (from, to) in allowed.difference(&made) {
        wrong.push(format!("no operation made the allowed move {from} -> {to}"));
    }
    assert!(
        wrong.is_empty(),
        "{} case(s) wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
