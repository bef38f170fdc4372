//! act: takes the plan's steps in order. Each step that changes something pushes its undo
//! before it runs (a call that failed may still have taken effect; every undo is
//! idempotent), except the fence, whose undo needs the fence. On every exit path the
//! undo stack unwinds: each undo attempted even if an earlier one failed, the lease
//! deleted only if all of them succeeded, else left to expire for recovery (exit 4).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tracing::Instrument;
use vtsnap_core::config::{Lifecycle, Mode, WaitFor};
use vtsnap_core::events::{EventType, Events, Subject};
use vtsnap_core::fence::client::{self as fence_client, FenceClientError, FenceSpec};
use vtsnap_core::fence::put_back::{self, TabletChanges};
use vtsnap_core::fence::{NodeState, Request};
use vtsnap_core::reconcile::Wake;
use vtsnap_core::snapshot::{self, NewSnapshot, Phase, SnapshotStatus};
use vtsnap_core::vtctld::TabletType;

use super::RunOptions;
use super::decide::{SnapshotPlan, Step, Undo, crash_safety, mode_name};
use super::error::{RunError, UnfenceProblem};
use super::fence::LiveFence;
use super::observe::{Context, online_facts};
use super::report::{StepTiming, Summary};

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The step before the plan's when an expired fence was decided on (docs/design.md §5.4):
/// core's one recovery (the GC's too) — the node helper releases, the tablet is put back, the
/// lease deleted. `lease` is the object the decision was made on, so its version binds the
/// release request: a lease changed since is not overwritten.
pub async fn recover_fence(
    ctx: &Context,
    kube: &kube::Client,
    lease: &Lease,
    node_timeout: Duration,
) -> Result<String, RunError> {
    tracing::info!(lease = ?lease.metadata.name, shard = %ctx.shard, "recovering an expired fence");
    let r = fence_client::recover(&ctx.leases(kube), lease, node_timeout)
        .await
        .map_err(RunError::FenceRecovery)?;
    Ok(r.lease)
}

/// The state of one run while it acts.
pub struct Actor<'a> {
    kube: kube::Client,
    events: Events,
    ctx: &'a Context,
    opts: &'a RunOptions,
    plan: &'a SnapshotPlan,
    pub summary: Summary,
    fence: Option<LiveFence>,
    /// Pushed undos, oldest first.
    stack: Vec<Undo>,
    /// mysqld's version string, from GetFullStatus.
    version: String,
    /// Cold: the exact executed GTID set; online: the lower bound.
    position: String,
    snapshot: Option<String>,
    /// The VolumeSnapshot's resourceVersion at creation: its watch starts there.
    snapshot_version: Option<String>,
    /// When quiescing began (after the layout probe): the fence window and maxHold's clock.
    quiesce_start: Option<Instant>,
    /// When the last step was recorded (each step's time runs from there).
    last_step: Instant,
}

impl std::fmt::Debug for Actor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Actor")
            .field("stack", &self.stack)
            .field("snapshot", &self.snapshot)
            .finish_non_exhaustive()
    }
}

impl<'a> Actor<'a> {
    pub fn new(
        kube: kube::Client,
        ctx: &'a Context,
        opts: &'a RunOptions,
        plan: &'a SnapshotPlan,
        summary: Summary,
    ) -> Self {
        Self {
            events: Events::new(kube.clone(), "vtsnap-snapshot"),
            kube,
            ctx,
            opts,
            plan,
            summary,
            fence: None,
            stack: Vec::new(),
            version: String::new(),
            position: String::new(),
            snapshot: None,
            snapshot_version: None,
            quiesce_start: None,
            last_step: Instant::now(),
        }
    }

    /// Runs the plan to its end; the undo stack is unwound on every path.
    pub async fn run(&mut self) -> Result<(), RunError> {
        for planned in &self.plan.steps {
            let step = planned.step;
            let span = tracing::info_span!("step", step = step.as_str(), shard = %self.ctx.shard, tablet = %self.plan.target.target.alias);
            if let Some(u) = planned.undo
                && step != Step::Fence
            {
                self.push(u);
            }
            if let Err(e) = self.take(step).instrument(span).await {
                let problems = self.unwind().await;
                return Err(if problems.is_empty() {
                    e
                } else {
                    RunError::UnfenceIncomplete {
                        cause: Some(Box::new(e)),
                        problems,
                    }
                });
            }
            if step == Step::Fence {
                self.push(Undo::Unfence);
            }
        }
        let problems = self.unwind().await;
        let name = self.snapshot.clone().unwrap_or_default();
        if !problems.is_empty() {
            self.label(&name, Phase::Cut, None).await;
            return Err(RunError::UnfenceIncomplete {
                cause: None,
                problems,
            });
        }
        self.record("unfenced").await;
        self.after_unfence(&name).await
    }

    fn push(&mut self, u: Undo) {
        if !self.stack.contains(&u) {
            self.stack.push(u);
        }
    }

    /// Records a finished step (the JSON `steps`); tests may park the run right after it.
    async fn record(&mut self, s: impl Into<String>) {
        let s = s.into();
        tracing::info!(step = %s, shard = %self.ctx.shard, "step");
        let park = self.opts.park_after.as_ref().is_some_and(|f| (f.0)(&s));
        let now = Instant::now();
        self.summary.step_timings.push(StepTiming {
            step: s.clone(),
            ms: ms(now.duration_since(self.last_step)),
        });
        self.last_step = now;
        self.summary.steps.push(s);
        if park {
            std::future::pending::<()>().await;
        }
    }

    async fn ask(&self, request: Request, want: NodeState) -> Result<(), FenceClientError> {
        // The plan always fences before it asks the node; no fence is a plan bug, refused.
        match &self.fence {
            Some(f) => f
                .ask(request, want, self.opts.node_timeout)
                .await
                .map(|_| ()),
            None => Err(FenceClientError::Parse(vtsnap_core::fence::FenceError {
                lease: self.ctx.lease_name(),
                reason: "no fence was taken before a node request".into(),
            })),
        }
    }

    async fn take(&mut self, step: Step) -> Result<(), RunError> {
        let t = &self.plan.target.target;
        let alias = t.tablet_alias.clone();
        match step {
            Step::CheckOnlinePreconditions => {
                let facts = online_facts(&self.ctx.vtctld, &alias).await?;
                let violations = crash_safety(facts.flavor, &facts.values);
                if !violations.is_empty() {
                    return Err(RunError::OnlinePrecondition {
                        alias: t.alias.clone(),
                        violations,
                    });
                }
                self.version = facts.version;
                self.position = facts.lower_bound;
                self.summary.gtid = Some(self.position.clone());
                self.record("online preconditions hold").await;
            }
            Step::Fence => {
                let spec = FenceSpec {
                    namespace: self.ctx.shard.namespace.clone(),
                    name: self.ctx.lease_name(),
                    holder: self.opts.holder.clone(),
                    node: t.node.clone(),
                    lease_duration: self.opts.lease_duration,
                    target_pod: t.pod.clone(),
                    target_pod_uid: t.pod_uid.clone(),
                    tablet_alias: alias,
                    original_type: self.plan.target.original_type,
                    vtctld: self.ctx.vtctld.endpoint().to_owned(),
                    mode: mode_name(self.plan.mode).into(),
                    max_hold: self.ctx.policy.snapshot.max_hold.get(),
                };
                let leases = self.ctx.leases(&self.kube);
                let lease = fence_client::acquire(&leases, &spec, Request::Probe)
                    .await
                    .map_err(|e| match e {
                        FenceClientError::Held { .. } | FenceClientError::Expired { .. } => {
                            RunError::FenceTaken(e)
                        }
                        other => RunError::Fence(other),
                    })?;
                self.fence = Some(LiveFence::start(
                    leases,
                    &lease,
                    self.opts.lease_duration / 3,
                ));
                self.record("fence acquired").await;
                self.event_pod(
                    EventType::Normal,
                    "Fence",
                    "SnapshotFenced",
                    &format!(
                        "vtsnap fenced this tablet for a {} snapshot (lease {})",
                        mode_name(self.plan.mode),
                        self.ctx.lease_name()
                    ),
                )
                .await;
            }
            Step::ProbeLayout => {
                self.ask(Request::Probe, NodeState::Probed)
                    .await
                    .map_err(|e| match e {
                        FenceClientError::NodeRefused { .. } => RunError::LayoutRefused(e),
                        other => RunError::Probe(other),
                    })?;
                self.record("layout probed").await;
                self.quiesce_start = Some(Instant::now());
            }
            Step::Drain => {
                self.ctx
                    .vtctld
                    .change_tablet_type(&alias, TabletType::Drained)
                    .await
                    .map_err(|source| RunError::Drain {
                        alias: t.alias.clone(),
                        source,
                    })?;
                self.record("tablet DRAINED").await;
            }
            Step::StopReplication => {
                self.ctx
                    .vtctld
                    .stop_replication(&alias)
                    .await
                    .map_err(|source| RunError::StopReplication {
                        alias: t.alias.clone(),
                        source,
                    })?;
                self.record("replication stopped").await;
            }
            Step::RecordPosition => {
                let fs = self
                    .ctx
                    .vtctld
                    .get_full_status(&alias)
                    .await
                    .map_err(|source| RunError::Status {
                        alias: t.alias.clone(),
                        source,
                    })?;
                let position = fs
                    .replication_status
                    .as_ref()
                    .map(|s| s.position.clone())
                    .unwrap_or_default();
                if position.is_empty() {
                    return Err(RunError::NoPosition {
                        alias: t.alias.clone(),
                    });
                }
                self.summary.gtid = Some(position.clone());
                self.position = position;
                self.version = fs.version;
                self.record("position recorded").await;
            }
            Step::StopMysqld => {
                self.ask(Request::Stop, NodeState::Stopped)
                    .await
                    .map_err(RunError::NodeStop)?;
                self.record("mysqld stopped").await;
            }
            Step::HoldMysqld => {
                self.ask(Request::Hold, NodeState::Held)
                    .await
                    .map_err(RunError::NodeHold)?;
                self.record("mysqld held").await;
                let msg = format!("mysqld stopped cleanly and held at {}", self.position);
                self.event_pod(EventType::Normal, "HoldMysqld", "SnapshotQuiesced", &msg)
                    .await;
            }
            Step::Fsfreeze => {
                self.ask(Request::Fsfreeze, NodeState::Fsfrozen)
                    .await
                    .map_err(RunError::Fsfreeze)?;
                self.record("volume frozen").await;
            }
            Step::CreateSnapshot => {
                let name = self.create_snapshot().await?;
                self.snapshot = Some(name);
            }
            Step::WaitForCut | Step::WaitForReady => {
                let name = self.snapshot.clone().unwrap_or_default();
                self.wait_cut(&name).await?;
            }
        }
        Ok(())
    }

    /// Runs every pushed undo, last first. Returns what failed.
    async fn unwind(&mut self) -> Vec<UnfenceProblem> {
        let mut problems = Vec::new();
        let mut changes = TabletChanges::NONE;
        let mut unfence = false;
        let mut release_node = false;
        while let Some(u) = self.stack.pop() {
            match u {
                Undo::ReleaseNode => release_node = true,
                Undo::StartReplication => changes.replication_stopped = true,
                Undo::RestoreType => changes.type_changed = true,
                Undo::Unfence => unfence = true,
            }
        }
        // The order is the plan's: node release, StartReplication, the original type.
        if release_node {
            match self.ask(Request::Release, NodeState::Released).await {
                Ok(()) => self.record("node released").await,
                Err(e) => problems.push(UnfenceProblem::NodeRelease(e)),
            }
        }
        let t = &self.plan.target;
        let put_back = put_back::put_tablet_back(
            &self.ctx.vtctld,
            &t.target.tablet_alias,
            t.original_type,
            changes,
        )
        .await;
        if put_back.is_empty() && changes != TabletChanges::NONE {
            self.record("tablet put back").await;
        }
        problems.extend(put_back.into_iter().map(UnfenceProblem::PutBack));
        if let Some(fence) = self.fence.take() {
            if problems.is_empty() && unfence {
                match fence.delete().await {
                    Ok(()) => self.record("fence deleted").await,
                    Err(e) => problems.push(UnfenceProblem::DeleteFence(e)),
                }
            } else {
                fence.stop_renewing();
            }
        }
        if let Some(start) = self.quiesce_start {
            let quiesced = self.plan.mode == Mode::Cold || self.plan.fsfreeze;
            self.summary.fence_window_ms = Some(if quiesced { ms(start.elapsed()) } else { 0 });
        }
        if unfence || release_node {
            if problems.is_empty() {
                self.event_pod(
                    EventType::Normal,
                    "Unfence",
                    "SnapshotUnfenced",
                    "the tablet is back in service",
                )
                .await;
            } else {
                let list = problems
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ");
                self.event_pod(
                    EventType::Warning,
                    "Unfence",
                    "UnfenceIncomplete",
                    &format!("left for recovery: {list}"),
                )
                .await;
            }
        }
        problems
    }

    /// An Event on the tablet's Pod; `action` names the step.
    async fn event_pod(&self, type_: EventType, action: &str, reason: &str, message: &str) {
        let t = &self.plan.target.target;
        let pod = Subject::pod(&self.ctx.shard.namespace, &t.pod, &t.pod_uid);
        self.events
            .publish(&pod, type_, action, reason, message)
            .await;
    }

    /// A Normal Event on the VolumeSnapshot; `action` names the step.
    async fn event_snapshot(&self, name: &str, action: &str, reason: &str, message: &str) {
        let snapshot = Subject::snapshot(&self.ctx.shard.namespace, name);
        self.events
            .publish(&snapshot, EventType::Normal, action, reason, message)
            .await;
    }

    fn snapshots(&self) -> Api<DynamicObject> {
        vtsnap_core::reconcile::apis::volume_snapshots(&self.kube, &self.ctx.shard.namespace)
    }

    async fn create_snapshot(&mut self) -> Result<String, RunError> {
        let t = &self.plan.target.target;
        let at = Timestamp::now();
        let flavor = vtsnap_core::mysql_version::Flavor::of_version(&self.version).as_str();
        let owner = match self.ctx.policy.deletion_policy.when_deleted {
            Lifecycle::Delete => self
                .cluster_uid()
                .await
                .map(|uid| (self.ctx.shard.cluster.clone(), uid)),
            Lifecycle::Retain => None,
        };
        let gtid_key = match self.plan.mode {
            Mode::Cold => snapshot::ANN_GTID_EXECUTED,
            Mode::Online => snapshot::ANN_GTID_LOWER_BOUND,
        };
        let policy = &self.ctx.policy.snapshot;
        let mut attempt = 0;
        let (name, created) = loop {
            let name = snapshot::snapshot_name(&self.ctx.shard, at, attempt);
            let obj = snapshot::build(&NewSnapshot {
                shard: &self.ctx.shard,
                name: name.clone(),
                class: policy.volume_snapshot_class_name.as_deref(),
                source_pvc: &t.pvc,
                source_tablet: &t.alias,
                source_uid: t.tablet_alias.uid.get(),
                source_node: &t.node,
                mode: mode_name(self.plan.mode),
                gtid: (gtid_key, &self.position),
                mysql_version: &self.version,
                mysql_flavor: flavor,
                extra_labels: &policy.labels,
                extra_annotations: &policy.annotations,
                owner: owner.as_ref().map(|(n, u)| (n.as_str(), u.as_str())),
            });
            let dynobj: DynamicObject =
                serde_json::from_value(obj).map_err(|source| RunError::BuildSnapshot {
                    name: name.clone(),
                    source,
                })?;
            match self
                .snapshots()
                .create(&PostParams::default(), &dynobj)
                .await
            {
                Ok(created) => break (name, created),
                // Someone else's snapshot (an earlier job within the same second): never
                // touched or adopted; this job takes the next name.
                Err(kube::Error::Api(s))
                    if s.reason == "AlreadyExists" && attempt + 1 < snapshot::NAME_ATTEMPTS =>
                {
                    tracing::info!(taken = %name, "snapshot name already taken; trying the next");
                    attempt += 1;
                }
                Err(source) => return Err(RunError::CreateSnapshot { name, source }),
            }
        };
        self.snapshot_version = created.metadata.resource_version;
        self.summary.snapshot = Some(name.clone());
        let msg = format!(
            "{} snapshot of {} ({})",
            mode_name(self.plan.mode),
            t.alias,
            t.pvc
        );
        self.event_snapshot(&name, "CreateSnapshot", "SnapshotCreated", &msg)
            .await;
        self.record(format!("VolumeSnapshot {name} created")).await;
        Ok(name)
    }

    async fn cluster_uid(&self) -> Option<String> {
        vtsnap_core::reconcile::apis::vitess_clusters(&self.kube, &self.ctx.shard.namespace)
            .get_opt(&self.ctx.shard.cluster)
            .await
            .ok()
            .flatten()
            .and_then(|c| c.metadata.uid)
    }

    /// A wake-up on the VolumeSnapshot's changes since its creation.
    async fn watch_snapshot(&self, name: &str) -> Wake<DynamicObject> {
        Wake::watch(&self.snapshots(), name, self.snapshot_version.as_deref()).await
    }

    async fn status(&self, name: &str) -> Option<SnapshotStatus> {
        let o = self.snapshots().get_opt(name).await.ok().flatten()?;
        Some(SnapshotStatus::of(
            &serde_json::to_value(o).unwrap_or(Value::Null),
        ))
    }

    /// Waits for the cut (or, with `waitFor: ready`, for readyToUse), bounded by the
    /// timeout and by what is left of maxHold; `status.error` is retried until the
    /// deadline, never judged by its text.
    async fn wait_cut(&mut self, name: &str) -> Result<(), RunError> {
        let begin = Instant::now();
        let policy = &self.ctx.policy.snapshot;
        let held = self.quiesce_start.map_or(Duration::ZERO, |s| s.elapsed());
        let hold_left = policy.max_hold.get().saturating_sub(held);
        let want_ready = self.plan.wait_for == WaitFor::Ready;
        let limit = if want_ready {
            policy.ready_timeout.get()
        } else {
            policy.cut_timeout.get()
        }
        .min(hold_left);
        let mut last_error = None;
        // Woken by the snapshot's changes: the cut is inside the fence window, and a poll
        // interval there is out-of-service time.
        let mut wake = self.watch_snapshot(name).await;
        while begin.elapsed() < limit {
            if let Some(s) = self.status(name).await {
                if (want_ready && s.is_ready()) || (!want_ready && s.is_cut()) {
                    self.summary.cut_latency_ms = Some(ms(begin.elapsed()));
                    let action = if want_ready {
                        "WaitForReady"
                    } else {
                        "WaitForCut"
                    };
                    self.event_snapshot(name, action, "SnapshotCut", "the point in time is taken")
                        .await;
                    let what = if want_ready { "ready" } else { "cut" };
                    self.record(format!("snapshot {what}")).await;
                    return Ok(());
                }
                last_error = s.error;
            }
            wake.nap(self.opts.poll.min(limit.saturating_sub(begin.elapsed())))
                .await;
        }
        self.label(name, Phase::Failed, None).await;
        self.summary.phase = Some(Phase::Failed);
        Err(RunError::CutTimeout {
            name: name.to_owned(),
            limit,
            last_error: last_error.unwrap_or_else(|| "none".into()),
        })
    }

    /// Outside the fence: mark the cut, wait for readyToUse, mark ready or failed.
    async fn after_unfence(&mut self, name: &str) -> Result<(), RunError> {
        let cut = Timestamp::now().to_string();
        self.label(name, Phase::Cut, Some((snapshot::ANN_CUT_TIME, &cut)))
            .await;
        let begin = Instant::now();
        let timeout = self.ctx.policy.snapshot.ready_timeout;
        let mut wake = self.watch_snapshot(name).await;
        while begin.elapsed() < timeout.get() {
            if self.status(name).await.is_some_and(|s| s.is_ready()) {
                let now = Timestamp::now().to_string();
                self.label(name, Phase::Ready, Some((snapshot::ANN_READY_TIME, &now)))
                    .await;
                self.summary.ready_latency_ms = Some(ms(begin.elapsed()));
                self.summary.phase = Some(Phase::Ready);
                self.event_snapshot(
                    name,
                    "WaitForReady",
                    "SnapshotReady",
                    "readyToUse: usable for provisioning",
                )
                .await;
                self.record("snapshot ready").await;
                return Ok(());
            }
            wake.nap(
                self.opts
                    .poll
                    .min(timeout.get().saturating_sub(begin.elapsed())),
            )
            .await;
        }
        self.label(name, Phase::Failed, None).await;
        self.summary.phase = Some(Phase::Failed);
        Err(RunError::ReadyTimeout {
            name: name.to_owned(),
            timeout: timeout.to_string(),
        })
    }

    async fn label(&self, name: &str, phase: Phase, ann: Option<(&str, &str)>) {
        let mut anns = BTreeMap::new();
        if let Some((k, v)) = ann {
            anns.insert(k.to_owned(), v.to_owned());
        }
        let patch = json!({"metadata": {"labels": {snapshot::LABEL_PHASE: phase.as_str()}, "annotations": anns}});
        if let Err(e) = self
            .snapshots()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::warn!(error = %e, snapshot = name, "cannot label the snapshot");
        }
    }
}
