//! On the leader: the cluster's identity (written once, by the first leader
//! of a cluster that has none) and the scheduled snapshots of
//! `--snapshot-interval` into `--snapshot-dir`, keeping the newest
//! `--snapshot-retain`. A member that is not the leader takes none, so a
//! cluster writes one snapshot per interval wherever its leader is;
//! `drover cluster snapshot list` asks every member.

use crate::api::snapshot;
use crate::ctx::Ctx;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Runs until `stop`.
pub async fn run(ctx: Arc<Ctx>, stop: watch::Receiver<bool>) {
    super::each_term(&ctx, stop, |_| lead(&ctx)).await
}

async fn lead(ctx: &Ctx) {
    // The identity first: retried until it is written (a new leader's
    // first writes can meet an election).
    let mut wait = Duration::from_millis(100);
    loop {
        match snapshot::ensure_cluster_id(ctx).await {
            Ok(_) => break,
            Err(e) => {
                tracing::warn!("cannot record the cluster's id yet: {e}");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(5));
            }
        }
    }
    let s = ctx.snapshots.clone();
    let Some(every) = s.interval else {
        return;
    };
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The revision of the last snapshot taken: none is taken again while
    // nothing changed (the newest one already holds that state).
    let mut last = 0;
    loop {
        tick.tick().await;
        if last != 0 && ctx.store.last_change() <= last {
            tracing::debug!("scheduled snapshot skipped: nothing changed since revision {last}");
            continue;
        }
        match snapshot::save_scheduled(ctx, &s.dir, s.retain).await {
            Ok((_, revision)) => last = revision,
            Err(e) => tracing::error!("scheduled snapshot into {} failed: {e}", s.dir.display()),
        }
    }
}
