//! Backend.AI's model definition (`model-definition.yaml` in a model folder): the models, where
//! each lives in the container, and the service that serves it (start command, port, health
//! check). Keys may be snake_case or kebab-case; unknown keys are kept out. Pure: the file's
//! text in, a checked definition out.
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};

/// The largest definition file read.
pub const MAX_DEFINITION_BYTES: usize = 64 * 1024;
/// The most models one definition may list.
pub const MAX_MODELS: usize = 16;
/// The longest one health probe may wait, seconds.
pub const MAX_PROBE_WAIT: f64 = 60.0;
/// Ports the kernel runner of Backend.AI keeps for itself.
const RESERVED_PORTS: [u16; 2] = [2000, 2001];

/// The definition files looked for when the request names none.
pub const DEFAULT_PATHS: [&str; 2] = ["model-definition.yaml", "model-definition.yml"];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Definition {
    pub models: Vec<ModelDef>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelDef {
    pub name: String,
    /// Where the model is in the container; the service's working directory.
    pub model_path: String,
    pub service: Option<Service>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Service {
    /// The command as given: one string (run by `shell`), or a list (joined for `shell`, or
    /// run as it is without one). `{model_path}` is replaced by the model's path.
    pub start_command: Vec<String>,
    /// Whether `start_command` was one string.
    pub command_is_text: bool,
    /// `/bin/bash` unless the definition says otherwise; None: no shell.
    pub shell: Option<String>,
    pub port: u16,
    pub health_check: Option<HealthCheck>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthCheck {
    pub path: String,
    /// Seconds between probes.
    pub interval: f64,
    /// Failed probes in a row before the route is unhealthy.
    pub max_retries: u32,
    /// Seconds one probe may take.
    pub max_wait_time: f64,
    pub expected_status_code: u16,
    /// Seconds a starting replica has to pass its first probe.
    pub initial_delay: f64,
}

impl Definition {
    /// The model whose service the endpoint routes to: the first with a service.
    pub fn served(&self) -> Option<(&ModelDef, &Service)> {
        self.models
            .iter()
            .find_map(|m| m.service.as_ref().map(|s| (m, s)))
    }
}

impl Service {
    /// The process to run for `model_path` (argv).
    pub fn argv(&self, model_path: &str) -> Vec<String> {
        let fill = |s: &String| s.replace("{model_path}", model_path);
        let parts: Vec<String> = self.start_command.iter().map(fill).collect();
        match &self.shell {
            Some(shell) => {
                let text = if self.command_is_text {
                    parts.join(" ")
                } else {
                    shell_join(&parts)
                };
                vec![shell.clone(), "-c".into(), text]
            }
            None => parts,
        }
    }
}

/// Words joined for a POSIX shell, each quoted unless it is plainly safe.
pub fn shell_join(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            let safe = !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c));
            if safe {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Backend.AI's answer to a definition it cannot read.
fn unreadable(why: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("Failed to read the model definition file: {why}"))
        .with_error_code("model-deployment_read_invalid-data-format")
}

/// Backend.AI's answer to a definition that is read but wrong.
fn invalid(why: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("Model definition validation failed: {why}"))
        .with_error_code("model-service_parsing_invalid-parameters")
}

/// The definition in `text` (YAML, or TOML when `path` ends in `.toml`), its models' paths
/// defaulting to `mount_destination`.
pub fn parse(path: &str, text: &str, mount_destination: &str) -> ApiResult<Definition> {
    if text.len() > MAX_DEFINITION_BYTES {
        return Err(unreadable(format!(
            "it is larger than {} KiB",
            MAX_DEFINITION_BYTES / 1024
        )));
    }
    let value: Value = if path.ends_with(".toml") {
        let t: toml::Value = toml::from_str(text).map_err(unreadable)?;
        serde_json::to_value(t).map_err(unreadable)?
    } else {
        serde_yaml_ng::from_str(text).map_err(unreadable)?
    };
    let top = value
        .as_object()
        .ok_or_else(|| unreadable("its top level is not a mapping"))?;
    let top = snake(top);
    let models = match top.get("models") {
        Some(Value::Array(list)) => list,
        Some(_) => return Err(invalid("'models' must be a list")),
        None => return Err(invalid("'models' is missing")),
    };
    if models.is_empty() {
        return Err(invalid("'models' lists no model"));
    }
    if models.len() > MAX_MODELS {
        return Err(invalid(format!("at most {MAX_MODELS} models")));
    }
    let models = models
        .iter()
        .map(|m| model(m, mount_destination))
        .collect::<ApiResult<Vec<_>>>()?;
    let d = Definition { models };
    if d.served().is_none() {
        return Err(invalid(
            "no model has a 'service' (with its start command and port)",
        ));
    }
    Ok(d)
}

/// `kebab-case` keys as `snake_case` (one level).
fn snake(m: &Map<String, Value>) -> Map<String, Value> {
    m.iter()
        .map(|(k, v)| (k.replace('-', "_"), v.clone()))
        .collect()
}

fn text_of(m: &Map<String, Value>, key: &str) -> ApiResult<Option<String>> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(format!("'{key}' must be text"))),
    }
}

fn model(v: &Value, mount_destination: &str) -> ApiResult<ModelDef> {
    let m = v
        .as_object()
        .map(snake)
        .ok_or_else(|| invalid("each model must be a mapping"))?;
    let name = text_of(&m, "name")?
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| invalid("a model has no 'name'"))?;
    if name.len() > 256 {
        return Err(invalid("a model's name is longer than 256 characters"));
    }
    let model_path = text_of(&m, "model_path")?.unwrap_or_else(|| mount_destination.to_string());
    if !model_path.starts_with('/') || model_path.contains('\0') || model_path.len() > 1024 {
        return Err(invalid(format!(
            "model '{name}': model_path must be an absolute path"
        )));
    }
    let service = match m.get("service") {
        None | Some(Value::Null) => None,
        Some(s) => Some(service(&name, s)?),
    };
    Ok(ModelDef {
        name,
        model_path,
        service,
    })
}

fn number(m: &Map<String, Value>, key: &str, default: f64, what: &str) -> ApiResult<f64> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_f64()
            .filter(|n| n.is_finite() && *n >= 0.0 && *n <= 86_400.0)
            .ok_or_else(|| invalid(format!("{what}: '{key}' must be a number of seconds"))),
    }
}

fn service(model: &str, v: &Value) -> ApiResult<Service> {
    let what = format!("model '{model}'");
    let s = v
        .as_object()
        .map(snake)
        .ok_or_else(|| invalid(format!("{what}: 'service' must be a mapping")))?;
    match s.get("pre_start_actions") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.is_empty() => {}
        Some(_) => {
            return Err(invalid(format!(
                "{what}: pre_start_actions are not supported by bai; do that work in the start command"
            )));
        }
    }
    let command = s.get("start_command").or_else(|| s.get("command"));
    let (start_command, command_is_text) = match command {
        Some(Value::String(c)) if !c.trim().is_empty() => (vec![c.clone()], true),
        Some(Value::Array(words)) if !words.is_empty() => (
            words
                .iter()
                .map(|w| match w {
                    Value::String(s) => Ok(s.clone()),
                    Value::Number(n) => Ok(n.to_string()),
                    _ => Err(invalid(format!(
                        "{what}: start_command's words must be text"
                    ))),
                })
                .collect::<ApiResult<Vec<_>>>()?,
            false,
        ),
        _ => {
            return Err(invalid(format!(
                "{what}: the service needs a 'start_command' (bai does not run an image's own command)"
            )));
        }
    };
    if start_command.iter().any(|w| w.contains('\0')) || start_command.concat().len() > 16 * 1024 {
        return Err(invalid(format!(
            "{what}: start_command is too long or holds a NUL"
        )));
    }
    let shell = match s.get("shell") {
        None => Some("/bin/bash".to_string()),
        Some(Value::Null) => None,
        Some(Value::String(sh)) if sh.is_empty() => None,
        Some(Value::String(sh)) if sh.starts_with('/') && !sh.contains('\0') => Some(sh.clone()),
        Some(_) => return Err(invalid(format!("{what}: 'shell' must be an absolute path"))),
    };
    let port = s
        .get("port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 1)
        .ok_or_else(|| invalid(format!("{what}: the service needs a 'port' (2 to 65535)")))?;
    if RESERVED_PORTS.contains(&port) {
        return Err(invalid(format!("{what}: ports 2000 and 2001 are reserved")));
    }
    let health_check = match s.get("health_check") {
        None | Some(Value::Null) => None,
        Some(Value::Object(h)) if h.is_empty() => None,
        Some(Value::Object(h)) => health(&what, &snake(h))?,
        Some(_) => return Err(invalid(format!("{what}: 'health_check' must be a mapping"))),
    };
    Ok(Service {
        start_command,
        command_is_text,
        shell,
        port,
        health_check,
    })
}

fn health(what: &str, h: &Map<String, Value>) -> ApiResult<Option<HealthCheck>> {
    let enable = match h.get("enable") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(invalid(format!(
                "{what}: health_check.enable must be true or false"
            )));
        }
    };
    if !enable {
        return Ok(None);
    }
    let path = text_of(h, "path")?.unwrap_or_else(|| "/health".into());
    let path_ok = path.starts_with('/')
        && path.len() <= 1024
        && !path.chars().any(|c| c.is_control() || c.is_whitespace());
    if !path_ok {
        return Err(invalid(format!(
            "{what}: health_check.path must be a path starting with '/'"
        )));
    }
    let max_retries = match h.get("max_retries") {
        None | Some(Value::Null) => 10,
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| (1..=1000).contains(n))
            .ok_or_else(|| {
                invalid(format!(
                    "{what}: health_check.max_retries must be 1 to 1000"
                ))
            })?,
    };
    let expected_status_code = match h.get("expected_status_code") {
        None | Some(Value::Null) => 200,
        Some(v) => v
            .as_u64()
            .and_then(|n| u16::try_from(n).ok())
            .filter(|n| (101..=599).contains(n))
            .ok_or_else(|| {
                invalid(format!(
                    "{what}: health_check.expected_status_code must be an HTTP status"
                ))
            })?,
    };
    let interval = number(h, "interval", 10.0, what)?.max(0.5);
    Ok(Some(HealthCheck {
        path,
        interval,
        max_retries,
        // One probe waits a minute at most, whatever the definition asks.
        max_wait_time: number(h, "max_wait_time", 15.0, what)?.clamp(0.1, MAX_PROBE_WAIT),
        expected_status_code,
        // Never shorter than one interval: a replica gets at least one chance to answer.
        initial_delay: number(h, "initial_delay", 60.0, what)?.max(interval),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_testers_definition_reads() {
        let d = parse(
            "model-definition.yaml",
            "models:\n  - name: tester-model\n    model_path: /models\n    service:\n      start_command: [\"python3\", \"-m\", \"http.server\", \"8000\"]\n      port: 8000\n",
            "/models",
        )
        .unwrap();
        let (m, s) = d.served().unwrap();
        assert_eq!(m.name, "tester-model");
        assert_eq!(s.port, 8000);
        assert_eq!(s.health_check, None);
        assert_eq!(
            s.argv(&m.model_path),
            ["/bin/bash", "-c", "python3 -m http.server 8000"]
        );
    }

    #[test]
    fn kebab_keys_defaults_and_health_checks() {
        let d = parse(
            "x.yml",
            "models:\n- name: m\n  service:\n    start-command: serve --dir {model_path}\n    shell: null\n    port: 9000\n    health-check:\n      path: /ready\n      max-retries: 3\n",
            "/data",
        )
        .unwrap();
        let (m, s) = d.served().unwrap();
        assert_eq!(m.model_path, "/data");
        assert_eq!(s.argv(&m.model_path), ["serve --dir /data"]);
        let h = s.health_check.as_ref().unwrap();
        assert_eq!(
            (h.path.as_str(), h.max_retries, h.expected_status_code),
            ("/ready", 3, 200)
        );
        assert_eq!(h.interval, 10.0);
        // `enable: false` or an empty block: no check.
        let off = parse(
            "x.yaml",
            "models: [{name: m, service: {start_command: [a], port: 80, health_check: {enable: false, path: /x}}}]",
            "/models",
        )
        .unwrap();
        assert_eq!(off.served().unwrap().1.health_check, None);
    }

    #[test]
    fn list_commands_are_quoted_for_the_shell() {
        let s = Service {
            start_command: vec![
                "echo".into(),
                "a b".into(),
                "it's".into(),
                "$(reboot)".into(),
            ],
            command_is_text: false,
            shell: Some("/bin/sh".into()),
            port: 80,
            health_check: None,
        };
        assert_eq!(
            s.argv("/m"),
            ["/bin/sh", "-c", "echo 'a b' 'it'\\''s' '$(reboot)'"]
        );
    }

    #[test]
    fn bad_definitions_get_backend_ais_codes() {
        let code = |text: &str| {
            parse("d.yaml", text, "/models")
                .unwrap_err()
                .backend_ai_error_code()
        };
        assert_eq!(
            code("models: [unclosed"),
            "model-deployment_read_invalid-data-format"
        );
        assert_eq!(
            code("- just a list"),
            "model-deployment_read_invalid-data-format"
        );
        assert_eq!(
            code("models: []"),
            "model-service_parsing_invalid-parameters"
        );
        assert_eq!(
            code("models: [{name: m}]"),
            "model-service_parsing_invalid-parameters"
        );
        assert_eq!(
            code("models: [{name: m, service: {start_command: x, port: 2000}}]"),
            "model-service_parsing_invalid-parameters"
        );
        assert_eq!(
            code("models: [{name: m, service: {start_command: x}}]"),
            "model-service_parsing_invalid-parameters"
        );
        assert_eq!(
            code("models: [{name: m, model_path: rel, service: {start_command: x, port: 80}}]"),
            "model-service_parsing_invalid-parameters"
        );
        assert_eq!(
            code(
                "models: [{name: m, service: {start_command: x, port: 80, pre_start_actions: [{action: log}]}}]"
            ),
            "model-service_parsing_invalid-parameters"
        );
        // Deep nesting is refused by the parser, without a crash.
        let deep = format!("models: {}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(code(&deep), "model-deployment_read_invalid-data-format");
        let big = format!("models: []\n#{}", "x".repeat(MAX_DEFINITION_BYTES));
        assert_eq!(code(&big), "model-deployment_read_invalid-data-format");
    }

    #[test]
    fn toml_definitions_read_too() {
        let d = parse(
            "model-definition.toml",
            "[[models]]\nname = \"m\"\n[models.service]\nstart_command = [\"run\"]\nport = 8080\n",
            "/models",
        )
        .unwrap();
        assert_eq!(d.served().unwrap().1.port, 8080);
        let deep = format!("a = {}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse("d.toml", &deep, "/models").is_err());
    }
}
