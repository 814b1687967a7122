//! The command-line arguments of the client verbs (`get`, `apply`, `drain`,
//! `exec`…), as clap parses them. The binary flattens [`ClientCmd`] into
//! its own subcommands; [`crate::run`] carries each one out.

use crate::create::CreateCmd;
use crate::kubectl::DryRun;
use clap::{Args, Subcommand};
use std::time::Duration;

/// The verbs that talk to a cluster as a client.
#[derive(Subcommand)]
pub enum ClientCmd {
    /// Create a ConfigMap or a Secret from literals and files.
    Create {
        #[command(subcommand)]
        what: CreateCmd,
    },
    /// Create or update objects from manifests (YAML or JSON), all or nothing.
    Apply(ApplyArgs),
    /// List objects, or show some by name: ds, deploy, rs, pods, nodes, events, cm, secrets, ns, sa, pc…
    Get(GetArgs),
    /// Show an object in detail, with its events (a DaemonSet also says why nodes have no pod).
    Describe {
        /// ds, deploy, rs, pod, node, cm, secret, ns or sa.
        kind: String,
        /// Names (every object of the kind when none).
        names: Vec<String>,
        /// The namespace [default: default].
        #[arg(short, long)]
        namespace: Option<String>,
    },
    /// Delete objects by name, by label selector, or as listed in manifests.
    Delete(DeleteArgs),
    /// Set (k=v) or remove (k-) labels of an object.
    Label(LabelArgs),
    /// Set (k=v) or remove (k-) annotations of an object.
    Annotate(LabelArgs),
    /// Change fields of an object with a patch (strategic merge, JSON merge or JSON patch).
    Patch(PatchArgs),
    /// Edit an object in $KUBE_EDITOR or $EDITOR (vi) and write it back.
    Edit(EditArgs),
    /// Set (k=v:Effect, k:Effect) or remove (k:Effect-, k-) taints of a node.
    Taint {
        /// node.
        kind: String,
        /// The node's name.
        name: String,
        /// k=v:Effect or k:Effect to set, k:Effect- or k- to remove.
        #[arg(required = true)]
        taints: Vec<String>,
        /// Allow replacing a taint with the same key and effect.
        #[arg(long)]
        overwrite: bool,
    },
    /// Mark nodes unschedulable (daemon pods still run there).
    Cordon {
        /// The nodes to cordon.
        #[arg(required = true)]
        nodes: Vec<String>,
    },
    /// Mark nodes schedulable again.
    Uncordon {
        /// The nodes to uncordon.
        #[arg(required = true)]
        nodes: Vec<String>,
    },
    /// Cordon nodes and delete their pods (not daemon or static pods), then wait until they are gone.
    Drain(DrainArgs),
    /// Events, oldest first.
    Events {
        #[command(flatten)]
        ns: Namespaces,
        /// After listing, print each new or repeated event as it happens.
        #[arg(short, long)]
        watch: bool,
    },
    /// Print the log of a container (carried over the node agent's own connection).
    Logs(LogsArgs),
    /// Run a command in a container and exit with its code: drover exec POD [-c C] [-i] [-t] -- CMD [ARGS…].
    Exec(ExecArgs),
    /// Manage the rollout of a DaemonSet or a Deployment: status, history, undo, restart, pause, resume.
    Rollout {
        #[command(subcommand)]
        cmd: RolloutCmd,
    },
    /// Set the replicas of a Deployment or a ReplicaSet: drover scale deploy/NAME --replicas N.
    Scale(ScaleArgs),
    /// Change a field of objects; `set image` replaces container images.
    Set {
        #[command(subcommand)]
        cmd: SetCmd,
    },
}

/// `drover scale`.
#[derive(Args)]
pub struct ScaleArgs {
    /// deploy/NAME or rs/NAME (or `deploy NAME`).
    pub target: String,
    /// The name, when TARGET is a kind.
    pub name: Option<String>,
    /// The number of replicas wanted.
    #[arg(long, required = true)]
    pub replicas: i32,
    /// The namespace [default: default].
    #[arg(short, long)]
    pub namespace: Option<String>,
}

/// `drover set …`.
#[derive(Subcommand)]
pub enum SetCmd {
    /// Replace container images: drover set image deployment/NAME CONTAINER=IMAGE… (`*=IMAGE`: every container).
    Image {
        /// deployment/NAME, rs/NAME or ds/NAME.
        target: String,
        /// CONTAINER=IMAGE, one or more.
        #[arg(required = true)]
        images: Vec<String>,
        /// The namespace [default: default].
        #[arg(short, long)]
        namespace: Option<String>,
    },
}

/// `drover apply`.
#[derive(Args)]
pub struct ApplyArgs {
    /// A manifest file, a directory (its *.yaml, *.yml, *.json) or - for stdin; repeatable.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<String>,
    /// Validate and show what would happen, write nothing.
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "client", require_equals = true)]
    pub dry_run: Option<DryRun>,
    /// Namespace for objects that name none (an object naming another is refused).
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// Fields that no Kubernetes object has (typos): strict refuses the
    /// objects, warn applies them with a warning, ignore applies them
    /// silently (kubectl's --validate; true = strict, false = ignore).
    #[arg(long, value_name = "MODE", default_value = "strict", num_args = 0..=1, default_missing_value = "strict", require_equals = true, value_parser = parse_validate)]
    pub validate: drover_api::FieldValidation,
}

/// `--validate`'s values, as kubectl takes them.
fn parse_validate(s: &str) -> Result<drover_api::FieldValidation, String> {
    drover_api::FieldValidation::parse(s)
        .ok_or_else(|| format!("{s:?}: use strict, warn or ignore (or true/false)"))
}

/// `drover get`.
#[derive(Args)]
pub struct GetArgs {
    /// ds|daemonsets, deploy|deployments, rs|replicasets, po|pods, no|nodes, ev|events, controllerrevisions,
    /// cm|configmaps, secrets, ns|namespaces, sa|serviceaccounts, pc|priorityclasses.
    pub kind: String,
    /// Names (every object of the kind when none).
    pub names: Vec<String>,
    /// wide, json, yaml, name, jsonpath=TEMPLATE, jsonpath-as-json=TEMPLATE,
    /// custom-columns=HEADER:.field.path,…
    #[arg(short, long)]
    pub output: Option<String>,
    /// Label selector, e.g. app=web,tier!=db or 'env in (a,b)'.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Field selector, e.g. involvedObject.name=web-abc,type=Warning (events), spec.nodeName=n1 (pods).
    #[arg(long)]
    pub field_selector: Option<String>,
    #[command(flatten)]
    pub ns: Namespaces,
    /// After listing, print one line per change.
    #[arg(short, long)]
    pub watch: bool,
    /// Add a LABELS column (every label, k=v,…) to the table.
    #[arg(long)]
    pub show_labels: bool,
    /// Add a column per label key (its value), e.g. -L app,tier; repeatable.
    #[arg(short = 'L', long = "label-columns", value_delimiter = ',')]
    pub label_columns: Vec<String>,
}

/// `drover delete`.
#[derive(Args)]
pub struct DeleteArgs {
    /// ds, pod or node (not with -f).
    pub kind: Option<String>,
    /// Names of the objects to delete.
    pub names: Vec<String>,
    /// Label selector, e.g. app=web,tier!=db: delete the objects it selects.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Every object of the kind in the namespace.
    #[arg(long)]
    pub all: bool,
    /// Delete the objects these manifests describe.
    #[arg(short = 'f', long = "filename")]
    pub files: Vec<String>,
    /// The namespace [default: default].
    #[arg(short, long)]
    pub namespace: Option<String>,
}

/// `drover label` and `drover annotate`.
#[derive(Args)]
pub struct LabelArgs {
    /// node, ds, pod… (or KIND/NAME).
    pub kind: String,
    pub name: String,
    /// k=v to set, k- to remove.
    pub changes: Vec<String>,
    /// Allow changing the value of an existing key.
    #[arg(long)]
    pub overwrite: bool,
    /// The namespace [default: default].
    #[arg(short, long)]
    pub namespace: Option<String>,
}

/// `drover patch`.
#[derive(Args)]
pub struct PatchArgs {
    /// The kind (or KIND/NAME).
    pub kind: String,
    pub name: Option<String>,
    /// The patch, JSON or YAML, e.g. '{"spec":{"unschedulable":true}}'.
    #[arg(
        short = 'p',
        long,
        required_unless_present = "patch_file",
        conflicts_with = "patch_file"
    )]
    pub patch: Option<String>,
    /// Read the patch from this file.
    #[arg(long)]
    pub patch_file: Option<std::path::PathBuf>,
    /// strategic (lists merged by their keys), merge (RFC 7386) or json (RFC 6902).
    #[arg(long = "type", value_enum, default_value = "strategic")]
    pub patch_type: crate::patch::PatchType,
    /// The namespace [default: default].
    #[arg(short, long)]
    pub namespace: Option<String>,
}

/// `drover edit`.
#[derive(Args)]
pub struct EditArgs {
    /// The kind (or KIND/NAME).
    pub kind: String,
    pub name: Option<String>,
    /// The namespace [default: default].
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// The format to edit in.
    #[arg(short, long, value_enum, default_value = "yaml")]
    pub output: crate::editor::EditFormat,
}

/// `drover drain`.
#[derive(Args)]
pub struct DrainArgs {
    /// The nodes to drain.
    #[arg(required = true)]
    pub nodes: Vec<String>,
    /// Leave the pods of DaemonSets running (drain refuses without it when there are some).
    #[arg(long)]
    pub ignore_daemonsets: bool,
    /// Delete pods with emptyDir volumes (their data is lost).
    #[arg(long)]
    pub delete_emptydir_data: bool,
    /// Delete pods that no controller owns (they are not recreated).
    #[arg(long)]
    pub force: bool,
    /// Give up waiting for the pods to go after this long (0: wait as long as it takes).
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

/// `drover logs`.
#[derive(Args)]
pub struct LogsArgs {
    /// POD, pod/POD, or ds|deploy|rs/NAME (its first pod, named on stderr).
    pub target: String,
    /// The container; needed when the pod has several.
    #[arg(short, long)]
    pub container: Option<String>,
    /// Keep printing new output until the container exits (Ctrl-C ends it).
    #[arg(short, long)]
    pub follow: bool,
    /// Only the last N lines (-1: all).
    #[arg(long, allow_negative_numbers = true)]
    pub tail: Option<i64>,
    /// Only output newer than this, e.g. 30s, 5m, 2h.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub since: Option<Duration>,
    /// Prefix each line with its time (RFC 3339).
    #[arg(long)]
    pub timestamps: bool,
    /// The previous, terminated instance of the container (before its last restart).
    #[arg(short, long)]
    pub previous: bool,
    /// The namespace [default: default].
    #[arg(short, long)]
    pub namespace: Option<String>,
}

/// `drover exec`.
#[derive(Args)]
pub struct ExecArgs {
    /// POD, pod/POD, or ds|deploy|rs/NAME (its first pod, named on stderr).
    pub target: String,
    /// The container [default: the pod's first].
    #[arg(short, long)]
    pub container: Option<String>,
    /// The namespace [default: default].
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// The command is killed after this long.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// Pass stdin to the command (its end closes the command's stdin).
    #[arg(short = 'i', long)]
    pub stdin: bool,
    /// Allocate a terminal for the command (with -i: this terminal, in raw mode, is its).
    #[arg(short = 't', long)]
    pub tty: bool,
    /// The command and its arguments, after --.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// `-n NS` or `-A`.
#[derive(Args)]
pub struct Namespaces {
    /// The namespace [default: default].
    #[arg(short, long, conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,
    /// Every namespace.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
}

/// `drover rollout …` (kubectl's, for DaemonSets and Deployments).
#[derive(Subcommand)]
pub enum RolloutCmd {
    /// Wait until the rollout is done (updated = available = desired).
    Status {
        /// ds/NAME or deployment/NAME (or `ds NAME`).
        target: String,
        /// The name, when TARGET is a kind.
        name: Option<String>,
        /// The namespace [default: default].
        #[arg(short, long)]
        namespace: Option<String>,
        /// Keep waiting (-w=false prints the state once).
        #[arg(short, long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
        watch: bool,
        /// Give up after this long (e.g. 2m) with an error; 0 waits forever.
        #[arg(long, value_parser = humantime::parse_duration)]
        timeout: Option<Duration>,
    },
    /// Revisions and change causes; one revision's template with --revision N.
    History {
        /// ds/NAME or deployment/NAME (or `ds NAME`).
        target: String,
        /// The name, when TARGET is a kind.
        name: Option<String>,
        /// The namespace [default: default].
        #[arg(short, long)]
        namespace: Option<String>,
        /// Print this revision's pod template.
        #[arg(long)]
        revision: Option<i64>,
    },
    /// Roll back to the previous revision (or --to-revision N).
    Undo {
        /// ds/NAME or deployment/NAME (or `ds NAME`).
        target: String,
        /// The name, when TARGET is a kind.
        name: Option<String>,
        /// The namespace [default: default].
        #[arg(short, long)]
        namespace: Option<String>,
        /// The revision to roll back to (0: the previous one).
        #[arg(long)]
        to_revision: Option<i64>,
    },
    /// Replace every pod (sets the template annotation kubectl.kubernetes.io/restartedAt).
    Restart {
        /// ds/NAME or deployment/NAME (or `ds NAME`).
        target: String,
        /// The name, when TARGET is a kind.
        name: Option<String>,
        /// The namespace [default: default].
        #[arg(short, long)]
        namespace: Option<String>,
    },
    /// Pause a Deployment's rollouts (sets spec.paused; scaling still happens).
    Pause {
        /// deployment/NAME (or `deployment NAME`).
        target: String,
        /// The name, when TARGET is a kind.
        name: Option<String>,
        /// The namespace [default: default].
        #[arg(short, long)]
        namespace: Option<String>,
    },
    /// Resume a paused Deployment.
    Resume {
        /// deployment/NAME (or `deployment NAME`).
        target: String,
        /// The name, when TARGET is a kind.
        name: Option<String>,
        /// The namespace [default: default].
        #[arg(short, long)]
        namespace: Option<String>,
    },
}
