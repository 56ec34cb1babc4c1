//! Code execution inside a running session (what the official CLI's `run` needs): query mode
//! runs a snippet with the image's runtime (`ai.backend.runtime-type`), batch mode runs build
//! and exec commands in /home/work. Output streams as it comes (stdout/stderr chunks, numbered
//! so a late subscriber can replay without gaps), stdin can be written while it runs, and the
//! exit code is recorded at the end. Executions count as activity for the idle timeout. What is
//! kept of a run, and how it is bounded, is `runs`; across managers, `shared`.
use std::pin::Pin;
use std::sync::Arc;

use entity::enums::SessionStatus;
use entity::sessions;
use futures_util::StreamExt;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::Value;
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::store::Runtime;

pub mod runs;
mod shared;

pub use runs::{Chunk, FINISHED_TTL, MAX_OUTPUT_BYTES, MAX_RUNS, MAX_RUNS_PER_USER, Run, Runs};

/// An execution found by its id, wherever it runs: in this process (its output in memory), or
/// through another manager on the same database (its output as that manager copied it there,
/// at most [`shared::COPY_EVERY`] behind).
pub struct Exec {
    pub id: Uuid,
    pub session_id: Uuid,
    pub owner: Uuid,
    local: Option<Arc<Run>>,
}

/// The stream of an execution's output (see [`Run::follow`]).
pub type Output = Pin<Box<dyn futures_util::Stream<Item = Chunk> + Send + 'static>>;

/// The execution `id`, if this process or (several managers) any other keeps it.
pub async fn find(state: &impl Runtime, id: Uuid) -> ApiResult<Option<Exec>> {
    if let Some(run) = state.exec_runs().get(id) {
        return Ok(Some(Exec::local(run)));
    }
    if !state.cluster().is_shared() {
        return Ok(None);
    }
    Ok(shared::header(state, id).await?.map(|h| Exec {
        id,
        session_id: h.session_id,
        owner: h.owner,
        local: None,
    }))
}

impl Exec {
    fn local(run: Arc<Run>) -> Self {
        Self {
            id: run.id,
            session_id: run.session_id,
            owner: run.owner,
            local: Some(run),
        }
    }

    /// What is kept so far, whether it ended, its exit code.
    pub async fn snapshot(
        &self,
        state: &impl Runtime,
    ) -> ApiResult<(Vec<Chunk>, bool, Option<i64>)> {
        match &self.local {
            Some(run) => Ok(run.snapshot()),
            None => {
                let h = shared::header(state, self.id)
                    .await?
                    .ok_or_else(|| ApiError::not_found("execution", self.id))?;
                let (chunks, _) = shared::since(state, self.id, &h, 0).await?;
                Ok((chunks, h.finished, h.exit_code))
            }
        }
    }

    /// Backend.AI's execute over HTTP (see [`Run::poll`]). With several managers the read
    /// position is the database's, so polls through different managers read on from each
    /// other.
    pub async fn poll(
        &self,
        state: &impl Runtime,
        wait: std::time::Duration,
    ) -> ApiResult<(Vec<Chunk>, bool, Option<i64>)> {
        match &self.local {
            Some(run) if !state.cluster().is_shared() => Ok(run.poll(wait).await),
            Some(run) => {
                run.wait_finished(wait).await;
                shared::poll(state, self.id, Some(run)).await
            }
            None => {
                shared::wait_finished(state, self.id, wait).await?;
                shared::poll(state, self.id, None).await
            }
        }
    }

    /// Writes to the program's standard input (through the manager running it).
    pub async fn send_input(&self, state: &impl Runtime, data: &str) -> ApiResult<()> {
        match &self.local {
            Some(run) => run.send_input(data).await,
            None => shared::send_input(state, self.id, data).await,
        }
    }

    /// The output from the start (as kept), then live until the `finished` chunk.
    pub fn follow(&self, state: &impl Runtime) -> Output {
        match &self.local {
            Some(run) => Box::pin(run.clone().follow()),
            None => Box::pin(shared::follow(state.clone(), self.id)),
        }
    }
}

fn option(options: &Value, key: &str) -> Option<String> {
    options
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .filter(|s| !s.trim().is_empty())
}

/// Python's query mode as Backend.AI's runs it (on a Python kernel): the value of a last
/// expression is shown (`1 + 1` answers `2`), an exception's traceback goes to stderr with exit
/// code 1, and `SystemExit` ends the run with its code, its traceback on stderr too. The
/// user's code is this program's argument, never part of its text; its frames alone are shown.
const PYTHON_QUERY: &str = r#"import ast, sys, traceback
def report(e, code):
    if isinstance(e, SyntaxError):
        sys.stderr.write("".join(traceback.format_exception_only(type(e), e)))
    else:
        sys.stderr.write("".join(traceback.format_exception(type(e), e, e.__traceback__.tb_next)))
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)
ns = {"__name__": "__main__", "__builtins__": __builtins__}
try:
    tree = ast.parse(sys.argv[1], "<query>", "exec")
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<query>", "exec"), ns)
    if last is not None:
        value = eval(compile(ast.Expression(last.value), "<query>", "eval"), ns)
        if value is not None:
            sys.stdout.write(repr(value))
except SystemExit as e:
    report(e, 0 if e.code is None else e.code if isinstance(e.code, int) else 1)
except BaseException as e:
    report(e, 1)
"#;

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
            "python" => Ok(vec![
                if runtime_path.is_empty() { "python3".into() } else { runtime_path.to_string() },
                "-c".into(),
                PYTHON_QUERY.into(),
                code.to_string(),
            ]),
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

/// Starts an execution in a running session; returns the run at once (this process runs it).
pub async fn start(
    state: &impl Runtime,
    session: &sessions::Model,
    mode: &str,
    code: &str,
    options: &Value,
) -> ApiResult<Exec> {
    if session.status != SessionStatus::Running {
        return Err(ApiError::bad_request(format!(
            "Session '{}' is not running ({})",
            session.name, session.status
        )));
    }
    if code.len() > 1024 * 1024 {
        return Err(ApiError::bad_request("The code is larger than 1 MiB"));
    }
    let k = super::kernels::main_kernel(state.db(), session.id).await?;
    let (agent, container) = super::kernels::container_of(state, &k).await?;
    let image = crate::images::resolve(state.db(), &k.image, Some(&k.architecture)).await?;
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
    let run_id = Uuid::new_v4();
    let shared = state.cluster().is_shared();
    if shared {
        // Before the program starts: its output has a place the moment it comes.
        shared::register(state, run_id, session).await?;
    }
    let attached = agent.attach_exec(&container, cmd, false, Vec::new()).await;
    let bai_engine::AttachedExec {
        id: exec_id,
        mut output,
        input,
    } = match attached {
        Ok(a) => a,
        Err(e) => {
            if shared {
                shared::forget(state, run_id).await;
            }
            return Err(e.into());
        }
    };
    let run = Arc::new(Run::new(run_id, session.id, session.user_uuid, Some(input)));
    if let Err(e) = state.exec_runs().insert(run.clone()) {
        if shared {
            shared::forget(state, run_id).await;
        }
        return Err(e);
    }
    if shared {
        tokio::spawn(shared::mirror(state.clone(), run.clone()));
    }
    touch(state, session.id).await;
    let (task_state, task_run) = (state.clone(), run.clone());
    tokio::spawn(async move {
        while let Some(item) = output.next().await {
            match item {
                Ok(bai_engine::ExecOutput::Stderr(message)) => task_run.push(
                    "stderr",
                    String::from_utf8_lossy(&message).into_owned(),
                    None,
                ),
                Ok(bai_engine::ExecOutput::Stdout(out)) => {
                    task_run.push("stdout", String::from_utf8_lossy(&out).into_owned(), None)
                }
                Err(e) => {
                    task_run.push(
                        "stderr",
                        {
                            let reference = Uuid::new_v4();
                            tracing::warn!(%reference, error = ?e, "execution output stream failed");
                            format!("[the output stream broke off (reference {reference})]\n")
                        },
                        None,
                    );
                    break;
                }
            }
        }
        *task_run.input.lock().await = None;
        let code = agent.exec_exit_code(&exec_id).await;
        task_run.push("finished", String::new(), code);
        touch(&task_state, task_run.session_id).await;
    });
    Ok(Exec::local(run))
}

/// The leader's cleanup of executions copied to the database (several managers).
pub async fn expire_shared(state: &impl Runtime) -> ApiResult<()> {
    shared::expire(state.db(), state.cluster().ttl() * 2).await
}

/// Marks the session as used now (idle timeout).
pub async fn touch(state: &impl Runtime, session: Uuid) {
    let touched = sessions::Entity::update_many()
        .col_expr(
            sessions::Column::LastActivity,
            sea_orm::sea_query::Expr::value(state.clock().now()),
        )
        .filter(sessions::Column::Id.eq(session))
        .exec(state.db())
        .await;
    // Activity is advisory (the idle reaper reads it): a missed write only makes the session
    // look idle a little earlier, so it is logged, not returned.
    if let Err(e) = touched {
        tracing::warn!(session = %session, error = %e, "recording session activity failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The query runner on this machine's Python: (stdout, stderr, exit code).
    fn query(code: &str) -> (String, String, i32) {
        let out = std::process::Command::new("python3")
            .args(["-c", PYTHON_QUERY, code])
            .output()
            .expect("python3 runs");
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            out.status.code().unwrap_or(-1),
        )
    }

    #[test]
    fn python_query_mode_answers_as_a_python_kernel() {
        assert_eq!(
            query("print('Hello, world!')"),
            ("Hello, world!\n".into(), String::new(), 0)
        );
        assert_eq!(query("x = 20\nx + 22"), ("42".into(), String::new(), 0));
        assert_eq!(query("None"), (String::new(), String::new(), 0));
        let (out, err, code) = query("import sys; print('before'); sys.exit(2)");
        assert_eq!((out.as_str(), code), ("before\n", 2));
        assert!(err.contains("SystemExit: 2"), "{err}");
        let (_, err, code) = query("some wrong command !@#");
        assert_eq!(code, 1);
        assert!(
            err.contains("SyntaxError") && !err.contains("Traceback"),
            "{err}"
        );
        // Only the user's frames: none of the runner's.
        let (_, err, code) = query("def f():\n    return 1 / 0\nf()");
        assert_eq!(code, 1);
        assert!(
            err.contains("ZeroDivisionError") && err.contains("<query>"),
            "{err}"
        );
        assert!(!err.contains("<string>"), "{err}");
        let (_, err, code) = query("raise SystemExit('bye')");
        assert_eq!(code, 1);
        assert!(err.contains("SystemExit: bye"), "{err}");
        // The code is an argument: quotes and the runner's own names change nothing.
        assert_eq!(query("report = 1\nsys = 2\nprint(\"'\\\"\")").0, "'\"\n");
    }

    #[test]
    fn commands_per_runtime() {
        let none = serde_json::json!({});
        assert_eq!(
            command("python", "/usr/bin/python3", "query", "print(1)", &none).unwrap(),
            ["/usr/bin/python3", "-c", PYTHON_QUERY, "print(1)"]
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
