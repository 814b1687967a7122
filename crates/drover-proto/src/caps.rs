//! What each side of an agent session speaks (`Agent.Session`), negotiated
//! at its start: the agent's `Hello` and the server's `Welcome` carry the
//! sender's version and capabilities (`docs/upgrades.md`).
//!
//! A capability names one feature of the session protocol that both sides
//! must know for it to be used (a message kind, a field with a meaning
//! the other side must not ignore). A peer that sends no capabilities is a
//! release from before the negotiation, taken to speak exactly
//! [`BASELINE`]. A feature added later gets a new name here, is added to
//! [`SESSION`], and is used only with a peer that [`Peer::supports`] it.

use std::collections::BTreeSet;

/// The server answers heartbeats (`HeartbeatAck`).
pub const HEARTBEAT_ACK: &str = "heartbeat-ack";
/// The server sends the ConfigMaps and Secrets of the node's pods
/// (`PodConfig`) before the pods.
pub const POD_CONFIG: &str = "pod-config";
/// The agent reports its pods' events (`PodEvents`).
pub const POD_EVENTS: &str = "pod-events";
/// The agent reports its static pods (`StaticPods`).
pub const STATIC_PODS: &str = "static-pods";
/// `drover logs` / `drover exec` over the session (`LogRequest`,
/// `ExecRequest`, `StreamChunk`, `StreamEnd`, `StreamCancel`, `StreamCredit`).
pub const LOGS_EXEC: &str = "logs-exec";
/// Interactive exec: stdin and terminal sizes down the session
/// (`ExecInput`, `input_credit`).
pub const EXEC_INPUT: &str = "exec-input";

/// What a peer that sends no capabilities speaks: the release before the
/// negotiation (7f1d4bf) spoke all of these, on both sides.
pub const BASELINE: &[&str] = &[
    HEARTBEAT_ACK,
    POD_CONFIG,
    POD_EVENTS,
    STATIC_PODS,
    LOGS_EXEC,
    EXEC_INPUT,
];

/// What this build speaks, as an agent and as a server (each side sends
/// it in its first message).
pub const SESSION: &[&str] = BASELINE;

/// This build's capabilities as they go on the wire.
pub fn ours() -> Vec<String> {
    SESSION.iter().map(|c| c.to_string()).collect()
}

/// The other side of a session, as its first message described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Its version (`agent_version`, `server_version`); empty when it sent
    /// none (a server from before the negotiation).
    pub version: String,
    /// Whether it listed its capabilities (false: an older release, taken
    /// to speak [`BASELINE`]).
    pub announced: bool,
    capabilities: BTreeSet<String>,
}

impl Peer {
    /// The peer whose first message carried `version` and `capabilities`:
    /// an empty list stands for [`BASELINE`]; names this build does not
    /// know are kept (and never asked about).
    pub fn new(version: &str, capabilities: &[String]) -> Peer {
        let announced = !capabilities.is_empty();
        let capabilities = if announced {
            capabilities.iter().cloned().collect()
        } else {
            BASELINE.iter().map(|c| c.to_string()).collect()
        };
        Peer {
            version: version.to_string(),
            announced,
            capabilities,
        }
    }

    /// Whether the peer speaks `capability`.
    pub fn supports(&self, capability: &str) -> bool {
        self.capabilities.contains(capability)
    }

    /// Its capabilities, sorted.
    pub fn capabilities(&self) -> impl Iterator<Item = &str> {
        self.capabilities.iter().map(String::as_str)
    }

    /// What a log line says about it: `VERSION (capabilities …)` or
    /// `VERSION (no capabilities sent: the baseline)`.
    pub fn describe(&self) -> String {
        let v = if self.version.is_empty() {
            "unknown version"
        } else {
            self.version.as_str()
        };
        if self.announced {
            format!(
                "{v} (capabilities {})",
                self.capabilities().collect::<Vec<_>>().join(",")
            )
        } else {
            format!("{v} (no capabilities sent: the baseline)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_that_sends_none_speaks_the_baseline() {
        let p = Peer::new("0.1.0", &[]);
        assert!(!p.announced);
        for c in BASELINE {
            assert!(p.supports(c), "{c}");
        }
        assert!(!p.supports("something-newer"));
        assert_eq!(p.describe(), "0.1.0 (no capabilities sent: the baseline)");
        assert_eq!(
            Peer::new("", &[]).describe(),
            "unknown version (no capabilities sent: the baseline)"
        );
    }

    #[test]
    fn a_peer_that_lists_some_speaks_exactly_those() {
        let p = Peer::new("0.2.0", &["pod-config".into(), "later-feature".into()]);
        assert!(p.announced);
        assert!(p.supports(POD_CONFIG));
        assert!(p.supports("later-feature"), "unknown names are kept");
        assert!(!p.supports(HEARTBEAT_ACK), "not listed, not assumed");
        assert_eq!(
            p.capabilities().collect::<Vec<_>>(),
            ["later-feature", "pod-config"]
        );
        assert_eq!(
            p.describe(),
            "0.2.0 (capabilities later-feature,pod-config)"
        );
    }

    #[test]
    fn this_build_speaks_at_least_the_baseline() {
        let me = Peer::new("x", &ours());
        assert!(me.announced);
        for c in BASELINE {
            assert!(me.supports(c), "{c}: a capability is never dropped");
        }
        let mut names = ours();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), SESSION.len(), "no name twice");
    }
}
