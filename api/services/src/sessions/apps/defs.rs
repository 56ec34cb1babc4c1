//! Service definitions, the Backend.AI way: an image declares its apps in the
//! `ai.backend.service-ports` label and says how to start each in
//! `/etc/backend.ai/service-defs/<app>.json` (`command` as a list or a shell string, `shell`,
//! `prestart` actions, `env`, `default_arguments`, `url_template`, `noop`). bai reads the file
//! from the session's own container when the app is started and runs the command there as
//! `work`, so a definition only ever affects the session it comes from.
//!
//! Arguments are interpolated as Backend.AI's kernel runner does (`{name}`, `{ports[0]}`,
//! `${{ name }}`), with these variables: `ports` (the app's container ports), `runtime_path`
//! (the image's `ai.backend.runtime-path`), and bai's own, for apps served under the app proxy's
//! path: `base_url` (`/apps/<session>/<app>/`), `base_path` (the same without the trailing
//! slash) and `token` (the per-launch token the proxy hands to the browser).
use std::collections::BTreeMap;

use serde::Deserialize;

use crate::error::{ApiError, ApiResult};

/// Where images keep their service definitions.
pub const DIR: &str = "/etc/backend.ai/service-defs";
/// The largest definition read (a definition is a few hundred bytes).
pub const MAX_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Command {
    Args(Vec<String>),
    Script(String),
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum ArgValue {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Action {
    pub action: String,
    #[serde(default)]
    pub args: BTreeMap<String, serde_json::Value>,
    #[serde(default, rename = "ref")]
    pub reference: Option<String>,
}

/// One app's definition, as Backend.AI's `ServiceDefinition` reads it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct ServiceDef {
    pub command: Command,
    #[serde(default = "bash")]
    pub shell: String,
    #[serde(default)]
    pub noop: bool,
    #[serde(default)]
    pub url_template: String,
    #[serde(default, alias = "prestart")]
    pub prestart_actions: Vec<Action>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub allowed_envs: Vec<String>,
    #[serde(default)]
    pub allowed_arguments: Vec<String>,
    #[serde(default)]
    pub default_arguments: BTreeMap<String, Option<ArgValue>>,
}

fn bash() -> String {
    "bash".into()
}

/// The values `{…}` may name.
pub struct Variables {
    pub ports: Vec<u16>,
    pub runtime_path: String,
    pub base_url: String,
    pub token: String,
}

impl Variables {
    fn get(&self, expr: &str) -> Option<String> {
        let expr = expr.trim();
        if let Some(index) = expr
            .strip_prefix("ports[")
            .and_then(|r| r.strip_suffix(']'))
        {
            let i: usize = index.trim().parse().ok()?;
            return self.ports.get(i).map(u16::to_string);
        }
        Some(match expr {
            "runtime_path" => self.runtime_path.clone(),
            "base_url" => self.base_url.clone(),
            "base_path" => self.base_url.trim_end_matches('/').to_string(),
            "token" => self.token.clone(),
            _ => return None,
        })
    }
}

/// What to run in the container: the directories to make first, the command line and its
/// environment.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub mkdirs: Vec<String>,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
}

impl ServiceDef {
    /// Parses a definition file; BAD_REQUEST with the app's name when it is malformed.
    pub fn parse(app: &str, raw: &[u8]) -> ApiResult<ServiceDef> {
        serde_json::from_slice(raw).map_err(|e| {
            ApiError::bad_request(format!(
                "The image's service definition of '{app}' ({DIR}/{app}.json) is malformed: {e}"
            ))
        })
    }

    /// The process to start (None for a `noop` app, which needs none).
    pub fn launch(&self, app: &str, vars: &Variables) -> ApiResult<Option<Launch>> {
        if self.noop {
            return Ok(None);
        }
        let mut mkdirs = Vec::new();
        for a in &self.prestart_actions {
            match a.action.as_str() {
                "mkdir" => {
                    let path = a.args.get("path").and_then(|p| p.as_str()).ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "The service definition of '{app}': mkdir needs a path"
                        ))
                    })?;
                    mkdirs.push(interpolate(app, path, vars)?);
                }
                // Backend.AI's `log` action only writes to the kernel runner's log.
                "log" => {}
                other => {
                    return Err(ApiError::bad_request(format!(
                        "The service definition of '{app}' uses the prestart action '{other}', which bai does not run (supported: mkdir, log)"
                    )));
                }
            }
        }
        let mut argv = match &self.command {
            Command::Args(a) if !a.is_empty() => a.clone(),
            Command::Script(s) if !s.trim().is_empty() => {
                vec![self.shell.clone(), "-c".into(), s.clone()]
            }
            _ => {
                return Err(ApiError::bad_request(format!(
                    "The service definition of '{app}' has an empty command"
                )));
            }
        };
        for (name, value) in &self.default_arguments {
            argv.push(name.clone());
            match value {
                Some(ArgValue::One(v)) => argv.push(v.clone()),
                Some(ArgValue::Many(vs)) => argv.extend(vs.iter().cloned()),
                None => {}
            }
        }
        let argv = argv
            .iter()
            .map(|a| interpolate(app, a, vars))
            .collect::<ApiResult<Vec<_>>>()?;
        let mut env = Vec::new();
        for (k, v) in &self.env {
            let k = interpolate(app, k, vars)?;
            if k.is_empty() || k.contains(['=', '\0']) {
                return Err(ApiError::bad_request(format!(
                    "The service definition of '{app}' sets an invalid variable name {k:?}"
                )));
            }
            env.push((k, interpolate(app, v, vars)?));
        }
        Ok(Some(Launch { mkdirs, argv, env }))
    }
}

/// `{expr}` and `${{ expr }}` replaced by their values (`{{`, `}}`: literal braces).
pub fn interpolate(app: &str, s: &str, vars: &Variables) -> ApiResult<String> {
    let unknown = |e: &str| {
        ApiError::bad_request(format!(
            "The service definition of '{app}' names an unknown variable {{{e}}} (known: ports[i], runtime_path, base_url, base_path, token)"
        ))
    };
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find(['{', '}', '$']) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(inner) = tail.strip_prefix("${{") {
            let end = inner.find("}}").ok_or_else(|| unknown(inner))?;
            let expr = &inner[..end];
            out.push_str(&vars.get(expr).ok_or_else(|| unknown(expr))?);
            rest = &inner[end + 2..];
        } else if let Some(r) = tail.strip_prefix("{{") {
            out.push('{');
            rest = r;
        } else if let Some(r) = tail.strip_prefix("}}") {
            out.push('}');
            rest = r;
        } else if let Some(inner) = tail.strip_prefix('{') {
            let end = inner.find('}').ok_or_else(|| unknown(inner))?;
            let expr = &inner[..end];
            out.push_str(&vars.get(expr).ok_or_else(|| unknown(expr))?);
            rest = &inner[end + 1..];
        } else {
            // A lone `$` or `}`.
            out.push_str(&tail[..1]);
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Variables {
        Variables {
            ports: vec![8090, 8091],
            runtime_path: "/usr/bin/python3".into(),
            base_url: "/apps/s1/jupyterlab/".into(),
            token: "tok".into(),
        }
    }

    #[test]
    fn a_backend_ai_definition_becomes_a_command() {
        let raw = br#"{
            "prestart": [{"action": "mkdir", "args": {"path": "/home/work/logs"}}],
            "command": ["{runtime_path}", "-m", "tensorboard.main", "--port", "{ports[0]}",
                        "--path_prefix", "${{ base_path }}"],
            "env": {"TB_TOKEN": "{token}"},
            "default_arguments": {"--logdir": "/home/work/logs", "--bind_all": null},
            "url_template": "http://{host}:{port}/"
        }"#;
        let def = ServiceDef::parse("tensorboard", raw).unwrap();
        let l = def.launch("tensorboard", &vars()).unwrap().unwrap();
        assert_eq!(l.mkdirs, vec!["/home/work/logs"]);
        assert_eq!(
            l.argv,
            vec![
                "/usr/bin/python3",
                "-m",
                "tensorboard.main",
                "--port",
                "8090",
                "--path_prefix",
                "/apps/s1/jupyterlab",
                "--bind_all",
                "--logdir",
                "/home/work/logs"
            ]
        );
        assert_eq!(l.env, vec![("TB_TOKEN".to_string(), "tok".to_string())]);
    }

    #[test]
    fn scripts_run_in_their_shell_and_noop_apps_start_nothing() {
        let def =
            ServiceDef::parse("x", br#"{"command": "echo {ports[1]}", "shell": "sh"}"#).unwrap();
        assert_eq!(
            def.launch("x", &vars()).unwrap().unwrap().argv,
            vec!["sh", "-c", "echo 8091"]
        );
        let noop = ServiceDef::parse("x", br#"{"command": [], "noop": true}"#).unwrap();
        assert_eq!(noop.launch("x", &vars()).unwrap(), None);
    }

    #[test]
    fn bad_definitions_are_refused_with_the_reason() {
        let err = |raw: &[u8]| {
            ServiceDef::parse("app", raw)
                .and_then(|d| d.launch("app", &vars()))
                .unwrap_err()
                .message
        };
        assert!(err(b"not json").contains("malformed"));
        assert!(err(br#"{"command": ["{secret}"]}"#).contains("unknown variable {secret}"));
        assert!(err(br#"{"command": ["{ports[7]}"]}"#).contains("unknown variable"));
        assert!(err(br#"{"command": ["{unclosed"]}"#).contains("unknown variable"));
        assert!(err(br#"{"command": []}"#).contains("empty command"));
        assert!(
            err(br#"{"command": ["x"], "prestart": [{"action": "run_command", "args": {}}]}"#)
                .contains("'run_command'")
        );
        assert!(err(br#"{"command": ["x"], "env": {"A=B": "c"}}"#).contains("invalid variable"));
    }

    #[test]
    fn literal_braces_and_dollars_survive() {
        assert_eq!(
            interpolate("a", "{{x}} $HOME ${{ token }}", &vars()).unwrap(),
            "{x} $HOME tok"
        );
    }
}
