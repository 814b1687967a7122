//! Images as the pull policy says: present, pulled, or refused with the
//! kubelet's reasons (`ErrImageNeverPull`, `ErrImagePull`). A node that
//! never pulls (`--no-pull`, air-gapped fleets) runs what it has.

use super::{engine, status_of, DockerRuntime};
use crate::events::{reason, EventType};
use crate::runtime::{RuntimeError, StartContainer};
use bollard::models::ImageInspect;
use bollard::query_parameters::CreateImageOptions;
use drover_api::PullPolicy;
use futures_util::StreamExt;
use std::time::Duration;

/// Longest wait for an image pull.
const PULL_TIMEOUT: Duration = Duration::from_secs(600);

/// `repo[:tag]` or `repo@digest` split for a pull (a bare name would pull
/// every tag).
fn pull_reference(image: &str) -> (String, Option<String>) {
    if image.contains('@') {
        return (image.to_string(), None);
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, tag)) => {
            let repo = &image[..image.len() - tag.len() - 1];
            (repo.to_string(), Some(tag.to_string()))
        }
        None => (image.to_string(), Some("latest".to_string())),
    }
}

impl DockerRuntime {
    /// Makes sure the image is there as the pull policy says; returns its
    /// inspect. Notes the kubelet's events on `req` (Pulling, Pulled,
    /// Failed, ErrImageNeverPull).
    pub(super) async fn ensure_image(
        &self,
        image: &str,
        policy: &PullPolicy,
        req: &StartContainer,
    ) -> Result<ImageInspect, RuntimeError> {
        let local = match self.docker.inspect_image(image).await {
            Ok(i) => Some(i),
            Err(e) if status_of(&e) == Some(404) => None,
            Err(e) => return Err(engine("ErrImageInspect", &format!("image {image:?}"), e)),
        };
        if self.no_pull {
            return match local {
                Some(i) => {
                    req.event(
                        EventType::Normal,
                        reason::PULLED,
                        format!("Container image {image:?} already present on machine"),
                    );
                    Ok(i)
                }
                None => {
                    let msg = format!(
                        "Container image {image:?} is not present and this node never pulls (drover agent --no-pull); load or tag it on the node (docker load / docker tag)"
                    );
                    req.event(
                        EventType::Warning,
                        reason::ERR_IMAGE_NEVER_PULL,
                        msg.clone(),
                    );
                    Err(RuntimeError::new("ErrImageNeverPull", msg))
                }
            };
        }
        let pull = match (policy, &local) {
            (PullPolicy::Never, Some(_)) | (PullPolicy::IfNotPresent, Some(_)) => false,
            (PullPolicy::Never, None) => {
                req.event(
                    EventType::Warning,
                    reason::ERR_IMAGE_NEVER_PULL,
                    format!("Container image {image:?} is not present with pull policy of Never"),
                );
                return Err(RuntimeError::new(
                    "ErrImageNeverPull",
                    format!(
                        "Container image {image:?} is not present with pull policy of Never; load or tag it on the node (docker load / docker tag), or change imagePullPolicy"
                    ),
                ));
            }
            _ => true,
        };
        if !pull {
            req.event(
                EventType::Normal,
                reason::PULLED,
                format!("Container image {image:?} already present on machine"),
            );
            return local.ok_or_else(|| RuntimeError::new("ErrImageInspect", image));
        }
        req.event(
            EventType::Normal,
            reason::PULLING,
            format!("Pulling image {image:?}"),
        );
        let started = std::time::Instant::now();
        match self.pull(image).await {
            Ok(()) => req.event(
                EventType::Normal,
                reason::PULLED,
                format!(
                    "Successfully pulled image {image:?} in {:.3}s",
                    started.elapsed().as_secs_f64()
                ),
            ),
            // As the kubelet: a pull that `Always` asks for and that fails
            // fails the start, even with a copy on the node (an air-gapped
            // node says --no-pull instead).
            Err(e) => {
                req.event(EventType::Warning, reason::FAILED, e.message.clone());
                return Err(e);
            }
        }
        self.docker.inspect_image(image).await.map_err(|e| {
            engine(
                "ErrImagePull",
                &format!("image {image:?} after its pull"),
                e,
            )
        })
    }

    async fn pull(&self, image: &str) -> Result<(), RuntimeError> {
        let (repo, tag) = pull_reference(image);
        let opts = CreateImageOptions {
            from_image: Some(repo),
            tag,
            ..Default::default()
        };
        let docker = self.docker.clone().with_timeout(PULL_TIMEOUT);
        let work = async {
            let mut stream = docker.create_image(Some(opts), None, None);
            while let Some(item) = stream.next().await {
                item.map_err(|e| {
                    engine(
                        "ErrImagePull",
                        &format!("Failed to pull image {image:?}"),
                        e,
                    )
                })?;
            }
            Ok(())
        };
        tokio::time::timeout(PULL_TIMEOUT, work)
            .await
            .unwrap_or_else(|_| {
                Err(RuntimeError::new(
                    "ErrImagePull",
                    format!("Failed to pull image {image:?}: no progress within {PULL_TIMEOUT:?}"),
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_references() {
        assert_eq!(
            pull_reference("busybox"),
            ("busybox".into(), Some("latest".into()))
        );
        assert_eq!(
            pull_reference("localhost:5000/x/y:1.2"),
            ("localhost:5000/x/y".into(), Some("1.2".into()))
        );
        assert_eq!(
            pull_reference("localhost:5000/x/y"),
            ("localhost:5000/x/y".into(), Some("latest".into()))
        );
        assert_eq!(pull_reference("a@sha256:00"), ("a@sha256:00".into(), None));
    }
}
