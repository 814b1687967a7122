//! One run of the testbed: the fleet, three DaemonSets, the workload and
//! the observer, then the schedule's faults one after the other (inject,
//! hold, heal, wait until the cluster has converged again, measured), then
//! the final checks. Every check that fails is a line of
//! [`Report::violations`]; the test asserts there is none.

use crate::docker;
use crate::engine;
use crate::fleet::{poll, Fleet, Options};
use crate::lin::{self, Input, Op, Output};
use crate::observe::{self, Observer};
use crate::schedule::{self, Fault, Kind};
use crate::workload::{self, History, Outcome, SharedClient, Workload};
use crate::{Error, Result};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// What a run does.
#[derive(Debug, Clone)]
pub struct Config {
    pub seed: u64,
    pub faults: usize,
    /// Hold times are the schedule's ranges times this.
    pub hold_scale: f64,
    pub fleet: Options,
    pub workers: usize,
    /// One kv operation per worker every `pace`.
    pub pace: Duration,
    /// One DaemonSet template change every `ds_every`.
    pub ds_every: Duration,
    /// After a heal, the cluster must converge within this…
    pub converge_bound: Duration,
    /// …and then stay converged this long (longer than the servers' node
    /// timeout, 5 s: a node that lost its heartbeats shows it only then).
    pub settle: Duration,
    /// The drover binary the image is made of.
    pub bin: PathBuf,
    /// The kinds of fault the schedule draws from (every kind by default).
    pub kinds: Vec<schedule::Kind>,
}

/// The least a run must have done for its checks to prove anything: a run
/// whose workload hardly ran (a client that could not connect, a fleet
/// that never served) finds no violation and must still fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Minimums {
    pub acked_writes: usize,
    pub register_ops: usize,
    /// The Docker node's pod containers checked through faults of its
    /// agent (0 when the run has no Docker agent or no fault of agents).
    pub containers_checked: usize,
}

/// Per fault (each costs ~8 s of workload at 4 workers × 25 ops/s): about
/// a quarter of what a short run does on a loaded 2-core machine (447
/// acknowledged writes and 800 register operations a fault, see
/// docs/reliability.md).
const MIN_ACKED_WRITES_PER_FAULT: usize = 100;
const MIN_REGISTER_OPS_PER_FAULT: usize = 200;
/// A fault of the Docker node's agent checks its pods of the three
/// DaemonSets; one may be mid-rollout.
const MIN_CONTAINERS_CHECKED: usize = 2;

impl Minimums {
    /// The lines of what `report` did too little of (none when enough).
    pub fn shortfalls(&self, report: &Report) -> Vec<String> {
        let mut out = Vec::new();
        let mut short = |what: &str, got: usize, need: usize| {
            if got < need {
                out.push(format!(
                    "the run did too little to prove anything: {got} {what}, at least {need} needed"
                ));
            }
        };
        short(
            "acknowledged writes",
            report.acked_writes,
            self.acked_writes,
        );
        short(
            "register operations checked for linearizability",
            report.register_ops,
            self.register_ops,
        );
        short(
            "Docker node pod containers checked through faults of its agent",
            report.docker.checked,
            self.containers_checked,
        );
        out
    }
}

impl Config {
    /// What a run of this configuration must at least do (from its faults;
    /// a Docker container check only when the schedule hits agents and the
    /// fleet has a Docker agent, which the run then aims the first fault of
    /// agents at).
    pub fn minimums(&self, schedule: &[Fault]) -> Minimums {
        let faults = schedule.len().max(1);
        let agent_fault = schedule.iter().any(|f| f.kind.hits_agents());
        Minimums {
            acked_writes: MIN_ACKED_WRITES_PER_FAULT * faults,
            register_ops: MIN_REGISTER_OPS_PER_FAULT * faults,
            containers_checked: if agent_fault && self.fleet.docker_agents > 0 {
                MIN_CONTAINERS_CHECKED
            } else {
                0
            },
        }
    }

    /// The short run: ≥ 20 faults in a few minutes.
    pub fn short(seed: u64, bin: PathBuf) -> Config {
        Config {
            seed,
            faults: 20,
            hold_scale: 0.6,
            fleet: Options::default(),
            workers: 4,
            pace: Duration::from_millis(40),
            ds_every: Duration::from_secs(3),
            converge_bound: Duration::from_secs(30),
            settle: Duration::from_millis(5_500),
            bin,
            kinds: schedule::Kind::ALL.to_vec(),
        }
    }
}

/// One fault as it ran.
#[derive(Debug, Clone)]
pub struct Ran {
    pub n: usize,
    pub fault: Fault,
    pub target: String,
    /// Seconds since the run started.
    pub injected: f64,
    pub healed: f64,
    /// Seconds from the heal until converged; None: not within the bound.
    pub converged_after: Option<f64>,
    /// Nodes that turned NotReady between the injection and convergence.
    pub not_ready: Vec<String>,
}

/// What a run measured, and what it found wrong.
#[derive(Debug, Default)]
pub struct Report {
    pub seed: u64,
    pub schedule: Vec<Fault>,
    pub ran: Vec<Ran>,
    pub acked_writes: usize,
    pub unknown_writes: usize,
    pub reads: usize,
    pub register_ops: usize,
    pub log_creates_acked: usize,
    /// Acknowledged writes missing on some member (goal 0).
    pub lost: usize,
    /// Live pods of one DaemonSet sharing a node, as seen (goal 0).
    pub duplicate_pods: usize,
    pub ds_changes_acked: u64,
    /// Nodes that went NotReady during a kill of a server (goal 0).
    pub not_ready_server_killed: usize,
    /// Nodes that went NotReady during any fault of servers only (kill,
    /// pause, partitions, replacement).
    pub not_ready_server_faults: usize,
    pub wall: Duration,
    pub observer_polls: u64,
    pub violations: Vec<String>,
    /// The tail of every container's log, when something failed.
    pub logs: String,
    /// The Docker node's containers through the faults of its agent.
    pub docker: engine::Kept,
}

fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

impl Report {
    /// Convergence times after heals (seconds).
    pub fn converge_times(&self) -> Vec<f64> {
        self.ran.iter().filter_map(|r| r.converged_after).collect()
    }

    /// The figures, as a Markdown table.
    pub fn figures(&self) -> String {
        let mut by_kind: BTreeMap<Kind, usize> = BTreeMap::new();
        for r in &self.ran {
            *by_kind.entry(r.fault.kind).or_default() += 1;
        }
        let kinds: Vec<String> = by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let c = self.converge_times();
        let mut s = String::new();
        let _ = writeln!(s, "| figure | value |\n|---|---|");
        let _ = writeln!(s, "| seed | {} |", self.seed);
        let _ = writeln!(
            s,
            "| faults injected | {} ({}) |",
            self.ran.len(),
            kinds.join(", ")
        );
        let _ = writeln!(
            s,
            "| acknowledged writes | {} (kv register writes + log creates; {} with no answer) |",
            self.acked_writes, self.unknown_writes
        );
        let _ = writeln!(s, "| reads checked | {} |", self.reads);
        let _ = writeln!(
            s,
            "| register operations checked for linearizability | {} |",
            self.register_ops
        );
        let _ = writeln!(
            s,
            "| DaemonSet changes acknowledged | {} |",
            self.ds_changes_acked
        );
        let _ = writeln!(s, "| lost acknowledged writes | {} |", self.lost);
        let _ = writeln!(
            s,
            "| duplicate pods (one DaemonSet, one node) | {} |",
            self.duplicate_pods
        );
        let _ = writeln!(
            s,
            "| converge after heal p50 / max | {:.1} s / {:.1} s ({} of {} heals converged) |",
            pct(c.clone(), 0.5),
            pct(c.clone(), 1.0),
            c.len(),
            self.ran.len()
        );
        let _ = writeln!(
            s,
            "| nodes NotReady while their server was merely killed | {} |",
            self.not_ready_server_killed
        );
        let _ = writeln!(
            s,
            "| nodes NotReady during any fault of servers only (kill, pause, partitions, replacement) | {} |",
            self.not_ready_server_faults
        );
        let d = &self.docker;
        let _ = writeln!(
            s,
            "| Docker node: faults of its agent (cut, kill, pause) / pod containers checked / kept running, not restarted / pod deleted meanwhile | {} / {} / {} / {} |",
            d.faults, d.checked, d.kept, d.replaced
        );
        let _ = writeln!(s, "| wall time | {:.0} s |", self.wall.as_secs_f64());
        let _ = writeln!(s, "| violations | {} |", self.violations.len());
        s
    }

    /// NotReady nodes per fault kind (how many faults saw any, total nodes).
    pub fn not_ready_by_kind(&self) -> String {
        let mut by: BTreeMap<Kind, (usize, usize)> = BTreeMap::new();
        for r in &self.ran {
            let e = by.entry(r.fault.kind).or_default();
            if !r.not_ready.is_empty() {
                e.0 += 1;
            }
            e.1 += r.not_ready.len();
        }
        by.iter()
            .map(|(k, (f, n))| format!("{k}: {f} faults, {n} nodes"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

fn say(t0: Instant, msg: impl AsRef<str>) {
    println!("[{:7.1}s] {}", t0.elapsed().as_secs_f64(), msg.as_ref());
}

/// A run id: short, unique on this machine for this process.
fn run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{:x}{:04x}", std::process::id() % 0xffff, nanos % 0xffff)
}

/// The eligible nodes of the DaemonSets whose convergence is measured.
fn eligible(fleet: &Fleet) -> HashMap<String, Vec<String>> {
    let all: Vec<String> = fleet.agents.iter().map(|a| a.name.clone()).collect();
    let edge: Vec<String> = fleet
        .agents
        .iter()
        .filter(|a| a.edge)
        .map(|a| a.name.clone())
        .collect();
    HashMap::from([("tb-all".to_string(), all), ("tb-edge".to_string(), edge)])
}

/// The state the cluster must reach after a heal: every member answers
/// with a leader known, every node is Ready, every eligible node runs
/// exactly one pod of each DaemonSet, Running. Ok, or what is missing.
async fn converged_now(
    client: &drover_cli::Client,
    singles: &[drover_cli::Client],
    names: &[String],
    eligible: &HashMap<String, Vec<String>>,
) -> std::result::Result<(), String> {
    for s in singles {
        let st = s.status().await.map_err(|e| format!("a member: {e}"))?;
        if st.leader == 0 {
            return Err("a member knows no leader".to_string());
        }
    }
    let nodes = observe::nodes(client).await.map_err(|e| e.to_string())?;
    let not_ready: Vec<&String> = names
        .iter()
        .filter(|n| nodes.get(*n).copied() != Some(true))
        .collect();
    if !not_ready.is_empty() {
        return Err(format!("not Ready: {not_ready:?}"));
    }
    let pods = observe::pods(client).await.map_err(|e| e.to_string())?;
    observe::converged(&pods, eligible)
}

/// Waits until the cluster has converged and stayed so for `settle`
/// (a node whose heartbeats stopped turns NotReady only after the node
/// timeout: a state that holds for less proves nothing); returns how long
/// after the call the stable stretch began. An error after `bound` +
/// `settle`, with what was missing last.
async fn wait_converged(
    fleet: &Fleet,
    eligible: &HashMap<String, Vec<String>>,
    bound: Duration,
    settle: Duration,
) -> Result<Duration> {
    let start = Instant::now();
    let client = fleet.client()?;
    let singles: Vec<_> = fleet
        .servers
        .iter()
        .map(|s| fleet.single(&s.addr()))
        .collect::<Result<_>>()?;
    let names: Vec<String> = fleet.agents.iter().map(|a| a.name.clone()).collect();
    let mut since: Option<Instant> = None;
    let mut last = String::new();
    loop {
        let now = Instant::now();
        match converged_now(&client, &singles, &names, eligible).await {
            Ok(()) => {
                let s = *since.get_or_insert(now);
                if s.elapsed() >= settle {
                    return Ok(s - start);
                }
            }
            Err(why) => {
                since = None;
                last = why;
            }
        }
        if start.elapsed() >= bound + settle {
            return Err(Error::Timeout {
                what: format!("convergence (last: {last})"),
                waited: start.elapsed(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Injects one fault, holds it, heals it; returns the target's name.
/// The pod containers of the Docker nodes among `targets`, by node.
type Containers = BTreeMap<String, BTreeMap<String, engine::Running>>;

fn docker_containers(fleet: &Fleet, targets: &[&str]) -> Result<Containers> {
    let mut out = Containers::new();
    for a in fleet.agents.iter().filter(|a| a.docker) {
        if targets.contains(&a.name.as_str()) {
            out.insert(a.name.clone(), engine::pod_containers(&a.name)?);
        }
    }
    Ok(out)
}

/// Injects `fault`, holds it, heals it. Answers its target(s) and the pod
/// containers of the Docker nodes it hit as they were just before the
/// heal (the agent still away).
async fn inject(
    fleet: &mut Fleet,
    fault: &Fault,
    shared: &SharedClient,
) -> Result<(String, Containers)> {
    let pick = fault.pick as usize;
    let hold = fault.hold;
    let servers = fleet.servers.clone();
    let agents = fleet.agents.clone();
    let leader = fleet.leader().await;
    let followers: Vec<_> = servers.iter().filter(|s| s.id != leader).cloned().collect();
    match fault.kind {
        Kind::KillServer => {
            let s = &servers[pick % servers.len()];
            fleet.kill(&s.name)?;
            tokio::time::sleep(hold).await;
            fleet.start_again(&s.name)?;
            Ok((s.name.clone(), Containers::new()))
        }
        Kind::KillAgent => {
            let a = &agents[pick % agents.len()];
            fleet.kill(&a.name)?;
            tokio::time::sleep(hold).await;
            let held = docker_containers(fleet, &[&a.name])?;
            fleet.start_again(&a.name)?;
            Ok((a.name.clone(), held))
        }
        Kind::PauseServer | Kind::PauseAgent => {
            let name = if fault.kind == Kind::PauseServer {
                servers[pick % servers.len()].name.clone()
            } else {
                agents[pick % agents.len()].name.clone()
            };
            fleet.pause(&name)?;
            tokio::time::sleep(hold).await;
            let held = docker_containers(fleet, &[&name])?;
            fleet.unpause(&name)?;
            Ok((name, held))
        }
        Kind::IsolateLeader | Kind::IsolateFollower => {
            let s = if fault.kind == Kind::IsolateLeader {
                servers
                    .iter()
                    .find(|s| s.id == leader)
                    .unwrap_or(&servers[pick % servers.len()])
            } else {
                &followers[pick % followers.len()]
            };
            fleet.disconnect(&s.name)?;
            tokio::time::sleep(hold).await;
            fleet.connect(&s.name, &s.ip)?;
            Ok((s.name.clone(), Containers::new()))
        }
        Kind::CutAgents => {
            let size = 1 + pick / 7 % agents.len().div_ceil(2);
            let group: Vec<_> = (0..size)
                .map(|i| agents[(pick + i) % agents.len()].clone())
                .collect();
            for a in &group {
                fleet.disconnect(&a.name)?;
            }
            tokio::time::sleep(hold).await;
            let names: Vec<&str> = group.iter().map(|a| a.name.as_str()).collect();
            let held = docker_containers(fleet, &names)?;
            for a in &group {
                fleet.connect(&a.name, &a.ip)?;
            }
            Ok((names.join(","), held))
        }
        Kind::ReplaceMember => {
            let s = &followers[pick % followers.len()];
            fleet.remove_server(s.id).await?;
            *shared.write().unwrap_or_else(|e| e.into_inner()) = Some(fleet.client()?);
            let new = fleet.add_server().await?;
            *shared.write().unwrap_or_else(|e| e.into_inner()) = Some(fleet.client()?);
            Ok((format!("{} -> {}", s.name, new.name), Containers::new()))
        }
    }
}

/// Runs the whole testbed.
pub async fn run(cfg: Config) -> Result<Report> {
    let t0 = Instant::now();
    let mut planned = schedule::schedule_of(&cfg.kinds, cfg.seed, cfg.faults, cfg.hold_scale);
    if cfg.fleet.docker_agents > 0 {
        schedule::aim_first_agent_fault(&mut planned, cfg.fleet.agents as u64);
    }
    let minimums = cfg.minimums(&planned);
    let mut report = Report {
        seed: cfg.seed,
        schedule: planned,
        ..Report::default()
    };
    say(t0, format!("seed {} — {} faults:", cfg.seed, cfg.faults));
    say(
        t0,
        format!(
            "the run must do at least {} acknowledged writes, {} register operations, {} Docker containers checked",
            minimums.acked_writes, minimums.register_ops, minimums.containers_checked
        ),
    );
    for (i, f) in report.schedule.iter().enumerate() {
        println!("    {:3}. {f}", i + 1);
    }
    docker::remove_leftovers();
    engine::remove_orphaned_pods();
    let image = docker::build_image(&cfg.bin)?;
    let run = run_id();
    say(t0, format!("image {image}, run {run}"));
    let mut fleet = Fleet::start(&image, &run, cfg.seed, cfg.fleet.clone()).await?;
    say(
        t0,
        format!(
            "fleet up: {} servers, {} agents on {}",
            fleet.servers.len(),
            fleet.agents.len(),
            fleet.network
        ),
    );
    let client = fleet.client()?;
    for ds in [
        workload::daemon_set("tb-all", None, 0),
        workload::daemon_set("tb-edge", Some(("tb/edge", "true")), 0),
        workload::daemon_set("tb-roll", None, 0),
    ] {
        client.apply(&ds, false).await?;
    }
    let eligible = eligible(&fleet);
    let took = wait_converged(&fleet, &eligible, Duration::from_secs(60), cfg.settle).await?;
    say(
        t0,
        format!("DaemonSets converged in {:.1}s", took.as_secs_f64()),
    );

    let shared: SharedClient = Arc::new(RwLock::new(Some(client)));
    let wl = Workload::start(
        t0,
        shared.clone(),
        cfg.seed,
        cfg.workers,
        cfg.pace,
        cfg.ds_every,
    );
    let obs_client = shared.clone();
    let observer = Observer::start(t0, Duration::from_millis(250), move || {
        obs_client.read().unwrap_or_else(|e| e.into_inner()).clone()
    });

    let mut failure = None;
    for (i, fault) in report.schedule.clone().iter().enumerate() {
        let injected = t0.elapsed().as_secs_f64();
        // The Docker nodes' containers before a fault of agents.
        let before = match fault.kind {
            Kind::KillAgent | Kind::PauseAgent | Kind::CutAgents => {
                let all: Vec<&str> = fleet.agents.iter().map(|a| a.name.as_str()).collect();
                docker_containers(&fleet, &all)?
            }
            _ => Containers::new(),
        };
        let (target, held) = match inject(&mut fleet, fault, &shared).await {
            Ok(t) => t,
            Err(e) => {
                failure = Some(format!("fault {} ({fault}): {e}", i + 1));
                break;
            }
        };
        let healed = t0.elapsed().as_secs_f64();
        let converged = wait_converged(&fleet, &eligible, cfg.converge_bound, cfg.settle).await;
        let converged_after = match &converged {
            Ok(d) => Some(d.as_secs_f64()),
            Err(e) => {
                report.violations.push(format!(
                    "fault {} ({fault} on {target}): not converged within {:?} after the heal: {e}",
                    i + 1,
                    cfg.converge_bound
                ));
                None
            }
        };
        let end = t0.elapsed().as_secs_f64();
        for (node, at_heal) in &held {
            let empty = BTreeMap::new();
            let before = before.get(node).unwrap_or(&empty);
            let after = engine::pod_containers(node)?;
            report.docker.faults += 1;
            for v in engine::compare(node, before, at_heal, &after, &mut report.docker) {
                report
                    .violations
                    .push(format!("fault {} ({fault}): {v}", i + 1));
            }
        }
        let not_ready: Vec<String> = {
            let seen = observer.seen.lock().unwrap_or_else(|e| e.into_inner());
            let set: BTreeSet<String> = seen
                .changes
                .iter()
                .filter(|c| !c.ready && c.at >= injected && c.at <= end)
                .map(|c| c.node.clone())
                .collect();
            set.into_iter().collect()
        };
        say(
            t0,
            format!(
                "fault {:3}/{}: {:<18} {:<40} hold {:4.1}s  converged {}  NotReady {:?}  ops {}",
                i + 1,
                cfg.faults,
                fault.kind.name(),
                target,
                fault.hold.as_secs_f64(),
                converged_after
                    .map(|c| format!("{c:5.1}s"))
                    .unwrap_or_else(|| "NEVER".into()),
                not_ready,
                wl.done.load(std::sync::atomic::Ordering::Relaxed),
            ),
        );
        report.ran.push(Ran {
            n: i + 1,
            fault: *fault,
            target,
            injected,
            healed,
            converged_after,
            not_ready,
        });
        if converged.is_err() && report.violations.len() >= 3 {
            failure = Some("three heals did not converge: the faults stop here".into());
            break;
        }
    }
    let history = wl.stop().await;
    let seen = observer.stop().await;
    say(t0, "workload stopped; final checks");
    if let Some(f) = failure {
        report.violations.push(f);
    }
    report.observer_polls = seen.polls;
    report.duplicate_pods = seen.duplicates.len();
    for d in seen.duplicates.iter().take(10) {
        report.violations.push(format!(
            "two live pods of {} on {} at {:.1}s: {:?}",
            d.ds, d.node, d.at, d.pods
        ));
    }
    report.not_ready_server_killed = report
        .ran
        .iter()
        .filter(|r| r.fault.kind == Kind::KillServer)
        .map(|r| r.not_ready.len())
        .sum();
    report.not_ready_server_faults = report
        .ran
        .iter()
        .filter(|r| {
            matches!(
                r.fault.kind,
                Kind::KillServer
                    | Kind::PauseServer
                    | Kind::IsolateLeader
                    | Kind::IsolateFollower
                    | Kind::ReplaceMember
            )
        })
        .map(|r| r.not_ready.len())
        .sum();
    if report.not_ready_server_killed > 0 {
        report.violations.push(format!(
            "{} node(s) went NotReady while their server was merely killed: {:?}",
            report.not_ready_server_killed,
            report
                .ran
                .iter()
                .filter(|r| r.fault.kind == Kind::KillServer && !r.not_ready.is_empty())
                .map(|r| format!("fault {}: {:?}", r.n, r.not_ready))
                .collect::<Vec<_>>()
        ));
    }
    if let Err(e) = final_checks(&fleet, &eligible, history, &mut report, t0).await {
        report.violations.push(format!("final checks: {e}"));
    }
    let shortfalls = minimums.shortfalls(&report);
    report.violations.extend(shortfalls);
    report.wall = t0.elapsed();
    if !report.violations.is_empty() {
        report.logs = fleet.logs_tail(40);
    }
    if let Some(dir) = std::env::var_os("DROVER_TESTBED_LOGS") {
        let dir = PathBuf::from(dir).join(&run);
        match fleet.save_logs(&dir) {
            Ok(()) => say(t0, format!("containers' logs in {}", dir.display())),
            Err(e) => say(
                t0,
                format!("cannot save the logs in {}: {e}", dir.display()),
            ),
        }
    }
    say(t0, "done");
    Ok(report)
}

async fn final_checks(
    fleet: &Fleet,
    eligible: &HashMap<String, Vec<String>>,
    mut history: History,
    report: &mut Report,
    t0: Instant,
) -> Result<()> {
    report.acked_writes = history.acked_writes();
    report.unknown_writes = history.unknown_writes();
    report.ds_changes_acked = history.ds_changes_acked;
    // The rolling DaemonSet too, once its changes stopped.
    let mut all = eligible.clone();
    all.insert(
        "tb-roll".into(),
        fleet.agents.iter().map(|a| a.name.clone()).collect(),
    );
    if let Err(e) = wait_converged(fleet, &all, Duration::from_secs(60), Duration::ZERO).await {
        report.violations.push(format!("at the end: {e}"));
    }
    // Every member applies the same index.
    let client = fleet.client()?;
    let singles: Vec<_> = fleet
        .servers
        .iter()
        .map(|s| fleet.single(&s.addr()).map(|c| (s.name.clone(), c)))
        .collect::<Result<_>>()?;
    // A write after everything: every member must have applied it.
    let fence = client
        .update("/tb/fence", b"end".to_vec(), 0, true)
        .await?
        .revision;
    poll(
        "every member to apply the last write",
        Duration::from_secs(30),
        Duration::from_millis(100),
        || {
            let singles = singles.clone();
            async move {
                for (_, s) in &singles {
                    if s.status().await.ok()?.applied < fence {
                        return None;
                    }
                }
                Some(())
            }
        },
    )
    .await?;

    // Log keys: every acknowledged create on every member, exactly once,
    // with its value; nothing that was not attempted; nothing refused.
    let attempted: HashMap<&str, &workload::Create> = history
        .creates
        .iter()
        .map(|c| (c.key.as_str(), c))
        .collect();
    report.log_creates_acked = history
        .creates
        .iter()
        .filter(|c| matches!(c.outcome, Outcome::Acked(_)))
        .count();
    let mut lost = BTreeSet::new();
    for (name, s) in &singles {
        let (kvs, _) = s.list("/tb/log/", true).await?;
        let mut count: HashMap<&str, usize> = HashMap::new();
        for kv in &kvs {
            *count.entry(kv.key.as_str()).or_default() += 1;
            match attempted.get(kv.key.as_str()) {
                None => report
                    .violations
                    .push(format!("{name}: {} was never written", kv.key)),
                Some(c) => {
                    if kv.value != c.value.as_bytes() {
                        report.violations.push(format!(
                            "{name}: {} holds {:?}, not {:?}",
                            kv.key,
                            String::from_utf8_lossy(&kv.value),
                            c.value
                        ));
                    }
                    if let Outcome::Failed(why) = &c.outcome {
                        report.violations.push(format!(
                            "{name}: {} is there though its create was refused ({why})",
                            kv.key
                        ));
                    }
                    if let Outcome::Acked(rev) = c.outcome {
                        if kv.create_revision != rev {
                            report.violations.push(format!(
                                "{name}: {} was created at {} but acknowledged at {rev}",
                                kv.key, kv.create_revision
                            ));
                        }
                    }
                }
            }
        }
        for (k, n) in &count {
            if *n > 1 {
                report
                    .violations
                    .push(format!("{name}: {k} listed {n} times"));
            }
        }
        for c in &history.creates {
            if matches!(c.outcome, Outcome::Acked(_)) && !count.contains_key(c.key.as_str()) {
                lost.insert(c.key.clone());
                report
                    .violations
                    .push(format!("{name}: acknowledged {} is missing", c.key));
            }
        }
    }
    report.lost = lost.len();

    // Registers: a last linearizable read of each key joins its history;
    // every member holds that value.
    for k in 0..workload::REGISTERS {
        let key = workload::register_key(k);
        let call = t0.elapsed().as_nanos() as u64;
        let (kv, _) = client.get(&key, false).await?;
        let value = kv.map(|kv| {
            std::str::from_utf8(&kv.value)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(u64::MAX)
        });
        history.ops.push((
            k,
            Op {
                client: usize::MAX,
                input: Input::Read,
                output: Output::Read(value),
                call,
                ret: Some(t0.elapsed().as_nanos() as u64),
            },
        ));
        for (name, s) in &singles {
            let (kv, _) = s.get(&key, true).await?;
            let v = kv.map(|kv| String::from_utf8_lossy(&kv.value).into_owned());
            if v != value.map(|v| v.to_string()) {
                report
                    .violations
                    .push(format!("{name}: {key} holds {v:?}, the cluster {value:?}"));
            }
        }
    }
    report.reads = history
        .ops
        .iter()
        .filter(|(_, o)| o.input == Input::Read && o.output != Output::Unknown)
        .count();
    report.register_ops = history.ops.len();
    let mut per_key: BTreeMap<u64, Vec<Op>> = BTreeMap::new();
    for (k, op) in history.ops {
        per_key.entry(k).or_default().push(op);
    }
    let results = tokio::task::spawn_blocking(move || {
        per_key
            .into_iter()
            .map(|(k, ops)| (k, ops.len(), lin::check(None, &ops)))
            .collect::<Vec<_>>()
    })
    .await
    .map_err(|e| Error::Setup(format!("the checker panicked: {e}")))?;
    for (k, n, r) in results {
        if let Err(e) = r {
            report.violations.push(format!(
                "{} ({n} operations): {e}",
                workload::register_key(k)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config::short(1, PathBuf::from("drover"))
    }

    #[test]
    fn a_run_that_did_too_little_fails_whatever_else_it_saw() {
        let cfg = cfg();
        let plan = schedule::schedule(7, 20, 0.6);
        let min = cfg.minimums(&plan);
        assert_eq!(min.acked_writes, 2_000);
        assert_eq!(min.register_ops, 4_000);
        assert_eq!(min.containers_checked, 2);
        let mut report = Report {
            acked_writes: 2_000,
            register_ops: 4_000,
            ..Report::default()
        };
        report.docker.checked = 2;
        assert!(min.shortfalls(&report).is_empty());
        report.acked_writes = 1_999;
        report.register_ops = 0;
        report.docker.checked = 1;
        let short = min.shortfalls(&report);
        assert_eq!(short.len(), 3, "{short:?}");
        assert!(short[0].contains("1999 acknowledged writes, at least 2000"));
    }

    #[test]
    fn no_container_minimum_without_a_fault_of_agents_or_a_docker_agent() {
        let mut cfg = cfg();
        let servers_only = schedule::schedule_of(&[Kind::KillServer], 3, 4, 1.0);
        assert_eq!(cfg.minimums(&servers_only).containers_checked, 0);
        let plan = schedule::schedule(3, 8, 1.0);
        assert_eq!(cfg.minimums(&plan).containers_checked, 2);
        cfg.fleet.docker_agents = 0;
        assert_eq!(cfg.minimums(&plan).containers_checked, 0);
    }
}
