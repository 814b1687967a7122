//! The processes of the upgrade test: the two binaries, members, agents and
//! the sim, restarted with either binary; the cluster they form.

use super::*;

// ------------------------------------------------------------ the old binary

/// The previous release's binary: `DROVER_UPGRADE_FROM_BIN`, else built by
/// `.ci/build-upgrade-base` (which prints its path last).
pub fn old_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("DROVER_UPGRADE_FROM_BIN").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "DROVER_UPGRADE_FROM_BIN={}: no such file; point it at the previous release's drover \
             (.ci/build-upgrade-base builds it) or unset it to let this test build it",
            p.display()
        );
        return p;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/build-upgrade-base");
    eprintln!(
        "DROVER_UPGRADE_FROM_BIN is not set: building the previous release with {}",
        script.display()
    );
    let out = Command::new(&script)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("{}: cannot run it: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} failed ({}): the upgrade test needs the previous release's binary",
        script.display(),
        out.status
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = PathBuf::from(stdout.lines().last().unwrap_or("").trim());
    assert!(
        path.is_file(),
        "{} printed {:?}, which is not a file",
        script.display(),
        path
    );
    path
}

pub fn new_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_drover"))
}

// ------------------------------------------------------------ processes

/// One long-running process of the test (a member, an agent, the sim),
/// restarted with either binary; SIGKILLed and reaped when dropped.
pub struct Proc {
    pub name: String,
    pub log: PathBuf,
    pub child: Option<Child>,
    pub starts: usize,
    /// The binary it runs now.
    pub bin: PathBuf,
}

impl Proc {
    pub fn new(name: &str, dir: &Path) -> Proc {
        Proc {
            name: name.to_string(),
            log: dir.join(format!("{name}.log")),
            child: None,
            starts: 0,
            bin: PathBuf::new(),
        }
    }

    /// Starts `bin ARGS`, output appended to its log.
    pub fn start(&mut self, bin: &Path, args: &[String]) {
        assert!(self.child.is_none(), "{} already runs", self.name);
        self.starts += 1;
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open the log");
        writeln!(
            log,
            "===== start {} of {}: {} {args:?}",
            self.starts,
            self.name,
            bin.display()
        )
        .expect("write the log");
        let err = log.try_clone().expect("clone the log file");
        let child = Command::new(bin)
            .args(args)
            .env("DROVER_LOG", "info,raft=info")
            .env("NO_COLOR", "1")
            .env_remove("DROVER_CONFIG")
            .env_remove("DROVER_SERVER")
            .env_remove("DROVER_TOKEN")
            .env_remove("DROVER_TOKEN_FILE")
            .env_remove("DROVER_CA")
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {} for {}: {e}", bin.display(), self.name));
        self.bin = bin.to_path_buf();
        self.child = Some(child);
    }

    pub fn signal(&self, sig: i32) {
        let c = self.child.as_ref().expect("the process runs");
        let pid = i32::try_from(c.id()).expect("pid");
        // SAFETY: kill(2) on our own child, which is not reaped yet (we
        // hold its `Child`), so the pid is still its.
        let r = unsafe { libc::kill(pid, sig) };
        assert_eq!(r, 0, "kill({pid}, {sig}) for {}", self.name);
    }

    /// SIGTERM, then waits for the exit (at most [`STOP`]); returns how long
    /// it took and the exit status.
    pub async fn stop(&mut self) -> (Duration, std::process::ExitStatus) {
        let t = Instant::now();
        self.signal(libc::SIGTERM);
        loop {
            if let Some(st) = self.exited() {
                return (t.elapsed(), st);
            }
            assert!(
                t.elapsed() < STOP,
                "{} did not exit within {STOP:?} of SIGTERM",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The exit status, if it exited (on its own).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        let c = self.child.as_mut()?;
        let st = c.try_wait().expect("try_wait")?;
        self.child = None;
        Some(st)
    }

    pub fn assert_alive(&mut self) {
        if let Some(st) = self.exited() {
            panic!(
                "{} ({}) exited on its own: {st}\n{}",
                self.name,
                self.bin.display(),
                self.tail(40)
            );
        }
    }

    pub fn log_len(&self) -> usize {
        std::fs::metadata(&self.log).map_or(0, |m| m.len() as usize)
    }

    pub fn tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One member: its data dir, its addresses (from `server.json`) and its
/// process.
pub struct Member {
    pub proc: Proc,
    pub dir: PathBuf,
    pub addr: String,
    pub http: String,
    pub id: u64,
}

impl Member {
    /// The arguments of every start after the first: the data dir holds
    /// the identity, the ports and the cluster.
    pub fn restart_args(&self) -> Vec<String> {
        vec![
            "server".into(),
            "--data-dir".into(),
            self.dir.display().to_string(),
            "--snapshot-every".into(),
            SNAPSHOT_EVERY.into(),
            "--keep-entries".into(),
            KEEP_ENTRIES.into(),
        ]
    }

    /// Starts it with `bin` from its data dir, where it binds the ports it
    /// recorded, and waits until its HTTP port answers. A start that exits
    /// because one of those (ephemeral) ports is held for a moment by an
    /// outgoing connection is tried again until [`START`] has passed; any
    /// other exit fails the test.
    pub async fn restart(&mut self, bin: &Path) {
        let deadline = Instant::now() + START;
        loop {
            let before = self.proc.log_len();
            self.proc.start(bin, &self.restart_args());
            let (name, log) = (self.proc.name.clone(), self.proc.log.clone());
            let proc = &mut self.proc;
            let at = (self.http.as_str(), self.dir.as_path());
            if drover_testkit::await_restart(
                &name,
                &log,
                before,
                || proc.exited(),
                at,
                deadline,
                POLL,
            )
            .await
            {
                return;
            }
        }
    }

    pub fn single(&self, token: &str) -> Client {
        let ca = std::fs::read_to_string(self.dir.join("ca.crt")).expect("ca.crt");
        let mut c = Client::single(&self.addr, token, &ca).expect("client");
        c.deadline = Duration::from_secs(2);
        c
    }
}

/// The HTTP status of `GET path` on `addr` (HTTPS under the CA in `dir`),
/// or None when it does not answer.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    drover_testkit::wait_for(what, timeout, POLL, f).await
}

/// Everything the test started. Members, agents and the sim are killed
/// when it drops (before the temp dir goes); on a panic the tail of every
/// log is printed and the temp dir kept.
pub struct Cluster {
    pub members: Vec<Member>,
    pub agents: Vec<Proc>,
    pub sim: Proc,
    /// The agent of the Docker node (old, upgraded with the others), and
    /// its node's name; None when the run opted out of Docker
    /// (`DROVER_TEST_SKIP=docker`).
    pub docker: Option<(Proc, String)>,
    pub token: String,
    pub old: PathBuf,
    pub new: PathBuf,
    pub tmp: tempfile::TempDir,
    /// Removes the Docker node's containers, after its agent was killed.
    pub _containers: Option<drover_testkit::docker::Cleanup>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for m in &mut self.members {
            m.proc.kill();
        }
        for a in &mut self.agents {
            a.kill();
        }
        self.sim.kill();
        if let Some((a, _)) = &mut self.docker {
            a.kill();
        }
        if std::thread::panicking() {
            let procs = self
                .members
                .iter()
                .map(|m| &m.proc)
                .chain(&self.agents)
                .chain([&self.sim])
                .chain(self.docker.iter().map(|(a, _)| a));
            for p in procs {
                eprintln!(
                    "----- last lines of {} ({}, last run {}):\n{}",
                    p.name,
                    p.log.display(),
                    p.bin.display(),
                    p.tail(60)
                );
            }
        }
        if std::thread::panicking() || std::env::var_os("DROVER_TEST_KEEP").is_some() {
            self.tmp.disable_cleanup(true);
            eprintln!("data dirs and logs kept in {}", self.tmp.path().display());
        }
    }
}

/// One member's status, as it reports it.
pub struct View {
    pub idx: usize,
    pub id: u64,
    pub role: String,
    pub leader: u64,
    pub term: u64,
    pub commit: u64,
    pub applied: u64,
    pub voters: usize,
    pub sessions: u32,
    pub version: String,
}

impl Cluster {
    pub fn path(&self, p: &Path) -> String {
        p.display().to_string()
    }

    /// Member 0 bootstraps, 1 and 2 join; all on `bin`.
    pub async fn start(old: PathBuf, new: PathBuf) -> Cluster {
        let tmp = tempfile::tempdir().expect("temp dir");
        let members = (0..MEMBERS)
            .map(|i| Member {
                proc: Proc::new(&format!("m{i}"), tmp.path()),
                dir: tmp.path().join(format!("m{i}")),
                addr: String::new(),
                http: String::new(),
                id: 0,
            })
            .collect();
        // One more than AGENTS: the last is new from the start.
        let agents = (0..=AGENTS)
            .map(|i| Proc::new(&format!("agent{i}"), tmp.path()))
            .collect();
        let sim = Proc::new("sim", tmp.path());
        // A Docker node when an engine answers (or the run opted out of
        // Docker out loud: then none).
        let docker = drover_testkit::docker::engine_ready().then(|| {
            let node = drover_testkit::docker::node_name("up", "upgrade");
            (Proc::new("docker-agent", tmp.path()), node)
        });
        let _containers = docker
            .as_ref()
            .map(|(_, node)| drover_testkit::docker::Cleanup::new(node));
        let mut c = Cluster {
            members,
            agents,
            sim,
            docker,
            _containers,
            token: String::new(),
            old,
            new,
            tmp,
        };
        let bin = c.old.clone();
        for i in 0..MEMBERS {
            let mut args = c.members[i].restart_args();
            args.extend(["--listen", LOOPBACK_0, "--http", LOOPBACK_0].map(String::from));
            if i > 0 {
                // The joiners need the server token the first member wrote.
                let token = c.members[0].dir.join("server-token");
                args.extend([
                    "--join".to_string(),
                    c.members[0].addr.clone(),
                    "--token-file".to_string(),
                    c.path(&token),
                ]);
            }
            c.members[i].proc.start(&bin, &args);
            let a = {
                let m = &mut c.members[i];
                let child = m.proc.child.as_mut().expect("just started");
                drover_testkit::wait_member_addrs(&m.dir, child, START)
            };
            c.members[i].addr = a.grpc;
            c.members[i].http = a.http;
            let client_yaml = c.members[i].dir.join("client.yaml");
            wait_for("client.yaml", START, || async {
                ClientConfig::load(&client_yaml).ok()
            })
            .await;
            if i == 0 {
                c.token = ClientConfig::load(&client_yaml).expect("client.yaml").token;
            }
            c.wait_in_cluster(i).await;
        }
        c
    }

    /// The status of member `i` as it sees itself, None when it does not
    /// answer within a second or two.
    pub async fn status(&self, i: usize) -> Option<View> {
        let m = &self.members[i];
        m.proc.child.as_ref()?;
        let st = tokio::time::timeout(Duration::from_secs(3), m.single(&self.token).status())
            .await
            .ok()?
            .ok()?;
        Some(View {
            idx: i,
            id: st.id,
            role: st.role,
            leader: st.leader,
            term: st.term,
            commit: st.commit,
            applied: st.applied,
            voters: st
                .members
                .iter()
                .filter(|m| !m.learner && !m.removed)
                .count(),
            sessions: st.sessions,
            version: st.version,
        })
    }

    pub async fn views(&self) -> Vec<View> {
        let mut out = Vec::new();
        for i in 0..self.members.len() {
            if let Some(v) = self.status(i).await {
                out.push(v);
            }
        }
        out
    }

    /// The member a majority of the cluster (the members started so far)
    /// follows in its current term.
    pub async fn leader(&self) -> usize {
        let size = self.members.iter().filter(|m| m.proc.starts > 0).count();
        wait_for("a leader followed by a majority", START, || async {
            let views = self.views().await;
            views.iter().filter(|l| l.role == "leader").find_map(|l| {
                let agree = views
                    .iter()
                    .filter(|v| v.leader == l.id && v.term == l.term)
                    .count();
                (agree > size / 2).then_some(l.idx)
            })
        })
        .await
    }

    /// Waits until member `i` is healthy, follows the leader of a majority,
    /// the leader counts it among the voters (all of them, once all three
    /// joined), and it applied the leader's commit index as of when it came
    /// back. Returns its view.
    pub async fn wait_in_cluster(&mut self, i: usize) -> View {
        let name = self.members[i].proc.name.clone();
        let http = self.members[i].http.clone();
        let dir = self.members[i].dir.clone();
        let healthy = format!("{name} healthy");
        wait_for(&healthy, START, || async {
            (drover_testkit::member_http_status(&http, "/health", &dir).await == Some(200))
                .then_some(())
        })
        .await;
        self.members[i].proc.assert_alive();
        let leader = self.leader().await;
        let target = self.status(leader).await.map_or(0, |v| v.commit);
        let expected_voters = self.members.iter().filter(|m| m.proc.starts > 0).count();
        let what = format!("{name} a voter that applied index {target}");
        let view = wait_for(&what, START, || async {
            let me = self.status(i).await?;
            let l = self.status(leader).await?;
            (me.leader == l.id
                && me.leader != 0
                && l.voters == expected_voters
                && me.applied >= target)
                .then_some(me)
        })
        .await;
        if self.members[i].id == 0 {
            self.members[i].id = view.id;
        }
        assert_eq!(view.id, self.members[i].id, "{name} keeps its identity");
        view
    }

    pub fn servers(&self) -> String {
        self.members
            .iter()
            .map(|m| m.addr.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A client with failover over every member.
    pub fn client(&self) -> Client {
        let ca = std::fs::read_to_string(self.members[0].dir.join("ca.crt")).expect("ca.crt");
        let mut c = Client::new(&ClientConfig {
            servers: self.members.iter().map(|m| m.addr.clone()).collect(),
            token: self.token.clone(),
            ca,
            ..Default::default()
        })
        .expect("client");
        c.deadline = Duration::from_secs(15);
        c
    }

    /// What every node process is given: all servers, the node token, the
    /// CA.
    pub fn node_conn(&self) -> Vec<String> {
        self.node_conn_to(self.servers())
    }

    /// [`Cluster::node_conn`] with only the servers `servers` (comma
    /// separated).
    pub fn node_conn_to(&self, servers: String) -> Vec<String> {
        let d = &self.members[0].dir;
        vec![
            "--server".into(),
            servers,
            "--token-file".into(),
            self.path(&d.join("node-token")),
            "--ca".into(),
            self.path(&d.join("ca.crt")),
        ]
    }

    /// `drover agent` for node `up-agent{i}`, given every server.
    pub fn agent_args(&self, i: usize) -> Vec<String> {
        let mut a: Vec<String> = [
            "agent",
            "--runtime",
            "sim",
            "--name",
            &format!("up-agent{i}"),
            "--data-dir",
            &self.path(&self.tmp.path().join(format!("agent{i}"))),
        ]
        .map(String::from)
        .to_vec();
        a.extend(self.node_conn());
        a
    }

    /// Lines of the members' logs (all their starts) that contain `text`.
    pub fn member_log_lines(&self, text: &str) -> usize {
        self.members
            .iter()
            .map(|m| {
                std::fs::read_to_string(&m.proc.log)
                    .unwrap_or_default()
                    .lines()
                    .filter(|l| l.contains(text))
                    .count()
            })
            .sum()
    }

    pub fn sim_args(&self) -> Vec<String> {
        let mut a: Vec<String> = [
            "sim",
            "--nodes",
            &SIM_NODES.to_string(),
            "--prefix",
            "up-sim",
            "--data-dir",
            &self.path(&self.tmp.path().join("sim")),
        ]
        .map(String::from)
        .to_vec();
        a.extend(self.node_conn());
        a
    }

    /// Agent sessions held by the members, all together.
    pub async fn sessions(&self) -> u32 {
        self.views().await.iter().map(|v| v.sessions).sum()
    }

    pub fn assert_all_alive(&mut self) {
        for m in &mut self.members {
            m.proc.assert_alive();
        }
        for a in &mut self.agents {
            a.assert_alive();
        }
        self.sim.assert_alive();
        if let Some((a, _)) = &mut self.docker {
            a.assert_alive();
        }
    }

    /// The Docker node's agent (there must be one).
    pub fn docker_agent(&mut self) -> &mut Proc {
        &mut self.docker.as_mut().expect("a Docker node").0
    }

    /// `drover agent` of the Docker node (the default runtime).
    pub fn docker_args(&self) -> Vec<String> {
        let node = &self.docker.as_ref().expect("a Docker node").1;
        let mut a: Vec<String> = [
            "agent",
            "--name",
            node,
            "--data-dir",
            &self.path(&self.tmp.path().join("docker-agent")),
        ]
        .map(String::from)
        .to_vec();
        a.extend(self.node_conn());
        a
    }
}
