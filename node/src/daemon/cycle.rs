//! One pass of the loop: for each lease that needs something, observe (a fresh read),
//! decide, act and report; then the records whose lease is gone.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use vtsnap_core::fence::{Fence, NodeState};

use super::decide::{LeaseSeen, decide};
use super::leases::Leases;
use super::observe::lease_key;
use super::{Daemon, registry};

impl Daemon {
    /// One pass over the leases as the watch last showed them and the holds on record.
    /// Only a lease with something to do is read again (a GET), and what is done is decided
    /// from that fresh copy: the store may lag (a renewal not yet seen would look like an
    /// expiry). Nothing is decided from an uncertain read; the watchdog still guards holds.
    /// False if something did not complete, so the pass is repeated soon.
    pub(super) async fn cycle(&self, leases: &Leases) -> bool {
        let completed = if leases.synced() {
            self.pass(&leases.seen()).await
        } else {
            // Before the first full list an absent lease says nothing.
            false
        };
        self.metrics
            .set_unreadable_entries(self.reg.unreadable().len());
        self.metrics.set_holds_active(self.reg.frozen_count());
        self.metrics.cycle();
        completed
    }

    async fn pass(&self, stored: &[Arc<Lease>]) -> bool {
        let mut completed = true;
        let mut seen = BTreeSet::new();
        let unreadable = self.reg.unreadable();
        let lost = self.reg.lost_holds();
        let mut lost_looked_for = true;
        for l in stored {
            let key = lease_key(l);
            seen.insert(key.clone());
            if !self.needs_look(l, &key, &unreadable, lost.is_some()) {
                continue;
            }
            match self.read_lease(&key).await {
                Ok(Some(fresh)) => {
                    completed &= self
                        .handle(
                            &fresh,
                            &key,
                            &unreadable,
                            lost.as_deref(),
                            &mut lost_looked_for,
                        )
                        .await;
                }
                // Gone since the watch showed it: the record (if any) is handled below.
                Ok(None) => {
                    seen.remove(&key);
                }
                Err(()) => {
                    completed = false;
                    lost_looked_for = false;
                }
            }
        }
        for e in self.reg.all() {
            if seen.contains(&e.lease) {
                continue;
            }
            // Absent from the store: confirmed gone by a fresh read before anything is released.
            match self.read_lease(&e.lease).await {
                Ok(None) => {
                    let steps = decide(LeaseSeen::Gone, Some(&e));
                    completed &= self.run_steps(None, &e.lease.clone(), steps).await;
                }
                Ok(Some(fresh)) => {
                    seen.insert(e.lease.clone());
                    completed &= self
                        .handle(
                            &fresh,
                            &e.lease,
                            &unreadable,
                            lost.as_deref(),
                            &mut lost_looked_for,
                        )
                        .await;
                }
                Err(()) => completed = false,
            }
        }
        self.announce_unreadable(&unreadable, &seen).await;
        self.announce_set_aside().await;
        if lost.is_some()
            && lost_looked_for
            && let Err(e) = self.reg.lost_holds_done()
        {
            tracing::warn!(error = %e, "cannot record that the lost holds were looked for; looking again");
            completed = false;
        }
        completed
    }

    /// Decides and acts on one freshly read lease. False if something did not complete.
    async fn handle(
        &self,
        l: &Lease,
        key: &str,
        unreadable: &[registry::RegistryError],
        lost: Option<&Path>,
        lost_looked_for: &mut bool,
    ) -> bool {
        let f = match Fence::from_lease(l) {
            Ok(f) => f,
            Err(e) => {
                tracing::error!(lease = %key, error = %e, "cannot read fence lease");
                return true;
            }
        };
        let span = tracing::info_span!("lease", lease = %key, tablet = %f.tablet_alias, request = %f.request);
        let _g = span.enter();
        if let Some(problem) = unreadable.iter().find(|p| p.lease() == Some(key)) {
            // Never guessed: nothing is held, released or restored for it here; the job's
            // (or GC's) recovery restores the tablet from the lease itself.
            if f.node_state != Some(NodeState::Failed) {
                return self
                    .report(&f, NodeState::Failed, Some(&problem.to_string()))
                    .await;
            }
            return true;
        }
        if let Some(moved_to) = lost
            && self.reg.get(key).is_none()
        {
            match self.recover_lost(&f, moved_to).await {
                Ok(false) => {}
                // Reported; decided on the next pass from the new record.
                Ok(true) => return false,
                Err(e) => {
                    // Not acted on before it is known whether it holds a lost freeze (a
                    // Shutdown would hang on a frozen pod).
                    *lost_looked_for = false;
                    tracing::warn!(error = %e, "cannot look for a hold lost with the corrupt registry; retrying");
                    return false;
                }
            }
        }
        let steps = decide(
            LeaseSeen::at(&f, Timestamp::now()),
            self.reg.get(key).as_ref(),
        );
        self.run_steps(Some(&f), key, steps).await
    }
}
