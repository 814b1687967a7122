//! Exec (with a timeout, the exit code from the exec's inspect), exec
//! sessions (stdin, TTY and resizes over the attached connection, output
//! streamed) and logs (stdout and stderr, demultiplexed to raw bytes).

use super::{engine, status_of, DockerRuntime};
use crate::runtime::{
    ExecEvent, ExecInput, ExecOutput, ExecSession, ExecSpec, LogOptions, LogStream, RuntimeError,
    EXEC_QUEUE,
};
use bollard::container::LogOutput;
use bollard::errors::Error as EngineError;
use bollard::exec::{CreateExecOptions, ResizeExecOptions, StartExecOptions, StartExecResults};
use bollard::query_parameters::LogsOptions;
use bollard::Docker;
use futures_util::StreamExt;
use std::time::{Duration, SystemTime};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio::time::Instant;

fn exec_error(id: &str) -> impl Fn(EngineError) -> RuntimeError + '_ {
    move |e: EngineError| {
        let reason = match status_of(&e) {
            Some(404) => "ContainerNotFound",
            Some(409) => "ContainerNotRunning",
            _ => "ExecError",
        };
        engine(reason, &format!("exec in container {id}"), e)
    }
}

/// The exit code of exec `exec_id` once its process ended (its output
/// ends first); `None` at the deadline.
async fn exit_code(
    docker: &Docker,
    exec_id: &str,
    id: &str,
    deadline: Instant,
) -> Result<Option<i32>, RuntimeError> {
    loop {
        let inspected = match tokio::time::timeout_at(deadline, docker.inspect_exec(exec_id)).await
        {
            Ok(r) => r.map_err(exec_error(id))?,
            Err(_) => return Ok(None),
        };
        if inspected.running != Some(true) {
            let code = inspected.exit_code.unwrap_or(-1);
            return Ok(Some(i32::try_from(code).unwrap_or(-1)));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

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
        let exec_error = exec_error(id);
        let timed_out = |output: Vec<u8>| ExecOutput {
            exit_code: -1,
            output,
        };
        let created =
            match tokio::time::timeout_at(deadline, self.docker.create_exec(id, opts)).await {
                Ok(r) => r.map_err(&exec_error)?,
                Err(_) => return Ok(timed_out(Vec::new())),
            };
        let mut output = Vec::new();
        let started = match tokio::time::timeout_at(
            deadline,
            self.docker.start_exec(&created.id, None),
        )
        .await
        {
            Ok(r) => r.map_err(&exec_error)?,
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
        match exit_code(&self.docker, &created.id, id, deadline).await? {
            Some(exit_code) => Ok(ExecOutput { exit_code, output }),
            None => Ok(timed_out(output)),
        }
    }

    /// [`crate::Runtime::exec_session`]: an exec attached to stdin (when
    /// asked) with a TTY (when asked), its output streamed by one task that
    /// also writes the input (concurrently: a command blocked on a full
    /// stdout must not block its stdin, nor the other way round). The task
    /// ends with the command, at the timeout (exit -1), or when the session
    /// is dropped; the attached connection closes with it.
    pub(super) async fn exec_session_in(
        &self,
        id: &str,
        spec: ExecSpec,
    ) -> Result<ExecSession, RuntimeError> {
        let deadline = Instant::now() + spec.timeout;
        let opts = CreateExecOptions {
            attach_stdin: Some(spec.stdin),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(spec.tty),
            cmd: Some(spec.cmd),
            ..Default::default()
        };
        let created = self
            .docker
            .create_exec(id, opts)
            .await
            .map_err(exec_error(id))?;
        let start = StartExecOptions {
            detach: false,
            tty: spec.tty,
            output_capacity: None,
        };
        let StartExecResults::Attached {
            output: mut stream,
            input: mut writer,
        } = self
            .docker
            .start_exec(&created.id, Some(start))
            .await
            .map_err(exec_error(id))?
        else {
            return Err(RuntimeError::new(
                "ExecError",
                format!("exec in container {id}: the engine did not attach"),
            ));
        };
        let (input, mut input_rx) = mpsc::channel::<ExecInput>(EXEC_QUEUE);
        let (tx, events) = mpsc::channel(EXEC_QUEUE);
        let (docker, exec_id, id) = (self.docker.clone(), created.id, id.to_string());
        let stdin = spec.stdin;
        tokio::spawn(async move {
            let write = async {
                while let Some(i) = input_rx.recv().await {
                    let done = match i {
                        ExecInput::Stdin(data) => writer.write_all(&data).await.is_err(),
                        ExecInput::Resize { width, height } => {
                            let size = ResizeExecOptions { width, height };
                            if let Err(e) = docker.resize_exec(&exec_id, size).await {
                                tracing::debug!(exec = %exec_id, "resize: {e}");
                            }
                            false
                        }
                        ExecInput::CloseStdin => {
                            let _ = writer.shutdown().await;
                            // Resizes may still come.
                            continue;
                        }
                    };
                    if done {
                        break;
                    }
                }
                // The input ended: the command's stdin is closed.
                if stdin {
                    let _ = writer.shutdown().await;
                }
                std::future::pending::<()>().await;
            };
            let read = async {
                while let Some(chunk) = stream.next().await {
                    let event = match chunk {
                        Ok(LogOutput::StdOut { message } | LogOutput::Console { message }) => {
                            Ok(ExecEvent::Stdout(message.to_vec()))
                        }
                        Ok(LogOutput::StdErr { message }) => {
                            Ok(ExecEvent::Stderr(message.to_vec()))
                        }
                        Ok(LogOutput::StdIn { .. }) => continue,
                        Err(e) => Err(exec_error(&id)(e)),
                    };
                    let end = event.is_err();
                    if tx.send(event).await.is_err() || end {
                        return;
                    }
                }
                let end = match exit_code(&docker, &exec_id, &id, deadline).await {
                    Ok(code) => Ok(ExecEvent::Exit(code.unwrap_or(-1))),
                    Err(e) => Err(e),
                };
                let _ = tx.send(end).await;
            };
            tokio::select! {
                _ = read => {}
                _ = write => {}
                _ = tokio::time::sleep_until(deadline) => {
                    let _ = tx.send(Ok(ExecEvent::Exit(-1))).await;
                }
                _ = tx.closed() => {}
            }
        });
        Ok(ExecSession { input, events })
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
