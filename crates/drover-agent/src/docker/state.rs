//! The engine's container state (`docker inspect`'s `State`) as a
//! [`RunState`] (pure).

use crate::runtime::RunState;
use bollard::models::{ContainerState, ContainerStateStatusEnum};
use std::time::SystemTime;

/// Docker's "never" (`0001-01-01T00:00:00Z`) and anything unreadable are
/// `None`.
pub(crate) fn parse_time(text: Option<&str>) -> Option<SystemTime> {
    let t = text?;
    if t.starts_with("0001-") {
        return None;
    }
    humantime::parse_rfc3339(t).ok()
}

/// The Kubernetes reason of an exit: `OOMKilled` when the engine saw the
/// kernel's OOM killer, `Completed` for 0, else `Error`.
pub(crate) fn exit_reason(exit_code: i32, oom_killed: bool) -> &'static str {
    if oom_killed {
        "OOMKilled"
    } else if exit_code == 0 {
        "Completed"
    } else {
        "Error"
    }
}

/// The state of a container. `starting` says whether the agent is
/// creating/starting it right now: a container left `created` otherwise
/// never ran (its start failed or its agent died before starting it), and
/// is reported as exited with 128, `ContainerCannotRun`, so that it gets
/// restarted. `now` stands in for a time the engine did not give.
pub(crate) fn run_state(s: &ContainerState, starting: bool, now: SystemTime) -> RunState {
    let started = parse_time(s.started_at.as_deref());
    let exit_code = s
        .exit_code
        .map(|c| i32::try_from(c).unwrap_or(i32::MAX))
        .unwrap_or(0);
    match s.status {
        Some(ContainerStateStatusEnum::RUNNING)
        | Some(ContainerStateStatusEnum::PAUSED)
        | Some(ContainerStateStatusEnum::RESTARTING) => RunState::Running {
            started_at: started.unwrap_or(now),
        },
        Some(ContainerStateStatusEnum::CREATED) | Some(ContainerStateStatusEnum::EMPTY) | None
            if starting =>
        {
            RunState::Creating
        }
        Some(ContainerStateStatusEnum::CREATED) | Some(ContainerStateStatusEnum::EMPTY) | None => {
            RunState::Exited {
                exit_code: if exit_code == 0 { 128 } else { exit_code },
                reason: "ContainerCannotRun".into(),
                started_at: None,
                finished_at: parse_time(s.finished_at.as_deref()).unwrap_or(now),
            }
        }
        _ => {
            let oom = s.oom_killed.unwrap_or(false);
            let error = s.error.as_deref().unwrap_or("");
            let reason = if started.is_none() && !error.is_empty() {
                "ContainerCannotRun"
            } else {
                exit_reason(exit_code, oom)
            };
            let finished_at = parse_time(s.finished_at.as_deref()).unwrap_or(now);
            RunState::Exited {
                exit_code,
                reason: reason.into(),
                // The engine may stamp a process that exits at once as
                // started after it finished.
                started_at: started.map(|t| t.min(finished_at)),
                finished_at,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn state(status: ContainerStateStatusEnum, exit: i64, oom: bool) -> ContainerState {
        ContainerState {
            status: Some(status),
            exit_code: Some(exit),
            oom_killed: Some(oom),
            started_at: Some("2024-05-01T10:00:00.123456789Z".into()),
            finished_at: Some("2024-05-01T10:00:05Z".into()),
            ..Default::default()
        }
    }

    #[test]
    fn states_map_to_kubernetes_terms() {
        let now = SystemTime::UNIX_EPOCH;
        let t0 = humantime::parse_rfc3339("2024-05-01T10:00:00Z").unwrap();
        match run_state(
            &state(ContainerStateStatusEnum::RUNNING, 0, false),
            false,
            now,
        ) {
            RunState::Running { started_at } => {
                assert_eq!(started_at, t0 + Duration::from_nanos(123_456_789))
            }
            other => panic!("{other:?}"),
        }
        let exited = |code, oom| match run_state(
            &state(ContainerStateStatusEnum::EXITED, code, oom),
            false,
            now,
        ) {
            RunState::Exited {
                exit_code,
                reason,
                started_at,
                finished_at,
            } => {
                assert_eq!(started_at.map(|_| ()), Some(()));
                assert_eq!(finished_at, t0 + Duration::from_secs(5));
                (exit_code, reason)
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(exited(0, false), (0, "Completed".into()));
        assert_eq!(exited(1, false), (1, "Error".into()));
        assert_eq!(exited(137, true), (137, "OOMKilled".into()));
        let created = ContainerState {
            status: Some(ContainerStateStatusEnum::CREATED),
            started_at: Some("0001-01-01T00:00:00Z".into()),
            ..Default::default()
        };
        assert_eq!(run_state(&created, true, now), RunState::Creating);
        assert!(matches!(
            run_state(&created, false, now),
            RunState::Exited { exit_code: 128, ref reason, started_at: None, .. } if reason == "ContainerCannotRun"
        ));
        let mut quick = state(ContainerStateStatusEnum::EXITED, 0, false);
        quick.started_at = Some("2024-05-01T10:00:06Z".into());
        assert!(matches!(
            run_state(&quick, false, now),
            RunState::Exited { started_at: Some(s), finished_at, .. } if s == finished_at
        ));
        assert_eq!(parse_time(Some("0001-01-01T00:00:00Z")), None);
        assert_eq!(parse_time(Some("garbage")), None);
    }
}
