//! The fault schedule: a seed gives the same sequence of faults (kind,
//! the number that picks the target among the candidates at that moment,
//! how long the fault holds before it heals). Pure.
//!
//! Faults come in rounds: each round has every kind once, in an order the
//! seed shuffles, so even a short run injects every kind.

use crate::rng::Rng;
use std::fmt;
use std::time::Duration;

/// One kind of fault (Jepsen's nemeses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// SIGKILL a server, restart it after the hold.
    KillServer,
    /// SIGKILL an agent, restart it after the hold.
    KillAgent,
    /// `docker pause` a server (a frozen process), unpause after the hold.
    PauseServer,
    /// `docker pause` an agent.
    PauseAgent,
    /// Cut the leader from every other container (servers, agents, client).
    IsolateLeader,
    /// Split the servers 2/1: cut one follower from everything.
    IsolateFollower,
    /// Cut a group of agents from every server.
    CutAgents,
    /// Remove a follower from the cluster (`Cluster.RemoveMember`) and add
    /// a new member in its place (`drover server --join`).
    ReplaceMember,
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::KillServer,
        Kind::KillAgent,
        Kind::PauseServer,
        Kind::PauseAgent,
        Kind::IsolateLeader,
        Kind::IsolateFollower,
        Kind::CutAgents,
        Kind::ReplaceMember,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::KillServer => "kill-server",
            Kind::KillAgent => "kill-agent",
            Kind::PauseServer => "pause-server",
            Kind::PauseAgent => "pause-agent",
            Kind::IsolateLeader => "isolate-leader",
            Kind::IsolateFollower => "split-servers-2/1",
            Kind::CutAgents => "cut-agents",
            Kind::ReplaceMember => "replace-member",
        }
    }

    /// The kind named `name` (as [`Kind::name`] prints it).
    pub fn parse(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether the fault hits agents (its pick chooses among the agents).
    pub fn hits_agents(self) -> bool {
        matches!(self, Kind::KillAgent | Kind::PauseAgent | Kind::CutAgents)
    }

    /// The range of hold times, in milliseconds, at scale 1.
    fn hold_ms(self) -> (u64, u64) {
        match self {
            Kind::KillServer | Kind::PauseServer => (1_000, 5_000),
            Kind::KillAgent | Kind::PauseAgent => (500, 4_000),
            Kind::IsolateLeader | Kind::IsolateFollower => (2_000, 6_000),
            // Sometimes past the node timeout (5 s): the nodes go NotReady.
            Kind::CutAgents => (1_000, 8_000),
            Kind::ReplaceMember => (0, 0),
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One scheduled fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub kind: Kind,
    /// Picks the target(s) among the candidates when the fault runs
    /// (`pick % candidates`), since who leads is only known then.
    pub pick: u64,
    pub hold: Duration,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} pick={} hold={:.1}s",
            self.kind,
            self.pick % 1000,
            self.hold.as_secs_f64()
        )
    }
}

/// `count` faults from `seed` in rounds of every kind; hold times scaled by
/// `scale` (e.g. 0.6 for a short run).
pub fn schedule(seed: u64, count: usize, scale: f64) -> Vec<Fault> {
    schedule_of(&Kind::ALL, seed, count, scale)
}

/// [`schedule`] of the given `kinds` only (at least one).
pub fn schedule_of(kinds: &[Kind], seed: u64, count: usize, scale: f64) -> Vec<Fault> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(count);
    if kinds.is_empty() {
        return out;
    }
    while out.len() < count {
        let mut round = kinds.to_vec();
        // Fisher–Yates.
        for i in (1..round.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            round.swap(i, j);
        }
        for kind in round {
            if out.len() == count {
                break;
            }
            let (lo, hi) = kind.hold_ms();
            let ms = (rng.between(lo, hi) as f64 * scale) as u64;
            out.push(Fault {
                kind,
                pick: rng.next_u64() % 1_000_000,
                hold: Duration::from_millis(ms),
            });
        }
    }
    out
}

/// Aims the first fault of agents in `schedule` at the first of `agents`
/// agents (the fleet's Docker agents come first), so that every run with
/// a fault of agents checks the Docker node's containers through one, whatever
/// the seed: its pick becomes the multiple of `agents` just below it. Answers
/// whether there was such a fault.
pub fn aim_first_agent_fault(schedule: &mut [Fault], agents: u64) -> bool {
    match schedule.iter_mut().find(|f| f.kind.hits_agents()) {
        Some(f) if agents > 0 => {
            f.pick -= f.pick % agents;
            true
        }
        Some(_) => true,
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_fault_of_agents_hits_the_first_agent_and_no_other_changes() {
        for seed in 0..50 {
            let mut s = schedule(seed, 20, 1.0);
            let before = s.clone();
            assert!(aim_first_agent_fault(&mut s, 5));
            let first = s.iter().position(|f| f.kind.hits_agents()).unwrap();
            assert_eq!(s[first].pick % 5, 0, "seed {seed}: {}", s[first]);
            assert!(before[first].pick - s[first].pick < 5);
            for (i, (a, b)) in s.iter().zip(&before).enumerate() {
                if i != first {
                    assert_eq!(a, b, "seed {seed}: fault {i}");
                }
            }
        }
        let mut servers_only = schedule_of(&[Kind::KillServer], 1, 5, 1.0);
        assert!(!aim_first_agent_fault(&mut servers_only, 5));
    }

    #[test]
    fn a_seed_gives_the_same_schedule_and_every_kind_appears() {
        let a = schedule(42, 20, 1.0);
        assert_eq!(a, schedule(42, 20, 1.0));
        assert_ne!(a, schedule(43, 20, 1.0));
        assert_eq!(a.len(), 20);
        for k in Kind::ALL {
            assert!(a.iter().filter(|f| f.kind == k).count() >= 2, "{k}");
        }
        for f in &a {
            let (lo, hi) = f.kind.hold_ms();
            let ms = f.hold.as_millis() as u64;
            assert!(lo <= ms && ms <= hi, "{f}");
        }
    }
}
