//! The pod sandbox: a container running the [`super::pause`] program that
//! owns the pod's network and IPC namespaces and its port bindings, which
//! the pod's containers join.

use super::{config, engine, label, pause, sandbox_name, summary_ip, DockerRuntime};
use super::{LABEL_ATTEMPT, LABEL_ROLE, LABEL_UID};
use crate::runtime::{RuntimeError, StartContainer};
use bollard::models::{
    ContainerCreateBody, ContainerSummary, ContainerSummaryStateEnum, HostConfig,
};
use bollard::query_parameters::CreateImageOptions;
use futures_util::StreamExt;
use std::time::Duration;

impl DockerRuntime {
    /// The sandbox image, built from [`pause`] on first use.
    async fn pause_image(&self) -> Result<String, RuntimeError> {
        self.pause_image
            .get_or_try_init(|| async {
                let program = pause::program(&self.arch).ok_or_else(|| {
                    RuntimeError::new(
                        "CreatePodSandboxError",
                        format!(
                            "drover has no pod sandbox program for the engine's architecture {:?}; run the pod with hostNetwork: true",
                            self.arch
                        ),
                    )
                })?;
                let name = pause::image_name(&program);
                if self.docker.inspect_image(&name).await.is_ok() {
                    return Ok(name);
                }
                let tar = pause::rootfs_tar("pause", &program);
                let opts = CreateImageOptions {
                    from_src: Some("-".into()),
                    repo: Some(pause::REPO.into()),
                    tag: Some(pause::tag(&program)),
                    changes: vec!["CMD [\"/pause\"]".into()],
                    ..Default::default()
                };
                let mut stream = self.docker.create_image(
                    Some(opts),
                    Some(bollard::body_full(tar.into())),
                    None,
                );
                while let Some(item) = stream.next().await {
                    item.map_err(|e| engine("CreatePodSandboxError", "build the pause image", e))?;
                }
                self.docker.inspect_image(&name).await.map_err(|e| {
                    engine("CreatePodSandboxError", "build the pause image", e)
                })?;
                tracing::info!(node = %self.node, image = %name, "built the pod sandbox image");
                Ok(name)
            })
            .await
            .cloned()
    }

    /// The pod's running sandbox (id, IP), made when there is none.
    pub(super) async fn ensure_sandbox(
        &self,
        req: &StartContainer,
        grace: Duration,
        listed: Vec<ContainerSummary>,
    ) -> Result<(String, String), RuntimeError> {
        match self.sandbox(req, grace, listed).await? {
            Sandbox::Running { id, ip } => Ok((id, ip)),
            Sandbox::Created { id, name } => {
                self.start_sandbox(&id, &name).await?;
                let ip = self.container_ip(&id).await?;
                Ok((id, ip))
            }
        }
    }

    /// Starts a sandbox [`DockerRuntime::sandbox`] created (removed again
    /// when it does not start).
    pub(super) async fn start_sandbox(&self, id: &str, name: &str) -> Result<(), RuntimeError> {
        if let Err(e) = self.docker.start_container(id, None).await {
            let _ = self.stop_and_remove(id, Duration::ZERO).await;
            return Err(engine(
                "CreatePodSandboxError",
                &format!("start the pod sandbox {name}"),
                e,
            ));
        }
        Ok(())
    }

    /// The pod's sandbox: the running one, or a new one created (not yet
    /// started: the caller starts it, while it creates the container that
    /// joins it).
    /// `listed` are the pod's sandboxes as the caller just listed them.
    pub(super) async fn sandbox(
        &self,
        req: &StartContainer,
        grace: Duration,
        found: Vec<ContainerSummary>,
    ) -> Result<Sandbox, RuntimeError> {
        let pod = &req.pod;
        let uid = pod.metadata.uid.as_str();
        let running = found
            .iter()
            .find(|s| s.state == Some(ContainerSummaryStateEnum::RUNNING));
        if let Some(s) = running {
            let id = s.id.clone().unwrap_or_default();
            let ip = match summary_ip(s) {
                Some(ip) => ip,
                None => self.container_ip(&id).await?,
            };
            return Ok(Sandbox::Running { id, ip });
        }
        let n = found
            .iter()
            .filter_map(|s| label(s, LABEL_ATTEMPT)?.parse::<u32>().ok())
            .max()
            .map_or(0, |a| a + 1);
        if found.is_empty() {
            for w in config::pod_warnings(pod) {
                tracing::warn!(node = %self.node, "{w}");
            }
        } else {
            // The pod's network is gone: what still runs in it starts over
            // in the new one (the agent restarts it), as with the kubelet.
            let apps = self
                .find(&[(LABEL_UID, uid), (LABEL_ROLE, "container")])
                .await?;
            for a in apps
                .iter()
                .filter(|a| a.state == Some(ContainerSummaryStateEnum::RUNNING))
            {
                if let Err(e) = self
                    .stop_only(a.id.as_deref().unwrap_or_default(), grace)
                    .await
                {
                    tracing::warn!(node = %self.node, "{e}");
                }
            }
            for s in &found {
                self.stop_and_remove(s.id.as_deref().unwrap_or_default(), Duration::ZERO)
                    .await?;
            }
        }
        let image = self.pause_image().await?;
        let (exposed, bindings) = config::ports(pod);
        let (dns, dns_search, dns_options) = config::dns(pod);
        let mut labels = self.labels(pod, "sandbox");
        labels.insert(LABEL_ATTEMPT.to_string(), n.to_string());
        let body = ContainerCreateBody {
            image: Some(image),
            cmd: Some(vec!["/pause".into()]),
            hostname: Some(config::hostname(pod)),
            labels: Some(labels),
            exposed_ports: (!exposed.is_empty()).then_some(exposed),
            stop_timeout: Some(2),
            host_config: Some(HostConfig {
                port_bindings: (!bindings.is_empty()).then_some(bindings),
                ipc_mode: Some(
                    if pod.spec.host_ipc {
                        "host"
                    } else {
                        "shareable"
                    }
                    .into(),
                ),
                extra_hosts: config::host_aliases(pod),
                dns,
                dns_search,
                dns_options,
                ..Default::default()
            }),
            ..Default::default()
        };
        let name = sandbox_name(&pod.metadata.namespace, &pod.metadata.name, n);
        let id = self
            .create(&name, uid, body, "CreatePodSandboxError")
            .await?;
        Ok(Sandbox::Created { id, name })
    }

    async fn container_ip(&self, id: &str) -> Result<String, RuntimeError> {
        let c = self
            .docker
            .inspect_container(id, None)
            .await
            .map_err(|e| engine("CreatePodSandboxError", "inspect the pod sandbox", e))?;
        Ok(c.network_settings
            .and_then(|n| n.networks)
            .and_then(|n| {
                n.into_values()
                    .filter_map(|e| e.ip_address)
                    .find(|ip| !ip.is_empty())
            })
            .unwrap_or_default())
    }

    /// Removes the pod's sandboxes when none of its containers exists (a
    /// first start that failed leaves nothing behind).
    pub(super) async fn drop_lone_sandbox(&self, uid: &str) {
        let Ok(apps) = self
            .find(&[(LABEL_UID, uid), (LABEL_ROLE, "container")])
            .await
        else {
            return;
        };
        if !apps.is_empty() {
            return;
        }
        if let Ok(sandboxes) = self
            .find(&[(LABEL_UID, uid), (LABEL_ROLE, "sandbox")])
            .await
        {
            for s in sandboxes {
                let _ = self
                    .stop_and_remove(s.id.as_deref().unwrap_or_default(), Duration::ZERO)
                    .await;
            }
        }
    }
}

/// A pod's sandbox as [`DockerRuntime::sandbox`] found or made it.
pub(super) enum Sandbox {
    Running { id: String, ip: String },
    Created { id: String, name: String },
}
