//! The admin's actions from the dashboard (`POST /ui/action`, an admin
//! session and its CSRF token; [`super`] checks both before this runs):
//! cordon and uncordon a node, drain it, restart a DaemonSet's or a
//! Deployment's rollout (the form's `kind`) or undo it, delete a pod. Each is a compare-and-swap write through the
//! object API, as the kubectl verb of the same name does it.

use super::{refuse, Signed};
use crate::api::{codec, Objects};
use crate::cache::Informer;
use crate::ctx::Ctx;
use crate::error::ApiError;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use drover_api::{Kind, Manifest};
use drover_controller::daemon::rollout;
use drover_controller::deployment::view;
use std::collections::HashMap;
use std::sync::Arc;

/// A read-modify-write is tried this many times against conflicts.
const ATTEMPTS: usize = 5;

/// What an action did, for the page that asked.
#[derive(Debug, Clone)]
struct Done {
    message: String,
    back: String,
}

/// What an action decided about the object it read.
enum Edit {
    /// Write this (compare-and-swap at the version read), then answer.
    Write(Manifest, Done),
    /// Nothing to write: answer this.
    Answer(Done),
}

/// Reads `kind` `ns`/`name`, lets `edit` decide, and writes what it made
/// with compare-and-swap: read and decided again on a conflict, at most
/// [`ATTEMPTS`] times (then the conflict is the answer).
async fn read_modify_write<F, Fut>(
    objects: &Objects,
    kind: Kind,
    ns: &str,
    name: &str,
    mut edit: F,
) -> Result<Done, ApiError>
where
    F: FnMut(Manifest) -> Fut,
    Fut: std::future::Future<Output = Result<Edit, ApiError>>,
{
    for _ in 0..ATTEMPTS {
        match edit(objects.get(kind, ns, name).await?).await? {
            Edit::Answer(done) => return Ok(done),
            Edit::Write(m, done) => match objects.update(m).await {
                Err(ApiError::Conflict(_)) => continue,
                r => {
                    r?;
                    return Ok(done);
                }
            },
        }
    }
    Err(ApiError::conflict(kind, name))
}

fn field<'a>(form: &'a HashMap<String, String>, name: &str) -> Result<&'a str, ApiError> {
    form.get(name)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| {
            ApiError::BadRequest(format!(
                "the action's form lacks the field {name}: send it from the dashboard's pages"
            ))
        })
}

/// Carries out the action of `form` for an admin session.
pub async fn act(
    ctx: &Arc<Ctx>,
    _informer: &Informer,
    signed: &Signed,
    form: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Response {
    let action = form.get("action").map(String::as_str).unwrap_or("");
    if !signed.is_admin() {
        return refuse(
            StatusCode::FORBIDDEN,
            "Forbidden",
            &format!(
                "viewer {} may not {action}: only an admin may change the cluster (sign in with the admin token or an admin certificate)",
                signed.session.who
            ),
        );
    }
    let objects = Objects::new(ctx.clone());
    let r = match action {
        "cordon" | "uncordon" => cordon(&objects, form, action == "cordon").await,
        "drain" => drain(&objects, form).await,
        "restart" if is_deployment(form) => deploy_restart(&objects, form).await,
        "undo" if is_deployment(form) => deploy_undo(&objects, form).await,
        "restart" => restart(&objects, form).await,
        "undo" => undo(&objects, form).await,
        "delete-pod" => delete_pod(&objects, form).await,
        other => Err(ApiError::BadRequest(format!(
            "unknown action {other:?}: the dashboard's actions are cordon, uncordon, drain, restart, undo and delete-pod"
        ))),
    };
    tracing::info!(
        "dashboard: {} ({}) {action}: {}",
        signed.session.who,
        signed.session.role.as_str(),
        match &r {
            Ok(d) => d.message.clone(),
            Err(e) => e.to_string(),
        }
    );
    let wants_json = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/json"));
    match r {
        Ok(done) if wants_json => (
            StatusCode::OK,
            axum::Json(serde_json::json!({ "message": done.message, "back": done.back })),
        )
            .into_response(),
        Ok(done) => {
            let back = format!("{}?done={}", done.back, super::html::url(&done.message));
            (StatusCode::SEE_OTHER, [(header::LOCATION, back)]).into_response()
        }
        Err(e) => {
            let code = crate::kapi::status::Refusal::from(e.clone()).code;
            refuse(code, e.reason().as_str(), &e.to_string())
        }
    }
}

async fn cordon(
    objects: &Objects,
    form: &HashMap<String, String>,
    on: bool,
) -> Result<Done, ApiError> {
    let name = field(form, "node")?;
    let done = Done {
        message: format!("node/{name} {}", if on { "cordoned" } else { "uncordoned" }),
        back: format!("/ui/nodes/{}", super::html::url(name)),
    };
    read_modify_write(objects, Kind::Node, "", name, |m| {
        let done = done.clone();
        async move {
            let Manifest::Node(mut n) = m else {
                return Err(ApiError::not_found(Kind::Node, name));
            };
            if n.spec.unschedulable == on {
                return Ok(Edit::Answer(done));
            }
            n.spec.unschedulable = on;
            Ok(Edit::Write(Manifest::Node(n), done))
        }
    })
    .await
}

/// kubectl's `drain --ignore-daemonsets`: cordon, then delete the pods
/// a controller other than a DaemonSet manages; refused (after the
/// cordon, as kubectl) when a pod declares no controller.
async fn drain(objects: &Objects, form: &HashMap<String, String>) -> Result<Done, ApiError> {
    let name = field(form, "node")?;
    cordon(objects, form, true).await?;
    let (pods, _) = objects.list(Kind::Pod, None, None).await?;
    let mut bare = Vec::new();
    let mut evict = Vec::new();
    for m in pods {
        let Manifest::Pod(p) = m else { continue };
        if p.spec.node_name != name || p.is_mirror() {
            continue;
        }
        match p.metadata.controller_ref() {
            Some(o) if o.kind == "DaemonSet" => {}
            Some(_) => evict.push(p),
            None => bare.push(format!("{}/{}", p.metadata.namespace, p.metadata.name)),
        }
    }
    if !bare.is_empty() {
        return Err(ApiError::BadRequest(format!(
            "node/{name} cordoned, but cannot delete Pods that declare no controller: {}; delete them first, or run drover drain {name} --force",
            bare.join(", ")
        )));
    }
    let n = evict.len();
    for p in evict {
        match objects.delete_read(Kind::Pod, &p.metadata).await {
            Ok(_) | Err(ApiError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Done {
        message: format!("node/{name} drained ({n} pods deleted; DaemonSet pods ignored)"),
        back: format!("/ui/nodes/{}", super::html::url(name)),
    })
}

/// Whether a restart or undo is a Deployment's (the form's `kind`), not
/// a DaemonSet's.
fn is_deployment(form: &HashMap<String, String>) -> bool {
    form.get("kind").is_some_and(|k| k == "deployment")
}

fn deploy_back(ns: &str, name: &str) -> String {
    format!(
        "/ui/deployments/{}/{}",
        super::html::url(ns),
        super::html::url(name)
    )
}

/// A Deployment's `rollout restart`, as `drover rollout restart
/// deployment/NAME` writes it (refused while paused, as kubectl).
async fn deploy_restart(
    objects: &Objects,
    form: &HashMap<String, String>,
) -> Result<Done, ApiError> {
    let (ns, name) = (field(form, "namespace")?, field(form, "name")?);
    read_modify_write(objects, Kind::Deployment, ns, name, |m| async move {
        let Manifest::Deployment(mut d) = m else {
            return Err(ApiError::not_found(Kind::Deployment, name));
        };
        if d.spec.paused == Some(true) {
            return Err(ApiError::BadRequest(format!(
                "can't restart paused deployment {ns}/{name}: resume it first (drover rollout resume deployment/{name})"
            )));
        }
        d.spec.template.metadata.annotations.insert(
            rollout::RESTARTED_AT_ANNOTATION.into(),
            codec::now_rfc3339(),
        );
        let done = Done {
            message: format!("deployment.apps/{name} restarted"),
            back: deploy_back(ns, name),
        };
        Ok(Edit::Write(Manifest::Deployment(d), done))
    })
    .await
}

/// A Deployment's `rollout undo` to the revision before the newest, as
/// `drover rollout undo deployment/NAME` does it (the same
/// [`view::undo_target`] and [`view::roll_back`]).
async fn deploy_undo(objects: &Objects, form: &HashMap<String, String>) -> Result<Done, ApiError> {
    let (ns, name) = (field(form, "namespace")?, field(form, "name")?);
    read_modify_write(objects, Kind::Deployment, ns, name, |m| async move {
        let Manifest::Deployment(mut d) = m else {
            return Err(ApiError::not_found(Kind::Deployment, name));
        };
        if d.spec.paused == Some(true) {
            return Err(ApiError::BadRequest(format!(
                "you cannot rollback a paused deployment ({ns}/{name}); resume it first with 'drover rollout resume deployment/{name}' and try again"
            )));
        }
        let (listed, _) = objects.list(Kind::ReplicaSet, Some(ns), None).await?;
        let all: Vec<drover_api::ReplicaSet> = listed
            .into_iter()
            .filter_map(|m| match m {
                Manifest::ReplicaSet(rs) => Some(*rs),
                _ => None,
            })
            .collect();
        let mine: Vec<drover_api::ReplicaSet> =
            view::owned(&d, &all).into_iter().cloned().collect();
        let target = view::undo_target(&d, &mine, 0).map_err(ApiError::BadRequest)?;
        let rev = view::revision(target).unwrap_or(0);
        if view::equal_ignoring_hash(&target.spec.template, &d.spec.template) {
            return Ok(Edit::Answer(Done {
                message: format!(
                    "deployment.apps/{name} skipped rollback (current template already matches revision {rev})"
                ),
                back: deploy_back(ns, name),
            }));
        }
        view::roll_back(&mut d, target);
        let done = Done {
            message: format!("deployment.apps/{name} rolled back to revision {rev}"),
            back: deploy_back(ns, name),
        };
        Ok(Edit::Write(Manifest::Deployment(d), done))
    })
    .await
}

fn ds_back(ns: &str, name: &str) -> String {
    format!(
        "/ui/daemonsets/{}/{}",
        super::html::url(ns),
        super::html::url(name)
    )
}

/// `rollout restart`: the template's `kubectl.kubernetes.io/restartedAt`
/// annotation set to now, as kubectl writes it.
async fn restart(objects: &Objects, form: &HashMap<String, String>) -> Result<Done, ApiError> {
    let (ns, name) = (field(form, "namespace")?, field(form, "name")?);
    read_modify_write(objects, Kind::DaemonSet, ns, name, |m| async move {
        let Manifest::DaemonSet(mut ds) = m else {
            return Err(ApiError::not_found(Kind::DaemonSet, name));
        };
        ds.spec.template.metadata.annotations.insert(
            rollout::RESTARTED_AT_ANNOTATION.into(),
            codec::now_rfc3339(),
        );
        let done = Done {
            message: format!("daemonset.apps/{name} restarted"),
            back: ds_back(ns, name),
        };
        Ok(Edit::Write(Manifest::DaemonSet(ds), done))
    })
    .await
}

/// `rollout undo`: the template of the newest revision other than the
/// current one written back.
async fn undo(objects: &Objects, form: &HashMap<String, String>) -> Result<Done, ApiError> {
    let (ns, name) = (field(form, "namespace")?, field(form, "name")?);
    read_modify_write(objects, Kind::DaemonSet, ns, name, |m| async move {
        let Manifest::DaemonSet(mut ds) = m else {
            return Err(ApiError::not_found(Kind::DaemonSet, name));
        };
        let hash = super::grid::current_hash(&ds);
        let (listed, _) = objects
            .list(Kind::ControllerRevision, Some(ns), None)
            .await?;
        let target = listed
            .iter()
            .filter_map(|m| match m {
                Manifest::ControllerRevision(r) => Some(&**r),
                _ => None,
            })
            .filter(|r| {
                r.metadata
                    .controller_ref()
                    .is_some_and(|o| o.uid == ds.metadata.uid)
                    && rollout::revision_hash(&ds, r) != hash
            })
            .max_by_key(|r| r.revision);
        let Some(target) = target else {
            return Err(ApiError::BadRequest(format!(
                "daemonset.apps/{name} has no previous revision to roll back to"
            )));
        };
        let Some(template) = rollout::revision_template(target) else {
            return Err(ApiError::BadRequest(format!(
                "controllerrevision {} holds no pod template",
                target.metadata.name
            )));
        };
        let revision = target.revision;
        ds.spec.template = template;
        let done = Done {
            message: format!("daemonset.apps/{name} rolled back to revision {revision}"),
            back: ds_back(ns, name),
        };
        Ok(Edit::Write(Manifest::DaemonSet(ds), done))
    })
    .await
}

async fn delete_pod(objects: &Objects, form: &HashMap<String, String>) -> Result<Done, ApiError> {
    let (ns, name) = (field(form, "namespace")?, field(form, "name")?);
    objects.delete(Kind::Pod, ns, name).await?;
    Ok(Done {
        message: format!("pod \"{name}\" deleted"),
        back: "/ui/workloads".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::pages::params;
    use super::*;

    #[test]
    fn a_missing_field_is_named() {
        let form = params("action=cordon");
        let e = field(&form, "node").unwrap_err();
        assert!(e.to_string().contains("field node"), "{e}");
        let form = params("node=");
        assert!(field(&form, "node").is_err());
    }
}
