//! Code execution inside a running session (what the official CLI's `run` needs): query mode
//! runs a snippet with the image's runtime (`ai.backend.runtime-type`), batch mode runs build
//! and exec commands in /home/work. Output streams as it comes (stdout/stderr chunks, numbered
//! so a late subscriber can replay without gaps), stdin can be written while it runs, and the
//! exit code is recorded at the end. Executions count as activity for the idle timeout.
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use chrono::Utc;
use entity::enums::SessionStatus;
use entity::sessions;
use futures_util::StreamExt;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::Value;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::events::Event;
use crate::state::AppState;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub run_id: Uuid,
    pub seq: u64,
    /// stdout, stderr, or `finished` (then `exit_code` is set).
    pub stream: &'static str,
    pub data: String,
    pub exit_code: Option<i64>,
}

#[derive(Default)]
struct RunState {
    chunks: Vec<Chunk>,
    finished: bool,
    exit_code: Option<i64>,
}

pub struct Run {
    pub id: Uuid,
    pub session_id: Uuid,
    pub owner: Uuid,
    state: Mutex<RunState>,
    input: tokio::sync::Mutex<Option<Pin<Box<dyn AsyncWrite + Send>>>>,
}

impl Run {
    fn lock(&self) -> std::sync::MutexGuard<'_, RunState> {
        match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Everything so far: chunks, whether it ended, its exit code.
    pub fn snapshot(&self) -> (Vec<Chunk>, bool, Option<i64>) {
        let s = self.lock();
        (s.chunks.clone(), s.finished, s.exit_code)
    }

    fn push(&self, state: &AppState, stream: &'static str, data: String, exit_code: Option<i64>) {
        let chunk = {
            let mut s = self.lock();
            let chunk = Chunk {
                run_id: self.id,
                seq: s.chunks.len() as u64,
                stream,
                data,
                exit_code,
            };
            s.chunks.push(chunk.clone());
            if stream == "finished" {
                s.finished = true;
                s.exit_code = exit_code;
            }
            chunk
        };
        state.events.publish(Event::Exec(chunk));
    }

    /// Writes to the program's standard input.
    pub async fn send_input(&self, data: &str) -> ApiResult<()> {
        let mut input = self.input.lock().await;
        let w = input.as_mut().ok_or_else(|| {
            ApiError::bad_request("The execution has finished; it reads no more input")
        })?;
        w.write_all(data.as_bytes())
            .await
            .map_err(|e| ApiError::bad_request(format!("could not send input: {e}")))?;
        w.flush()
            .await
            .map_err(|e| ApiError::bad_request(format!("could not send input: {e}")))
    }
}

/// Recent executions, by run id.
#[derive(Default)]
pub struct Runs {
    runs: Mutex<HashMap<Uuid, Arc<Run>>>,
}

impl Runs {
    pub fn get(&self, id: Uuid) -> Option<Arc<Run>> {
        self.lock().get(&id).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Arc<Run>>> {
        match self.runs.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    fn insert(&self, run: Arc<Run>) {
        let mut runs = self.lock();
        if runs.len() > 1000 {
            runs.retain(|_, r| !r.lock().finished);
        }
        runs.insert(run.id, run);
    }
}

fn option(options: &Value, key: &str) -> Option<String> {
    options
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .filter(|s| !s.trim().is_empty())
}

/// The command for `mode` on an image whose runtime is `runtime` (`python`, `cpp`, …).
pub fn command(
    runtime: &str,
    runtime_path: &str,
    mode: &str,
    code: &str,
    options: &Value,
) -> ApiResult<Vec<String>> {
    let sh = |script: String| vec!["/bin/bash".to_string(), "-c".to_string(), script];
    match mode {
        "query" => match runtime {
            "python" => Ok(vec![if runtime_path.is_empty() { "python3".into() } else { runtime_path.to_string() }, "-c".into(), code.to_string()]),
            "cpp" => Ok(vec![
                "/bin/bash".into(),
                "-c".into(),
                "printf '%s' \"$1\" > /tmp/bai-query.cpp && g++ -o /tmp/bai-query /tmp/bai-query.cpp && /tmp/bai-query".into(),
                "bai-query".into(),
                code.to_string(),
            ]),
            _ => Ok(sh(code.to_string())),
        },
        "batch" => {
            // "*" means the runtime's default, as Backend.AI's runners do.
            let default_build = if runtime == "cpp" { "g++ -o main *.cpp" } else { "" };
            let default_exec = match runtime {
                "python" => "python3 main.py",
                "cpp" => "./main",
                _ => "",
            };
            let pick = |key: &str, default: &str| match option(options, key) {
                Some(v) if v == "*" => default.to_string(),
                Some(v) => v,
                None => String::new(),
            };
            let build = pick("build", default_build);
            let exec = pick("exec", default_exec);
            let steps: Vec<String> = [build, exec].into_iter().filter(|s| !s.trim().is_empty()).collect();
            if steps.is_empty() {
                return Err(ApiError::bad_request("batch mode needs a build or exec command in options"));
            }
            Ok(sh(steps.join(" && ")))
        }
        other => Err(ApiError::bad_request(format!("unknown execution mode '{other}' (query or batch)"))),
    }
}

/// Starts an execution in a running session; returns the run at once.
pub async fn start(
    state: &AppState,
    session: &sessions::Model,
    mode: &str,
    code: &str,
    options: &Value,
) -> ApiResult<Arc<Run>> {
    if session.status != SessionStatus::Running {
        return Err(ApiError::bad_request(format!(
            "Session '{}' is not running ({})",
            session.name, session.status
        )));
    }
    if code.len() > 1024 * 1024 {
        return Err(ApiError::bad_request("The code is larger than 1 MiB"));
    }
    let k = super::main_kernel(&state.db, session.id).await?;
    let (agent, container) = super::container_of(state, &k).await?;
    let image = crate::images::resolve(&state.db, &k.image, Some(&k.architecture)).await?;
    let label = |key: &str| {
        image
            .labels
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let cmd = command(
        &label("ai.backend.runtime-type"),
        &label("ai.backend.runtime-path"),
        mode,
        code,
        options,
    )?;
    let crate::agents::docker::AttachedExec {
        id: exec_id,
        mut output,
        input,
    } = agent
        .attach_exec(&container, cmd, false, Vec::new())
        .await?;
    let run = Arc::new(Run {
        id: Uuid::new_v4(),
        session_id: session.id,
        owner: session.user_uuid,
        state: Mutex::new(RunState::default()),
        input: tokio::sync::Mutex::new(Some(input)),
    });
    state.exec_runs.insert(run.clone());
    touch(state, session.id).await;
    let (task_state, task_run) = (state.clone(), run.clone());
    tokio::spawn(async move {
        while let Some(item) = output.next().await {
            match item {
                Ok(bollard::container::LogOutput::StdErr { message }) => task_run.push(
                    &task_state,
                    "stderr",
                    String::from_utf8_lossy(&message).into_owned(),
                    None,
                ),
                Ok(out) => task_run.push(
                    &task_state,
                    "stdout",
                    String::from_utf8_lossy(&out.into_bytes()).into_owned(),
                    None,
                ),
                Err(e) => {
                    task_run.push(
                        &task_state,
                        "stderr",
                        format!("[execution stream error: {e}]\n"),
                        None,
                    );
                    break;
                }
            }
        }
        *task_run.input.lock().await = None;
        let code = agent
            .docker
            .inspect_exec(&exec_id)
            .await
            .ok()
            .and_then(|i| i.exit_code);
        task_run.push(&task_state, "finished", String::new(), code);
        touch(&task_state, task_run.session_id).await;
    });
    Ok(run)
}

/// Marks the session as used now (idle timeout).
pub async fn touch(state: &AppState, session: Uuid) {
    let _ = sessions::Entity::update_many()
        .col_expr(
            sessions::Column::LastActivity,
            sea_orm::sea_query::Expr::value(Utc::now()),
        )
        .filter(sessions::Column::Id.eq(session))
        .exec(&state.db)
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_per_runtime() {
        let none = serde_json::json!({});
        assert_eq!(
            command("python", "/usr/bin/python3", "query", "print(1)", &none).unwrap(),
            ["/usr/bin/python3", "-c", "print(1)"]
        );
        let cpp = command("cpp", "/usr/bin/g++", "query", "int main(){}", &none).unwrap();
        assert_eq!(
            cpp.last().unwrap(),
            "int main(){}",
            "code passed as an argument, never spliced into the script"
        );
        let batch = command(
            "python",
            "",
            "batch",
            "",
            &serde_json::json!({"build": "*", "exec": "python x.py a b"}),
        )
        .unwrap();
        assert_eq!(batch[2], "python x.py a b");
        let defaults = command(
            "cpp",
            "",
            "batch",
            "",
            &serde_json::json!({"build": "*", "exec": "*"}),
        )
        .unwrap();
        assert_eq!(defaults[2], "g++ -o main *.cpp && ./main");
        assert!(command("python", "", "batch", "", &none).is_err());
        assert!(command("python", "", "repl", "", &none).is_err());
    }
}
