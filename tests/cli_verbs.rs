//! The kubectl verbs of `drover` with the real binary, as a user types
//! them: a server, two simulated nodes (`drover sim`), then `drain`,
//! `delete node`, `annotate`, `patch`, `edit`, `get -o jsonpath|
//! custom-columns`, `--show-labels`, `-L`, `exec -it` (in a `script`
//! pseudo-terminal) and a closed pipe on stdout.
//!
//! Every child is SIGKILLed and reaped when the test ends, panics included;
//! every wait polls with a deadline.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use drover_testkit::{spawn_logged, wait_member_addrs, wait_until_blocking, Procs};

const BIN: &str = env!("CARGO_BIN_EXE_drover");
const POLL: Duration = Duration::from_millis(50);
const WAIT: Duration = Duration::from_secs(30);

fn spawn(args: &[&str], log: &Path) -> Child {
    spawn_logged(BIN, args, log)
}

struct Cli {
    config: PathBuf,
}

impl Cli {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.arg("--config")
            .arg(&self.config)
            .args(args)
            .env_remove("DROVER_SERVER")
            .env_remove("KUBE_EDITOR")
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run drover")
    }

    /// Runs and expects success; answers stdout.
    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "drover {args:?} failed ({}):\n{}{}",
            o.status,
            text(&o.stdout),
            text(&o.stderr)
        );
        text(&o.stdout)
    }

    fn jsonpath(&self, args: &[&str], template: &str) -> String {
        let o = format!("jsonpath={template}");
        let mut a = args.to_vec();
        a.extend(["-o", &o]);
        self.ok(&a)
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const OBJECTS: &str = "apiVersion: apps/v1
kind: DaemonSet
metadata: {name: fluent}
spec:
  selector: {matchLabels: {app: fluent}}
  template:
    metadata: {labels: {app: fluent}}
    spec:
      containers: [{name: c, image: busybox}, {name: side, image: nginx}]
---
apiVersion: v1
kind: Pod
metadata: {name: bare, labels: {app: bare, app.kubernetes.io/tier: front}}
spec:
  nodeName: n0
  containers: [{name: c, image: busybox}]
---
apiVersion: v1
kind: Pod
metadata: {name: scratch}
spec:
  nodeName: n0
  volumes: [{name: s, emptyDir: {}}]
  containers: [{name: c, image: busybox}]
";

struct Cluster {
    _tmp: tempfile::TempDir,
    _procs: Procs,
    cli: Cli,
}

/// A server and `drover sim` with nodes n0 and n1, OBJECTS applied and
/// their four pods Running.
fn cluster() -> Cluster {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().to_path_buf();
    let data = dir.join("server");
    let d = data.to_str().expect("utf-8");
    let mut procs = Procs(Vec::new());
    procs.0.push(spawn(
        &[
            "server",
            "--data-dir",
            d,
            "--listen",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
        ],
        &dir.join("server.log"),
    ));
    let grpc = wait_member_addrs(&data, &mut procs.0[0], WAIT).grpc;
    wait_until_blocking("the server's client files", WAIT, POLL, || {
        data.join("client.yaml").exists() && data.join("node-token").exists()
    });
    let token = data.join("node-token").display().to_string();
    procs.0.push(spawn(
        &[
            "sim",
            "--server",
            &grpc,
            "--token-file",
            &token,
            "--nodes",
            "2",
            "--prefix",
            "n",
        ],
        &dir.join("sim.log"),
    ));
    let cli = Cli {
        config: data.join("client.yaml"),
    };
    let file = dir.join("objects.yaml");
    std::fs::write(&file, OBJECTS).expect("write the manifests");
    wait_until_blocking("nodes n0 and n1", WAIT, POLL, || {
        let o = cli.run(&["get", "nodes", "-o", "name"]);
        text(&o.stdout) == "node/n0\nnode/n1\n"
    });
    cli.ok(&["apply", "-f", file.to_str().expect("utf-8")]);
    wait_until_blocking("four pods Running", WAIT, POLL, || {
        let o = cli.run(&["get", "pods", "-o", "jsonpath={.items[*].status.phase}"]);
        text(&o.stdout) == "Running Running Running Running"
    });
    Cluster {
        _tmp: tmp,
        _procs: procs,
        cli,
    }
}

#[test]
fn drain_and_delete_node_as_kubectl() {
    let c = cluster();
    let cli = &c.cli;
    let ds_pod_on = |node: &str| {
        cli.jsonpath(
            &["get", "pods", "-l", "app=fluent"],
            &format!("{{.items[?(@.spec.nodeName==\"{node}\")].metadata.name}}"),
        )
    };
    let fluent_n0 = ds_pod_on("n0");
    assert!(fluent_n0.starts_with("fluent-"), "{fluent_n0:?}");

    // Without flags: cordoned, every refusal said, nothing deleted.
    let o = cli.run(&["drain", "n0"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "node/n0 cordoned\n");
    let refusals = [
        "cannot delete Pods that declare no controller (use --force to override): default/bare"
            .to_string(),
        format!("cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): default/{fluent_n0}"),
        "cannot delete Pods with local storage (use --delete-emptydir-data to override): default/scratch".to_string(),
    ];
    assert_eq!(
        text(&o.stderr),
        format!(
            "error: unable to drain node \"n0\" due to error: [{}], continuing command...\nThere are pending nodes to be drained:\n n0\n{}\n",
            refusals.join(", "),
            refusals.join("\n")
        )
    );
    assert_eq!(
        cli.jsonpath(&["get", "node", "n0"], "{.spec.unschedulable}"),
        "true"
    );
    assert_eq!(
        cli.jsonpath(&["get", "pods"], "{.items[*].metadata.name}")
            .split(' ')
            .count(),
        4
    );

    // Only --ignore-daemonsets: the other two refusals remain.
    let o = cli.run(&["drain", "n0", "--ignore-daemonsets"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        !text(&o.stderr).contains("DaemonSet-managed"),
        "{}",
        text(&o.stderr)
    );
    assert!(text(&o.stderr).contains("default/bare"));

    // Every flag: the pods go, the daemon pods stay.
    let o = cli.run(&[
        "drain",
        "n0",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--force",
        "--timeout",
        "20s",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        "node/n0 already cordoned\npod/bare deleted\npod/scratch deleted\nnode/n0 drained\n"
    );
    assert_eq!(
        text(&o.stderr),
        format!("Warning: deleting Pods that declare no controller: default/bare, default/scratch; ignoring DaemonSet-managed Pods: default/{fluent_n0}\n")
    );
    let left = cli.jsonpath(&["get", "pods"], "{.items[*].metadata.name}");
    assert!(
        !left.contains("bare") && !left.contains("scratch"),
        "{left}"
    );
    assert_eq!(ds_pod_on("n0"), fluent_n0, "the daemon pod stays");
    // Drained again: nothing left to do.
    let o = cli.run(&["drain", "n0", "--ignore-daemonsets"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        "node/n0 already cordoned\nnode/n0 drained\n"
    );

    let o = cli.run(&["drain", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        "Error from server (NotFound): nodes \"nope\" not found\n"
    );

    // delete node: a missing one is an error, a present one goes.
    let o = cli.run(&["delete", "node", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        "Error from server (NotFound): nodes \"nope\" not found\n"
    );
    assert_eq!(cli.ok(&["delete", "node", "n1"]), "node \"n1\" deleted\n");
    assert_eq!(cli.ok(&["get", "nodes", "-o", "name"]), "node/n0\n");
}

#[test]
fn annotate_patch_edit_and_the_output_formats() {
    let c = cluster();
    let cli = &c.cli;

    // annotate: set, refuse a change without --overwrite, overwrite, remove.
    assert_eq!(
        cli.ok(&["annotate", "pod", "bare", "team=red", "url=http://x/?a=b"]),
        "pod/bare annotated\n"
    );
    let o = cli.run(&["annotate", "pod", "bare", "team=blue"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        "error: --overwrite is false but found the following declared annotation(s): 'team' already has a value (red)\n"
    );
    let team = || cli.jsonpath(&["get", "pod", "bare"], "{.metadata.annotations.team}");
    assert_eq!(team(), "red");
    cli.ok(&["annotate", "pod/bare", "team=blue", "--overwrite"]);
    assert_eq!(team(), "blue");
    assert_eq!(
        cli.jsonpath(&["get", "pod", "bare"], "{.metadata.annotations.url}"),
        "http://x/?a=b"
    );
    cli.ok(&["annotate", "pod", "bare", "team-"]);
    assert_eq!(team(), "");

    // patch: strategic merges the containers by name, merge replaces the
    // list, json changes one element.
    let images = || {
        cli.jsonpath(
            &["get", "ds", "fluent"],
            "{.spec.template.spec.containers[*].image}",
        )
    };
    assert_eq!(
        cli.ok(&[
            "patch",
            "ds",
            "fluent",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"side","image":"nginx:2"}]}}}}"#
        ]),
        "daemonset.apps/fluent patched\n"
    );
    assert_eq!(images(), "busybox nginx:2");
    cli.ok(&[
        "patch",
        "ds/fluent",
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"busybox:2"}]"#,
    ]);
    assert_eq!(images(), "busybox:2 nginx:2");
    cli.ok(&[
        "patch",
        "ds",
        "fluent",
        "--type",
        "merge",
        "-p",
        "spec:\n  template:\n    spec:\n      containers: [{name: c, image: busybox:3}]\n",
    ]);
    assert_eq!(images(), "busybox:3");
    assert_eq!(
        cli.ok(&[
            "patch",
            "node",
            "n1",
            "-p",
            r#"{"spec":{"unschedulable":true}}"#
        ]),
        "node/n1 patched\n"
    );
    assert_eq!(
        cli.ok(&[
            "patch",
            "node",
            "n1",
            "-p",
            r#"{"spec":{"unschedulable":true}}"#
        ]),
        "node/n1 patched (no change)\n"
    );
    let o = cli.run(&["patch", "node", "nope", "-p", "{}"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        "Error from server (NotFound): nodes \"nope\" not found\n"
    );

    // edit: an editor that changes nothing, then one that does.
    let o = cli
        .cmd(&["edit", "ds", "fluent"])
        .env("EDITOR", "true")
        .output()
        .expect("edit");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stderr), "Edit cancelled, no changes made.\n");
    let o = cli
        .cmd(&["edit", "ds/fluent"])
        .env("EDITOR", "sed -i s/busybox:3/busybox:4/")
        .output()
        .expect("edit");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "daemonset.apps/fluent edited\n");
    assert_eq!(images(), "busybox:4");
    // KUBE_EDITOR comes first.
    let o = cli
        .cmd(&["edit", "ds", "fluent", "-o", "json"])
        .env("EDITOR", "false")
        .env("KUBE_EDITOR", "sed -i s/busybox:4/busybox:5/")
        .output()
        .expect("edit");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(images(), "busybox:5");

    // A refused edit is reopened with the refusal on top; saved unchanged,
    // edit gives up, says why, and nothing is written.
    let o = cli
        .cmd(&["edit", "ds", "fluent"])
        .env("EDITOR", r"sed -i s/image:.busybox:5/image:\x20/")
        .output()
        .expect("edit");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let said = text(&o.stderr);
    assert!(
        said.ends_with("error: Edit cancelled, no valid changes were saved.\n"),
        "{said}"
    );
    assert!(
        said.contains("image"),
        "the refusal names the field: {said}"
    );
    assert_eq!(images(), "busybox:5");

    // get -o jsonpath / custom-columns, --show-labels, -L.
    let nodes = cli.jsonpath(
        &["get", "nodes"],
        r#"{range .items[*]}{.metadata.name}{"\t"}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}"#,
    );
    assert_eq!(nodes, "n0\tTrue\nn1\tTrue\n");
    let table = cli.ok(&[
        "get",
        "pods",
        "-l",
        "app=bare",
        "-o",
        "custom-columns=NAME:.metadata.name,NODE:spec.nodeName,IMAGES:{.spec.containers[*].image},GONE:.metadata.nothing",
    ]);
    assert_eq!(
        table,
        "NAME   NODE   IMAGES    GONE\nbare   n0     busybox   <none>\n"
    );
    let labels = cli.ok(&[
        "get",
        "pods",
        "bare",
        "-L",
        "app,app.kubernetes.io/tier",
        "--show-labels",
    ]);
    let lines: Vec<Vec<&str>> = labels
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        vec!["NAME", "READY", "STATUS", "RESTARTS", "AGE", "APP", "TIER", "LABELS"]
    );
    assert_eq!(lines[1][0], "bare");
    assert_eq!(
        lines[1][5..],
        ["bare", "front", "app=bare,app.kubernetes.io/tier=front"]
    );
    // Several kinds: one table of custom columns, as kubectl's. The edits
    // above started a rolling update; the table is read once it is done,
    // since a node between its old pod and its new one has none (found by
    // CI: three pods listed, not four).
    cli.ok(&["rollout", "status", "ds/fluent", "--timeout", "60s"]);
    let kinds = cli.ok(&[
        "get",
        "ds,pods",
        "-o",
        "custom-columns=KIND:.kind,NAME:.metadata.name",
    ]);
    let firsts: Vec<&str> = kinds
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        firsts,
        ["KIND", "DaemonSet", "Pod", "Pod", "Pod", "Pod"],
        "{kinds}"
    );
    let o = cli.run(&["get", "pods", "-o", "foo"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr)
            .starts_with("error: unable to match a printer suitable for the output format \"foo\""),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn exec_it_gets_a_terminal_and_a_closed_pipe_ends_quietly() {
    let c = cluster();
    let cli = &c.cli;
    let config = cli.config.display().to_string();
    // In a pseudo-terminal (`script`), -it gives the command one.
    let o = Command::new("script")
        .args([
            "-qec",
            &format!("{BIN} --config {config} exec -it bare -- tty"),
            "/dev/null",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("script (util-linux) runs");
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    assert!(
        text(&o.stdout).contains("/dev/pts/0"),
        "{:?}",
        text(&o.stdout)
    );
    // -it passes the terminal's input through raw: Ctrl-A (which a
    // terminal in cooked mode would echo as "^A") reaches the command, and
    // the sim's cat sends the byte itself back.
    let mut script = Command::new("script")
        .args([
            "-qec",
            &format!("{BIN} --config {config} exec -it bare -- cat"),
            "/dev/null",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("script runs");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut stdout = script.stdout.take().expect("stdout");
    let reader = {
        let seen = seen.clone();
        std::thread::spawn(move || {
            use std::io::Read;
            let mut buf = [0u8; 1024];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.lock().expect("lock").extend_from_slice(&buf[..n]);
            }
        })
    };
    {
        use std::io::Write;
        let mut stdin = script.stdin.take().expect("stdin");
        stdin.write_all(b"\x01").expect("type Ctrl-A");
        stdin.flush().expect("flush");
        let r = std::panic::catch_unwind(|| {
            wait_until_blocking("Ctrl-A echoed raw by the command", WAIT, POLL, || {
                seen.lock().expect("lock").contains(&1u8)
            })
        });
        let _ = script.kill();
        let _ = script.wait();
        drop(stdin);
        let _ = reader.join();
        if r.is_err() {
            panic!("exec -it printed {:?}", text(&seen.lock().expect("lock")));
        }
    }
    // -t without -i is ignored, as kubectl does.
    let o = cli.run(&["exec", "-t", "bare", "--", "tty"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(text(&o.stdout), "not a tty\n");
    assert_eq!(text(&o.stderr), "");

    // A reader that has gone away (`| head -1`): status 0, nothing said.
    // The pipe's read end is closed before drover starts, so its first
    // write fails with EPIPE every time.
    for args in [
        &["get", "pods"][..],
        &["get", "pods", "-o", "yaml"],
        &["completion", "bash"],
    ] {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let o = cli
            .cmd(args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .expect("run drover");
        assert!(
            o.status.success(),
            "drover {args:?}: {} {}",
            o.status,
            text(&o.stderr)
        );
        assert_eq!(text(&o.stderr), "", "drover {args:?}");
    }
}
