//! Carries out a client verb ([`ClientCmd`]): arguments to options, the
//! command, and its exit status. The binary calls [`run`] with a way to
//! make the client (so that a bad file argument is reported before the
//! connection is), and [`is_closed_pipe`] at its edge.

use crate::args::{ClientCmd, RolloutCmd, SetCmd};
use crate::delete::{self, DeleteOptions};
use crate::kubectl::{self, GetOptions};
use crate::printers::Output;
use crate::{rollout, rollout_deploy, Client};
use anyhow::Result;
use drover_api::Kind;
use std::future::Future;
use std::io::Write;

/// Runs `cmd`; answers the process's exit status (an exec's is its
/// command's). `stop` resolves on Ctrl-C/SIGTERM (`logs -f` ends then).
pub async fn run(
    cmd: ClientCmd,
    client: impl FnOnce() -> Result<Client>,
    stop: impl Future<Output = ()>,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<i32> {
    match cmd {
        ClientCmd::Create { what } => crate::create::create(&client()?, &what, out).await?,
        ClientCmd::Apply(a) => {
            let sources = kubectl::read_sources(&a.files, &mut std::io::stdin())?;
            let c = client()?;
            kubectl::apply(
                &c,
                &sources,
                a.namespace.as_deref(),
                a.dry_run,
                a.validate,
                out,
                err,
            )
            .await?
        }
        ClientCmd::Get(a) => {
            let output = match &a.output {
                Some(o) => Some(Output::parse(o).map_err(|e| anyhow::anyhow!("{e}"))?),
                None => None,
            };
            let c = client()?;
            let o = GetOptions {
                kind: a.kind,
                names: a.names,
                output,
                selector: a.selector,
                field_selector: a.field_selector,
                namespace: a.ns.namespace,
                all_namespaces: a.ns.all_namespaces,
                watch: a.watch,
                show_labels: a.show_labels,
                label_columns: a.label_columns,
            };
            kubectl::get(&c, &o, out, err).await?
        }
        ClientCmd::Describe {
            kind,
            names,
            namespace,
        } => kubectl::describe(&client()?, &kind, &names, namespace.as_deref(), out).await?,
        ClientCmd::Delete(a) => {
            let sources = if a.files.is_empty() {
                Vec::new()
            } else {
                kubectl::read_sources(&a.files, &mut std::io::stdin())?
            };
            let c = client()?;
            let o = DeleteOptions {
                kind: a.kind,
                names: a.names,
                selector: a.selector,
                all: a.all,
                namespace: a.namespace,
                sources,
            };
            delete::delete(&c, &o, out).await?
        }
        ClientCmd::Label(a) => {
            let c = client()?;
            let ns = a.namespace.as_deref();
            let (kind, name, changes) = crate::annotate::target_args(&a.kind, &a.name, &a.changes);
            kubectl::label(&c, &kind, &name, &changes, a.overwrite, ns, out).await?
        }
        ClientCmd::Annotate(a) => {
            let c = client()?;
            let ns = a.namespace.as_deref();
            crate::annotate::annotate(&c, &a.kind, &a.name, &a.changes, a.overwrite, ns, out)
                .await?
        }
        ClientCmd::Patch(a) => {
            let text = match (&a.patch, &a.patch_file) {
                (Some(p), _) => p.clone(),
                (None, Some(f)) => std::fs::read_to_string(f).map_err(|e| {
                    anyhow::anyhow!("--patch-file {}: cannot read it: {e}", f.display())
                })?,
                (None, None) => anyhow::bail!("give the patch with -p PATCH or --patch-file FILE"),
            };
            let c = client()?;
            let (ns, name) = (a.namespace.as_deref(), a.name.as_deref());
            crate::patch::patch(&c, &a.kind, name, &text, a.patch_type, ns, out).await?
        }
        ClientCmd::Edit(a) => {
            let c = client()?;
            let (ns, name) = (a.namespace.as_deref(), a.name.as_deref());
            crate::editor::edit(&c, &a.kind, name, ns, a.output, out, err).await?
        }
        ClientCmd::Drain(a) => {
            let c = client()?;
            let o = crate::drain::DrainOptions {
                ignore_daemonsets: a.ignore_daemonsets,
                delete_emptydir_data: a.delete_emptydir_data,
                force: a.force,
                timeout: Some(a.timeout).filter(|t| !t.is_zero()),
            };
            crate::drain::drain(&c, &a.nodes, &o, out, err).await?
        }
        ClientCmd::Taint {
            kind,
            name,
            taints,
            overwrite,
        } => kubectl::taint(&client()?, &kind, &name, &taints, overwrite, out).await?,
        ClientCmd::Cordon { nodes } => kubectl::cordon(&client()?, &nodes, true, out).await?,
        ClientCmd::Uncordon { nodes } => kubectl::cordon(&client()?, &nodes, false, out).await?,
        ClientCmd::Events { ns, watch } => {
            let c = client()?;
            let (n, all) = (ns.namespace.as_deref(), ns.all_namespaces);
            crate::events::events(&c, n, all, watch, out, err).await?
        }
        ClientCmd::Logs(a) => {
            let c = client()?;
            let o = crate::logs::LogsOptions {
                target: a.target,
                container: a.container,
                namespace: a.namespace,
                follow: a.follow,
                tail: a.tail,
                since: a.since,
                timestamps: a.timestamps,
                previous: a.previous,
            };
            crate::logs::logs(&c, &o, out, err, stop).await?
        }
        ClientCmd::Exec(a) => {
            let c = client()?;
            let code = crate::exec::exec_cmd(&c, a, out, err).await?;
            out.flush()?;
            return Ok(code);
        }
        ClientCmd::Rollout { cmd } => rollout_cmd(&client()?, cmd, out).await?,
        ClientCmd::Scale(a) => {
            let (kind, name) = rollout::kind_and_name(&a.target, a.name.as_deref())?;
            let ns = a.namespace.unwrap_or_else(|| "default".into());
            crate::scale::scale(&client()?, kind, &name, &ns, a.replicas, out).await?
        }
        ClientCmd::Set {
            cmd:
                SetCmd::Image {
                    target,
                    images,
                    namespace,
                },
        } => {
            let (kind, name) = rollout::kind_and_name(&target, None)?;
            let ns = namespace.unwrap_or_else(|| "default".into());
            crate::scale::set_image(&client()?, kind, &name, &ns, &images, out).await?
        }
    }
    out.flush()?;
    Ok(0)
}

async fn rollout_cmd(c: &Client, cmd: RolloutCmd, out: &mut impl Write) -> Result<()> {
    let ns = |n: &Option<String>| n.clone().unwrap_or_else(|| "default".into());
    match cmd {
        RolloutCmd::Status {
            target,
            name,
            namespace,
            watch,
            timeout,
        } => {
            let (kind, name) = rollout::rollout_target(&target, name.as_deref())?;
            let timeout = timeout.filter(|t| !t.is_zero());
            if kind == Kind::Deployment {
                return rollout_deploy::status(c, &name, &ns(&namespace), watch, timeout, out)
                    .await;
            }
            let live = std::io::IsTerminal::is_terminal(&std::io::stdout());
            rollout::status(c, &name, &ns(&namespace), watch, timeout, live, out).await
        }
        RolloutCmd::History {
            target,
            name,
            namespace,
            revision,
        } => match rollout::rollout_target(&target, name.as_deref())? {
            (Kind::Deployment, name) => {
                rollout_deploy::history(c, &name, &ns(&namespace), revision, out).await
            }
            (_, name) => rollout::history_cmd(c, &name, &ns(&namespace), revision, out).await,
        },
        RolloutCmd::Undo {
            target,
            name,
            namespace,
            to_revision,
        } => match rollout::rollout_target(&target, name.as_deref())? {
            (Kind::Deployment, name) => {
                rollout_deploy::undo(c, &name, &ns(&namespace), to_revision, out).await
            }
            (_, name) => rollout::undo(c, &name, &ns(&namespace), to_revision, out).await,
        },
        RolloutCmd::Restart {
            target,
            name,
            namespace,
        } => match rollout::rollout_target(&target, name.as_deref())? {
            (Kind::Deployment, name) => {
                rollout_deploy::restart(c, &name, &ns(&namespace), out).await
            }
            (_, name) => rollout::restart(c, &name, &ns(&namespace), out).await,
        },
        RolloutCmd::Pause {
            target,
            name,
            namespace,
        } => pause(c, &target, name.as_deref(), &ns(&namespace), true, out).await,
        RolloutCmd::Resume {
            target,
            name,
            namespace,
        } => pause(c, &target, name.as_deref(), &ns(&namespace), false, out).await,
    }
}

/// `rollout pause|resume`: for Deployments (a DaemonSet cannot be paused,
/// as in kubectl).
async fn pause(
    c: &Client,
    target: &str,
    name: Option<&str>,
    ns: &str,
    paused: bool,
    out: &mut impl Write,
) -> Result<()> {
    match rollout::rollout_target(target, name)? {
        (Kind::Deployment, name) => rollout_deploy::pause(c, &name, ns, paused, out).await,
        (kind, name) => anyhow::bail!(
            "{}.apps {name:?} {}: drover pauses deployments only",
            kind.plural(),
            if paused {
                "pausing is not supported"
            } else {
                "resuming is not supported"
            }
        ),
    }
}

/// Whether `e` is a write to a pipe whose reader went away (`drover get
/// pods | head -1`): the command then ends quietly with status 0, as a
/// Unix filter does.
pub fn is_closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_is_told_from_other_errors() {
        let pipe = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert!(is_closed_pipe(&pipe));
        assert!(is_closed_pipe(&pipe.context("writing the table")));
        let other = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::NotFound));
        assert!(!is_closed_pipe(&other));
        assert!(!is_closed_pipe(&anyhow::anyhow!("Broken pipe")));
    }
}
