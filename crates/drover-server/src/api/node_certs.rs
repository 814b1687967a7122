//! Which certificate speaks for a node: the serial of its current node
//! certificate, kept on the Node as the annotation [`CERT_ANNOTATION`].
//!
//! - A name belongs to the key that first joined as it: the Node keeps the
//!   SHA-256 of that public key as the annotation [`KEY_ANNOTATION`]. A join
//!   (node token) with that key rebinds the name to the new certificate
//!   (the node itself, back after its certificate expired or its data dir
//!   lost the certificate), Ready or not; a join with any other key is
//!   refused, however long the node has been away, until an admin frees
//!   the name by deleting the Node (`drover delete node NAME`). The node
//!   token alone never takes over a node.
//! - A Node bound before keys were recorded (no [`KEY_ANNOTATION`]) keeps
//!   the older rule once: a join takes it over only when it is not Ready.
//!   Its next join or renewal records the key.
//! - A renewal rebinds from the caller's current serial to the new one,
//!   for the same key.
//! - A session is allowed for the bound serial, or for another
//!   certificate of the key that owns the name ([`speaks_for`]: a cluster
//!   restored from a snapshot taken before the node's last renewal), which
//!   the session then binds; it ends when the binding changes or the Node
//!   is deleted: deleting a node revokes its certificates.

use super::{Objects, ATTEMPTS};
use crate::error::ApiError;
use drover_api::{Kind, Manifest, Node, ObjectMeta};

/// The annotation that holds the serial (hex) of a node's certificate.
pub const CERT_ANNOTATION: &str = "drover.io/node-cert-serial";

/// The annotation that holds the SHA-256 (hex) of the public key that owns
/// a node's name.
pub const KEY_ANNOTATION: &str = "drover.io/node-key";

/// The key (SHA-256 of the public key, hex) that owns a node's name, if
/// recorded.
pub fn bound_key(node: &Node) -> Option<&str> {
    node.metadata
        .annotations
        .get(KEY_ANNOTATION)
        .map(String::as_str)
        .filter(|s| !s.is_empty())
}

/// The refusal of a join or renewal as node `name` with a key other than
/// the one that owns the name.
pub fn taken(name: &str) -> ApiError {
    ApiError::Forbidden(format!(
        "node {name} belongs to the key that first joined as it, and this agent has another key: a node that is away keeps its name. Choose another --name (`drover sim`: --prefix); or, if the machine that held {name} is gone for good, `drover delete node {name}` frees the name"
    ))
}

/// The serial bound to a node, if any.
pub fn bound_serial(node: &Node) -> Option<&str> {
    node.metadata
        .annotations
        .get(CERT_ANNOTATION)
        .map(String::as_str)
        .filter(|s| !s.is_empty())
}

/// A node's certificate as a session or a renewal presents it.
#[derive(Debug, Clone)]
pub struct Cert {
    /// Its serial (hex).
    pub serial: String,
    /// The SHA-256 (hex) of its public key.
    pub key: String,
}

/// Whether `cert` speaks for `node`: it is the bound certificate, or
/// another certificate of the key that owns the name. The second covers a
/// cluster restored from a snapshot taken before the node renewed its
/// certificate (the Node records the older serial) and a node that comes
/// back on the certificate it held before a renewal whose answer it lost:
/// the CA certified that key for that name, and only the name's owner
/// holds it. Deleting the Node still revokes every certificate of the key
/// (no Node, nothing speaks for it).
pub fn speaks_for(node: &Node, cert: &Cert) -> bool {
    bound_serial(node) == Some(cert.serial.as_str()) || bound_key(node) == Some(cert.key.as_str())
}

/// The refusal of a node certificate that is no longer bound.
pub fn revoked(name: &str) -> ApiError {
    ApiError::Forbidden(format!(
        "the certificate of node {name} is revoked (the node was deleted, or joined again with another certificate); join again with the node token"
    ))
}

impl Objects {
    /// Binds certificate `serial`, of public key `key` (SHA-256, hex), to
    /// node `name`. `from`: the serial the caller holds now (a renewal), or
    /// `None` (a join with the node token).
    ///
    /// `described`: on a join, the Node as the agent describes it (its
    /// labels, taints, capacity, allocatable, system info): a Node the join
    /// creates is that one, whole, so that no controller ever plans on a
    /// Node without the labels and taints its agent registers with.
    pub async fn bind_node_cert(
        &self,
        name: &str,
        serial: &str,
        key: &str,
        from: Option<&str>,
        described: Option<&Node>,
    ) -> Result<(), ApiError> {
        for attempt in 0..ATTEMPTS {
            // The first read is this member's own state (a join of a new
            // name costs no ReadIndex round); the writes are
            // compare-and-swap, so a stale read costs a retry, which reads
            // linearizably. A refusal is only ever made on a linearizable
            // read.
            let read = if attempt == 0 {
                self.get_local(Kind::Node, "", name).await
            } else {
                self.get(Kind::Node, "", name).await
            };
            let existing = match read {
                Ok(Manifest::Node(n)) => Some(*n),
                Ok(_) => None,
                Err(ApiError::NotFound(_)) => None,
                Err(e) => return Err(e),
            };
            let r = match (existing, from) {
                (None, Some(_)) if attempt == 0 => continue,
                (None, Some(_)) => return Err(revoked(name)),
                (None, None) => {
                    let mut n = joined_node(name, described);
                    n.metadata
                        .annotations
                        .insert(CERT_ANNOTATION.into(), serial.into());
                    n.metadata
                        .annotations
                        .insert(KEY_ANNOTATION.into(), key.into());
                    self.create(Manifest::Node(Box::new(n))).await.map(|_| ())
                }
                (Some(mut n), from) => {
                    let current = bound_serial(&n).map(str::to_string);
                    let owner = bound_key(&n).map(str::to_string);
                    if owner.as_deref().is_some_and(|o| o != key) {
                        if attempt == 0 {
                            continue;
                        }
                        tracing::warn!(node = %name, "refused a {} as node {name} with a key other than the one that owns the name", if from.is_some() { "renewal" } else { "join" });
                        return Err(taken(name));
                    }
                    // A renewal from a certificate that is not the bound one
                    // is the owner's (its key was checked above) when the
                    // name has an owner: see `speaks_for`.
                    let stale = |old: &str| current.as_deref() != Some(old) && owner.is_none();
                    match from {
                        Some(old) if stale(old) && attempt == 0 => continue,
                        Some(old) if stale(old) => return Err(revoked(name)),
                        Some(_) => {}
                        // The owner itself joining again: its name is its own.
                        None if owner.is_some() => {}
                        None => {
                            if current.is_some() && n.is_ready() && attempt == 0 {
                                continue;
                            }
                            if current.is_some() && n.is_ready() {
                                return Err(ApiError::Conflict(format!(
                                    "node {name} is held by a Ready node with another certificate; choose another --name, or `drover delete node {name}` first if that machine is gone"
                                )));
                            }
                        }
                    }
                    if !registered(&n) {
                        // Made by a join whose agent never described it: it
                        // is whole from now on.
                        if let Some(d) = described {
                            let whole = joined_node(name, Some(d));
                            n.metadata.labels = whole.metadata.labels;
                            n.spec = whole.spec;
                            n.status = whole.status;
                        }
                    }
                    n.metadata
                        .annotations
                        .insert(CERT_ANNOTATION.into(), serial.into());
                    n.metadata
                        .annotations
                        .insert(KEY_ANNOTATION.into(), key.into());
                    self.update(Manifest::Node(Box::new(n))).await.map(|_| ())
                }
            };
            match r {
                Ok(()) => return Ok(()),
                Err(ApiError::Conflict(_) | ApiError::AlreadyExists(_)) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(ApiError::Conflict(format!(
            "node {name} kept changing while its certificate was bound; retry"
        )))
    }
}

/// Whether an agent ever described the Node (a join with its description,
/// or a session's hello): it has the system info agents report.
pub fn registered(node: &Node) -> bool {
    node.status.node_info != Default::default() || !node.status.capacity.is_empty()
}

/// The Node a join creates: the agent's description (without a status the
/// server has not seen: no conditions, the lifecycle controller sets
/// `Ready` from the heartbeats), or a bare Node for a description-less
/// join.
fn joined_node(name: &str, described: Option<&Node>) -> Node {
    let Some(d) = described else {
        return Node {
            metadata: ObjectMeta {
                name: name.to_string(),
                ..Default::default()
            },
            ..Default::default()
        };
    };
    let mut n = d.clone();
    n.metadata = ObjectMeta {
        name: name.to_string(),
        labels: d.metadata.labels.clone(),
        ..Default::default()
    };
    n.status.conditions.clear();
    n
}
