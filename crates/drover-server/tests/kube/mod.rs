//! The scaffolding of the kubectl tests: a one-member server with sim
//! nodes `kn0…`, kubectl run against its `DATA_DIR/kubeconfig` with a
//! `HOME` of the test's own, and kubectl processes whose output is read
//! line by line (`-w`).
#![allow(dead_code)]

use drover_agent::{Sim, SimOptions};
use drover_server::ServerOptions;
use drover_testkit::{fast_options, wait_until, TestServer};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

pub const WAIT: Duration = Duration::from_secs(30);
pub const KUBECTL: &str = "kubectl";

pub struct Kube {
    pub server: TestServer,
    pub sim: Option<Sim>,
    pub kubeconfig: PathBuf,
    pub home: PathBuf,
    pub token: String,
    pub tmp: tempfile::TempDir,
}

/// Fails the test loudly when kubectl is not installed.
fn require_kubectl() {
    match std::process::Command::new(KUBECTL)
        .args(["version", "--client"])
        .output()
    {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "`kubectl version --client` failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!(
            "these tests need kubectl v1.32 on PATH (/usr/bin/kubectl): {e}; install it (https://kubernetes.io/docs/tasks/tools/)"
        ),
    }
}

impl Kube {
    /// A server and `nodes` sim nodes (`kn0…`), every node joined.
    pub async fn start(nodes: usize) -> Kube {
        Kube::start_tuned(nodes, |_| {}).await
    }

    pub async fn start_tuned(nodes: usize, tune: impl FnOnce(&mut ServerOptions)) -> Kube {
        Kube::start_with(nodes, tune, |_| {}).await
    }

    /// [`Kube::start`] with the sim's options changed by `tune_sim`.
    pub async fn start_with_sim(nodes: usize, tune_sim: impl FnOnce(&mut SimOptions)) -> Kube {
        Kube::start_with(nodes, |_| {}, tune_sim).await
    }

    async fn start_with(
        nodes: usize,
        tune: impl FnOnce(&mut ServerOptions),
        tune_sim: impl FnOnce(&mut SimOptions),
    ) -> Kube {
        require_kubectl();
        let tmp = tempfile::tempdir().unwrap();
        let mut o = fast_options(tmp.path().join("server"));
        tune(&mut o);
        let server = TestServer::with_options(o, WAIT).await;
        let sim = (nodes > 0).then(|| {
            let mut so = drover_testkit::sim_options(
                vec![server.addr.clone()],
                &server.node_token,
                "kn",
                nodes,
            );
            so.sim.ready_delay = Duration::from_millis(100);
            so.sim.log_every = Duration::from_millis(100);
            tune_sim(&mut so);
            Sim::start(so).expect("sim starts")
        });
        let kubeconfig = server.dir.join("kubeconfig");
        assert!(kubeconfig.exists(), "the server writes DATA_DIR/kubeconfig");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let token = server.server.identity.admin_token.clone();
        let k = Kube {
            server,
            sim,
            kubeconfig,
            home,
            token,
            tmp,
        };
        wait_until("the nodes", WAIT, || async {
            k.server.node_count().await == nodes
        })
        .await;
        k
    }

    pub async fn stop(mut self) {
        if let Some(sim) = self.sim.take() {
            sim.shutdown().await;
        }
        self.server.shutdown().await;
    }

    fn command(&self, kubeconfig: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(KUBECTL);
        c.args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("HOME", &self.home)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        c
    }

    /// Runs kubectl to its end (at most [`WAIT`]).
    pub async fn run_with(&self, kubeconfig: &Path, args: &[&str]) -> Output {
        let out = self.command(kubeconfig, args).output();
        tokio::time::timeout(WAIT, out)
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish within {WAIT:?}"))
            .expect("kubectl runs")
    }

    pub async fn run(&self, args: &[&str]) -> Output {
        self.run_with(&self.kubeconfig, args).await
    }

    /// Runs kubectl to its end (at most [`WAIT`]) with `input` on its stdin.
    pub async fn run_stdin(&self, args: &[&str], input: &[u8]) -> Output {
        use tokio::io::AsyncWriteExt;
        let mut child = self
            .command(&self.kubeconfig, args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl starts");
        let mut stdin = child.stdin.take().expect("stdin");
        let input = input.to_vec();
        // Written beside the reading: a command that echoes must be read
        // while it is fed.
        let feed = tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
            // Dropped: kubectl sees the end of its stdin.
        });
        let out = tokio::time::timeout(WAIT, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish within {WAIT:?}"))
            .expect("kubectl runs");
        let _ = feed.await;
        out
    }

    /// Runs kubectl to its end (at most [`WAIT`]) in a terminal (`script`
    /// gives it a pseudo-terminal of `cols`x`rows` as its stdin and
    /// stdout): what it wrote there, `\r\n` line ends included.
    pub async fn run_tty(&self, args: &[&str], cols: u16, rows: u16) -> String {
        let quoted: Vec<String> = args.iter().map(|a| shell_quote(a)).collect();
        let line = format!(
            "stty cols {cols} rows {rows}; {KUBECTL} {}",
            quoted.join(" ")
        );
        let mut c = Command::new("script");
        c.args(["-qefc", &line, "/dev/null"])
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", &self.home)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let o = tokio::time::timeout(WAIT, c.output())
            .await
            .unwrap_or_else(|_| panic!("script kubectl {args:?} did not finish within {WAIT:?}"))
            .expect("script (util-linux) runs");
        assert!(
            o.status.success(),
            "script kubectl {args:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).to_string()
    }

    /// kubectl's stdout; the test fails when kubectl does.
    pub async fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args).await;
        assert!(
            o.status.success(),
            "kubectl {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).to_string()
    }

    /// kubectl's stderr; the test fails when kubectl succeeds.
    pub async fn fails(&self, args: &[&str]) -> String {
        let o = self.run(args).await;
        assert!(
            !o.status.success(),
            "kubectl {} succeeded: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stdout)
        );
        String::from_utf8_lossy(&o.stderr).to_string()
    }

    /// kubectl running in the background, its stdout read by line.
    pub fn spawn(&self, args: &[&str]) -> Running {
        self.spawn_with(args, Stdio::null())
    }

    /// kubectl in the background with a stdin that stays open (nothing
    /// written) until it is stopped.
    pub fn spawn_open_stdin(&self, args: &[&str]) -> Running {
        self.spawn_with(args, Stdio::piped())
    }

    fn spawn_with(&self, args: &[&str], stdin: Stdio) -> Running {
        let mut child = self
            .command(&self.kubeconfig, args)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kubectl starts");
        let out = child.stdout.take().expect("stdout");
        Running {
            child,
            lines: BufReader::new(out).lines(),
            seen: Vec::new(),
        }
    }

    /// A kubeconfig for a client certificate (PEM) instead of the token.
    pub fn user_kubeconfig(&self, name: &str, cert: &str, key: &str) -> PathBuf {
        use base64::Engine;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let text = std::fs::read_to_string(&self.kubeconfig).unwrap();
        let mut v: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        v["users"] = serde_json::json!([{
            "name": "drover-admin",
            "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)},
        }]);
        let path = self.tmp.path().join(format!("{name}.kubeconfig"));
        std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
        path
    }

    pub async fn wait_for<F, Fut>(&self, what: &str, f: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        wait_until(what, WAIT, f).await;
    }

    /// Applies a DaemonSet `name` selecting `label` (`k=v`) through the
    /// object API (not kubectl).
    pub async fn apply_ds(&self, name: &str, label: &str) {
        let (k, v) = label.split_once('=').unwrap();
        self.server
            .apply(&format!(
                "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {{name: {name}, labels: {{{k}: {v}}}}}\nspec:\n  selector: {{matchLabels: {{{k}: {v}}}}}\n  template:\n    metadata: {{labels: {{{k}: {v}}}}}\n    spec: {{containers: [{{name: c, image: 'busybox:1'}}]}}\n"
            ))
            .await;
    }

    /// Waits until `n` pods are running and ready.
    pub async fn wait_pods(&self, n: usize) {
        wait_until(&format!("{n} pods ready"), WAIT, || async {
            let pods = self.server.pods(None).await;
            pods.len() == n && pods.iter().all(drover_testkit::is_running_and_ready)
        })
        .await;
    }

    /// The name of the first pod with `label`.
    pub async fn first_pod(&self, label: &str) -> String {
        let out = self
            .ok(&[
                "get",
                "pods",
                "-l",
                label,
                "-o",
                "jsonpath={.items[0].metadata.name}",
            ])
            .await;
        assert!(!out.is_empty(), "a pod with {label}");
        out
    }
}

/// `s` quoted for `sh`.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// kubectl in the background.
pub struct Running {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    pub seen: Vec<String>,
}

impl Running {
    /// Reads lines until one satisfies `f` (at most [`WAIT`]); answers it.
    pub async fn wait_line(&mut self, what: &str, f: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let next = tokio::time::timeout_at(deadline, self.lines.next_line()).await;
            match next {
                Ok(Ok(Some(l))) => {
                    self.seen.push(l.clone());
                    if f(&l) {
                        return l;
                    }
                }
                Ok(Ok(None)) | Ok(Err(_)) => {
                    panic!("kubectl ended before {what}; it printed {:?}", self.seen)
                }
                Err(_) => panic!("no {what} within {WAIT:?}; kubectl printed {:?}", self.seen),
            }
        }
    }

    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}
