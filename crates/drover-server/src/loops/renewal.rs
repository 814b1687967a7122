//! Every member renews its own member certificate while it runs
//! ([`crate::trust::Trust::renew_member_if_due`]): a member that stays up
//! longer than its certificate lives keeps serving, and nobody has to
//! restart it.

use crate::trust::Trust;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::watch;

/// The longest wait between two looks: a clock that jumps (a suspended
/// machine, a corrected clock) is noticed within this.
const AT_MOST: Duration = Duration::from_secs(3600);

/// After a failed renewal (a full disk), the next try.
const RETRY: Duration = Duration::from_secs(60);

/// Renews this member's certificate whenever it is due, until `stop`.
pub async fn run(trust: Arc<Trust>, mut stop: watch::Receiver<bool>) {
    loop {
        let now = SystemTime::now();
        let wait = trust
            .member_renewal_due(now)
            .duration_since(now)
            .unwrap_or_default()
            .min(AT_MOST);
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tokio::time::sleep(wait) => {}
        }
        if let Err(e) = trust.renew_member_if_due() {
            tracing::error!(
                "cannot renew this member's certificate: {e:#}; retrying in {} s (the current one stays in use until it expires)",
                RETRY.as_secs()
            );
            tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                _ = tokio::time::sleep(RETRY) => {}
            }
        }
    }
}
