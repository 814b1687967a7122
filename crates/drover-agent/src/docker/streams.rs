//! Exec (with a timeout, the exit code from the exec's inspect) and logs
//! (stdout and stderr, demultiplexed to raw bytes).

use super::{engine, status_of, DockerRuntime};
use crate::runtime::{ExecOutput, LogOptions, LogStream, RuntimeError};
use bollard::errors::Error as EngineError;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::query_parameters::LogsOptions;
use futures_util::StreamExt;
use std::time::{Duration, SystemTime};

/// An exec's output is cut at this many bytes.
const EXEC_OUTPUT_MAX: usize = 10 * 1024;

impl DockerRuntime {
    /// [`crate::Runtime::exec`]. At the timeout the exec's output stream is
    /// dropped and -1 returned; the engine has no way to kill an exec, so
    /// the command may run on in the container.
    pub(super) async fn exec_in(
        &self,
        id: &str,
        cmd: Vec<String>,
        timeout: Duration,
    ) -> Result<ExecOutput, RuntimeError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let opts = CreateExecOptions {
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            cmd: Some(cmd),
            ..Default::default()
        };
        let exec_error = |e: EngineError| {
            let reason = match status_of(&e) {
                Some(404) => "ContainerNotFound",
                Some(409) => "ContainerNotRunning",
                _ => "ExecError",
            };
            engine(reason, &format!("exec in container {id}"), e)
        };
        let timed_out = |output: Vec<u8>| ExecOutput {
            exit_code: -1,
            output,
        };
        let created =
            match tokio::time::timeout_at(deadline, self.docker.create_exec(id, opts)).await {
                Ok(r) => r.map_err(exec_error)?,
                Err(_) => return Ok(timed_out(Vec::new())),
            };
        let mut output = Vec::new();
        let started = match tokio::time::timeout_at(
            deadline,
            self.docker.start_exec(&created.id, None),
        )
        .await
        {
            Ok(r) => r.map_err(exec_error)?,
            Err(_) => return Ok(timed_out(output)),
        };
        if let StartExecResults::Attached {
            output: mut stream, ..
        } = started
        {
            loop {
                match tokio::time::timeout_at(deadline, stream.next()).await {
                    Err(_) => return Ok(timed_out(output)),
                    Ok(None) => break,
                    Ok(Some(Err(e))) => return Err(exec_error(e)),
                    Ok(Some(Ok(chunk))) => {
                        let bytes = chunk.into_bytes();
                        let room = EXEC_OUTPUT_MAX.saturating_sub(output.len());
                        output.extend_from_slice(&bytes[..bytes.len().min(room)]);
                    }
                }
            }
        }
        // The output ends when the process does; its exit code follows.
        loop {
            let inspected = match tokio::time::timeout_at(
                deadline,
                self.docker.inspect_exec(&created.id),
            )
            .await
            {
                Ok(r) => r.map_err(exec_error)?,
                Err(_) => return Ok(timed_out(output)),
            };
            if inspected.running != Some(true) {
                let code = inspected.exit_code.unwrap_or(-1);
                return Ok(ExecOutput {
                    exit_code: i32::try_from(code).unwrap_or(-1),
                    output,
                });
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(timed_out(output));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// [`crate::Runtime::logs`]: checks that the container exists, then
    /// streams (lazily: nothing is asked before the first poll).
    pub(super) async fn log_stream(
        &self,
        id: &str,
        opts: LogOptions,
    ) -> Result<LogStream, RuntimeError> {
        self.docker.inspect_container(id, None).await.map_err(|e| {
            let reason = if status_of(&e) == Some(404) {
                "ContainerNotFound"
            } else {
                "LogsError"
            };
            engine(reason, &format!("logs of container {id}"), e)
        })?;
        let since = opts
            .since
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| i32::try_from(d.as_secs()).unwrap_or(i32::MAX));
        let o = LogsOptions {
            follow: opts.follow,
            stdout: true,
            stderr: true,
            since,
            until: 0,
            timestamps: opts.timestamps,
            tail: opts
                .tail
                .map_or_else(|| "all".to_string(), |n| n.to_string()),
        };
        let id = id.to_string();
        let stream = self.docker.logs(&id, Some(o)).map(move |r| {
            r.map(|chunk| chunk.into_bytes().to_vec())
                .map_err(|e| engine("LogsError", &format!("logs of container {id}"), e))
        });
        Ok(Box::pin(stream))
    }
}
