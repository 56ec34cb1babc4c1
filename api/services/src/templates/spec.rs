//! Backend.AI's task template (`task_template_v1`): parsed from what clients send (JSON, or
//! YAML with one template per document), checked, and normalized to the stored form
//! (Backend.AI's key names, defaults filled); turned into a session's creation parameters
//! and merged with the overrides a create-from-template request brings.
use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};

/// The largest template, as stored JSON.
pub const MAX_TEMPLATE_BYTES: usize = 64 * 1024;
/// Templates per create request.
pub const MAX_ITEMS: usize = 32;

/// One template of a create or update request, with the name it is stored under.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub name: String,
    pub template: Value,
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::bad_request(msg)
}

/// The templates in a request's `payload`: a JSON array of items (`{"template": …, "name"?}`),
/// one item, a bare template, or YAML documents of either.
pub fn parse_payload(payload: &str) -> ApiResult<Vec<Item>> {
    if payload.len() > MAX_TEMPLATE_BYTES * 4 {
        return Err(bad("The template payload is too large"));
    }
    let docs: Vec<Value> = match serde_json::from_str::<Value>(payload) {
        Ok(Value::Array(items)) => items,
        Ok(v) => vec![v],
        Err(_) => {
            let mut docs = Vec::new();
            for doc in serde_yaml_ng::Deserializer::from_str(payload) {
                let v: Value = serde::Deserialize::deserialize(doc)
                    .map_err(|e| bad(format!("The payload is neither JSON nor YAML: {e}")))?;
                match v {
                    Value::Array(items) => docs.extend(items),
                    Value::Null => {}
                    v => docs.push(v),
                }
            }
            docs
        }
    };
    if docs.is_empty() {
        return Err(bad("The payload holds no template"));
    }
    if docs.len() > MAX_ITEMS {
        return Err(bad(format!("At most {MAX_ITEMS} templates per request")));
    }
    docs.into_iter()
        .map(|doc| {
            let (template, name) = match doc.get("template") {
                Some(t) if doc.get("kind").is_none() => (
                    t.clone(),
                    doc.get("name").and_then(Value::as_str).map(str::to_string),
                ),
                _ => (doc, None),
            };
            let template = normalize(&template)?;
            let name = name
                .filter(|n| !n.trim().is_empty())
                .or_else(|| {
                    template
                        .pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .ok_or_else(|| bad("A template needs metadata.name"))?;
            if name.chars().count() > 128 || name.chars().any(char::is_control) {
                return Err(bad("A template name is at most 128 printable characters"));
            }
            Ok(Item { name, template })
        })
        .collect()
}

/// Reads `obj` as a map allowing only `keys` (alias → the stored key).
fn fields<'a>(
    obj: &'a Value,
    what: &str,
    keys: &[(&'static str, &'static str)],
) -> ApiResult<Vec<(&'static str, &'a Value)>> {
    let map = obj
        .as_object()
        .ok_or_else(|| bad(format!("{what} must be a mapping")))?;
    map.iter()
        .map(|(k, v)| {
            keys.iter()
                .find(|(alias, _)| alias == k)
                .map(|(_, stored)| (*stored, v))
                .ok_or_else(|| {
                    let known: Vec<&str> = keys.iter().map(|(a, _)| *a).collect();
                    bad(format!(
                        "{what}: unknown key '{k}' (known: {})",
                        known.join(", ")
                    ))
                })
        })
        .collect()
}

fn opt_str(v: &Value, what: &str) -> ApiResult<Option<String>> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        Value::Number(n) => Ok(Some(n.to_string())),
        _ => Err(bad(format!("{what} must be a string"))),
    }
}

fn str_map(v: &Value, what: &str) -> ApiResult<Map<String, Value>> {
    match v {
        Value::Null => Ok(Map::new()),
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(_) => Ok((k.clone(), v.clone())),
                Value::Number(n) => Ok((k.clone(), Value::String(n.to_string()))),
                Value::Bool(b) => Ok((k.clone(), Value::String(b.to_string()))),
                Value::Null if what == "spec.mounts" => Ok((k.clone(), Value::Null)),
                _ => Err(bad(format!("{what}: the value of '{k}' must be a string"))),
            })
            .collect(),
        _ => Err(bad(format!("{what} must be a mapping"))),
    }
}

/// Checks a task template and returns its stored form.
pub fn normalize(t: &Value) -> ApiResult<Value> {
    let top = t
        .as_object()
        .ok_or_else(|| bad("A template must be a mapping"))?;
    // Backend.AI allows extra top-level keys; they are not kept.
    let get = |names: &[&str]| names.iter().find_map(|n| top.get(*n));
    let api_version = get(&["api_version", "apiVersion"])
        .and_then(|v| opt_str(v, "api_version").ok().flatten())
        .ok_or_else(|| bad("A template needs api_version (e.g. 'v1')"))?;
    match get(&["kind"]).and_then(Value::as_str) {
        Some("taskTemplate" | "task_template") => {}
        Some(other) => {
            return Err(bad(format!(
                "kind '{other}' is not supported here (taskTemplate)"
            )));
        }
        None => return Err(bad("A template needs kind: taskTemplate")),
    }
    let metadata = get(&["metadata"]).ok_or_else(|| bad("A template needs metadata"))?;
    let (mut name, mut tag) = (None, None);
    for (k, v) in fields(metadata, "metadata", &[("name", "name"), ("tag", "tag")])? {
        match k {
            "name" => name = opt_str(v, "metadata.name")?,
            _ => tag = opt_str(v, "metadata.tag")?,
        }
    }
    let name = name
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| bad("A template needs metadata.name"))?;
    let spec = get(&["spec"]).ok_or_else(|| bad("A template needs spec"))?;
    let mut session_type = "interactive".to_string();
    let (mut kernel, mut scaling_group, mut mounts, mut resources) =
        (None, None, Map::new(), Value::Null);
    for (k, v) in fields(
        spec,
        "spec",
        &[
            ("type", "session_type"),
            ("session_type", "session_type"),
            ("sessionType", "session_type"),
            ("kernel", "kernel"),
            ("scaling_group", "scaling_group"),
            ("mounts", "mounts"),
            ("resources", "resources"),
            ("agent_list", "agent_list"),
            ("agentList", "agent_list"),
        ],
    )? {
        match k {
            "session_type" => {
                session_type = opt_str(v, "spec.session_type")?
                    .unwrap_or_else(|| "interactive".into())
                    .to_lowercase();
                if !matches!(session_type.as_str(), "interactive" | "batch") {
                    return Err(bad(format!(
                        "spec.session_type '{session_type}' is not supported (interactive or batch)"
                    )));
                }
            }
            "kernel" => kernel = Some(v),
            "scaling_group" => scaling_group = opt_str(v, "spec.scaling_group")?,
            "mounts" => {
                mounts = str_map(v, "spec.mounts")?;
                for path in mounts.values().filter_map(Value::as_str) {
                    let rel = path.strip_prefix("/home/work/").unwrap_or(path);
                    if rel.split('/').any(|p| p == "..") || rel.chars().any(char::is_control) {
                        return Err(bad(format!(
                            "spec.mounts: '{path}' is not a path under /home/work"
                        )));
                    }
                }
            }
            "resources" => resources = Value::Object(str_map(v, "spec.resources")?),
            _ => {
                if !v.is_null() {
                    return Err(bad(
                        "spec.agent_list is not supported: the scheduler picks the agent",
                    ));
                }
            }
        }
    }
    let kernel = kernel.ok_or_else(|| bad("A template needs spec.kernel"))?;
    let (mut image, mut architecture, mut environ, mut run) =
        (None, "x86_64".to_string(), Map::new(), Value::Null);
    for (k, v) in fields(
        kernel,
        "spec.kernel",
        &[
            ("image", "image"),
            ("architecture", "architecture"),
            ("environ", "environ"),
            ("run", "run"),
            ("git", "git"),
        ],
    )? {
        match k {
            "image" => image = opt_str(v, "spec.kernel.image")?,
            "architecture" => {
                if let Some(a) = opt_str(v, "spec.kernel.architecture")? {
                    architecture = a;
                }
            }
            "environ" => environ = str_map(v, "spec.kernel.environ")?,
            "run" => {
                if v.is_null() {
                    continue;
                }
                let (mut bootstrap, mut startup) = (None, None);
                for (k, v) in fields(
                    v,
                    "spec.kernel.run",
                    &[
                        ("bootstrap", "bootstrap"),
                        ("startup", "startup_command"),
                        ("startup_command", "startup_command"),
                        ("startupCommand", "startup_command"),
                    ],
                )? {
                    match k {
                        "bootstrap" => bootstrap = opt_str(v, "spec.kernel.run.bootstrap")?,
                        _ => startup = opt_str(v, "spec.kernel.run.startup_command")?,
                    }
                }
                run = json!({"bootstrap": bootstrap, "startup_command": startup});
            }
            _ => {
                if !v.is_null() {
                    return Err(bad(
                        "spec.kernel.git is not supported yet: clone in the bootstrap script",
                    ));
                }
            }
        }
    }
    let image = image
        .filter(|i| !i.trim().is_empty())
        .ok_or_else(|| bad("A template needs spec.kernel.image"))?;
    let out = json!({
        "api_version": api_version,
        "kind": "taskTemplate",
        "metadata": {"name": name, "tag": tag},
        "spec": {
            "session_type": session_type,
            "kernel": {
                "image": image,
                "architecture": architecture,
                "environ": environ,
                "run": run,
                "git": null,
            },
            "scaling_group": scaling_group,
            "mounts": mounts,
            "resources": resources,
            "agent_list": null,
        },
    });
    if out.to_string().len() > MAX_TEMPLATE_BYTES {
        return Err(bad(format!(
            "A template is at most {} KiB",
            MAX_TEMPLATE_BYTES / 1024
        )));
    }
    Ok(out)
}

/// A bootstrap script as templates hold it: base64 (Backend.AI's form), or plain text.
fn bootstrap_text(raw: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(raw.trim())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_else(|| raw.to_string())
}

/// The session-creation body (Backend.AI's `POST /session` keys) a stored template stands for.
pub fn creation_body(t: &Value) -> Value {
    let at = |p: &str| t.pointer(p).cloned().unwrap_or(Value::Null);
    let mounts = t
        .pointer("/spec/mounts")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mount_map: Map<String, Value> = mounts
        .iter()
        .filter(|(_, v)| v.as_str().is_some_and(|p| !p.is_empty()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    json!({
        "image": at("/spec/kernel/image"),
        "architecture": at("/spec/kernel/architecture"),
        "type": at("/spec/session_type"),
        "tag": at("/metadata/tag"),
        "startupCommand": at("/spec/kernel/run/startup_command"),
        "bootstrap_script": t
            .pointer("/spec/kernel/run/bootstrap")
            .and_then(Value::as_str)
            .map(bootstrap_text),
        "config": {
            "scalingGroup": at("/spec/scaling_group"),
            "mounts": mounts.keys().collect::<Vec<_>>(),
            "mount_map": mount_map,
            "environ": at("/spec/kernel/environ"),
            "resources": at("/spec/resources"),
        },
    })
}

/// Whether a request left a key to the template: absent, null, or an empty list or mapping
/// (the official clients send those for every option not given).
fn unset(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

/// The template's creation body with the request's keys over it: key by key (a given
/// `environ` replaces the template's whole `environ`), `config` likewise one level down.
pub fn merge(mut base: Value, overrides: &Value) -> Value {
    let Some(over) = overrides.as_object() else {
        return base;
    };
    for (k, v) in over {
        if k == "template_id" || k == "templateId" || unset(v) {
            continue;
        }
        // An alias given replaces the template's key of the same meaning.
        let k = match k.as_str() {
            "startup_command" => "startupCommand",
            "bootstrapScript" => "bootstrap_script",
            "lang" => "image",
            "sessionType" => "type",
            other => other,
        };
        if k == "config" {
            if let (Some(base_cfg), Some(cfg)) = (
                base.get_mut("config").and_then(Value::as_object_mut),
                v.as_object(),
            ) {
                for (ck, cv) in cfg {
                    if !unset(cv) {
                        let ck = match ck.as_str() {
                            "scaling_group" => "scalingGroup",
                            "mountMap" => "mount_map",
                            "resourceOpts" => "resource_opts",
                            other => other,
                        };
                        base_cfg.insert(ck.to_string(), cv.clone());
                    }
                }
            }
            continue;
        }
        if let Some(b) = base.as_object_mut() {
            b.insert(k.to_string(), v.clone());
        }
    }
    base
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "
api_version: v1
kind: taskTemplate
metadata:
  name: trainer
  tag: nightly
spec:
  session_type: batch
  kernel:
    image: bai.local/stable/python:3.11-debian12
    environ:
      EPOCHS: 3
    run:
      bootstrap: ZWNobyBib290
      startup: python train.py
  mounts:
    data: /home/work/input
    models: null
  resources:
    cpu: '2'
    mem: 1g
---
- template:
    apiVersion: v1
    kind: task_template
    metadata: {name: second}
    spec:
      kernel: {image: python}
  name: renamed
";

    #[test]
    fn templates_parse_from_yaml_and_json_and_normalize() {
        let items = parse_payload(YAML).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].name, "trainer");
        let t = &items[0].template;
        assert_eq!(t["spec"]["session_type"], "batch");
        assert_eq!(t["spec"]["kernel"]["environ"]["EPOCHS"], "3");
        assert_eq!(
            t["spec"]["kernel"]["run"]["startup_command"],
            "python train.py"
        );
        assert_eq!(items[1].name, "renamed");
        assert_eq!(items[1].template["spec"]["session_type"], "interactive");
        assert_eq!(
            items[1].template["spec"]["kernel"]["architecture"],
            "x86_64"
        );
        // JSON: a bare template, and an array of items.
        let bare = serde_json::to_string(&items[0].template).unwrap();
        assert_eq!(parse_payload(&bare).unwrap()[0].template, items[0].template);
        let listed = json!([{"template": items[1].template, "name": "x"}]).to_string();
        assert_eq!(parse_payload(&listed).unwrap()[0].name, "x");
    }

    #[test]
    fn bad_templates_say_why() {
        let cases = [
            ("", "no template"),
            ("[]", "no template"),
            ("{\"kind\": \"taskTemplate\"}", "api_version"),
            ("api_version: v1\nkind: clusterTemplate", "not supported"),
            (
                "api_version: v1\nkind: taskTemplate\nmetadata: {name: a}\nspec: {}",
                "spec.kernel",
            ),
            (
                "api_version: v1\nkind: taskTemplate\nmetadata: {name: a}\nspec: {kernel: {image: x, colour: red}}",
                "unknown key 'colour'",
            ),
            (
                "api_version: v1\nkind: taskTemplate\nmetadata: {name: a}\nspec: {kernel: {image: x}, mounts: {d: ../../etc}}",
                "not a path under /home/work",
            ),
            (
                "api_version: v1\nkind: taskTemplate\nmetadata: {name: a}\nspec: {kernel: {image: x, git: {repository: r}}}",
                "git is not supported",
            ),
            ("a: [unclosed", "neither JSON nor YAML"),
        ];
        // Huge and deeply nested payloads are refused, not parsed at length.
        let huge = format!(
            "{{\"kind\": \"{}\"}}",
            "x".repeat(MAX_TEMPLATE_BYTES * 4 + 1)
        );
        assert!(
            parse_payload(&huge)
                .unwrap_err()
                .message
                .contains("too large")
        );
        let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_payload(&deep).is_err());
        let deep_yaml = format!("{}1", "- ".repeat(10_000));
        assert!(parse_payload(&deep_yaml).is_err());
        for (payload, why) in cases {
            let err = parse_payload(payload).unwrap_err().message;
            assert!(err.contains(why), "{payload:?}: {err}");
        }
    }

    #[test]
    fn overrides_win_key_by_key_and_unset_keys_keep_the_template() {
        let t = parse_payload(YAML).unwrap().remove(0).template;
        let body = creation_body(&t);
        assert_eq!(body["bootstrap_script"], "echo boot", "base64 decoded");
        assert_eq!(body["startupCommand"], "python train.py");
        assert_eq!(body["config"]["mounts"], json!(["data", "models"]));
        assert_eq!(
            body["config"]["mount_map"],
            json!({"data": "/home/work/input"})
        );
        // What the official CLI sends for options not given: nulls and empty lists.
        let merged = merge(
            body,
            &json!({
                "template_id": "x", "name": "run-1", "tag": null, "startupCommand": null,
                "bootstrapScript": "echo mine",
                "type": "batch",
                "config": {"mounts": [], "environ": {"EPOCHS": "5"}, "resources": {}},
            }),
        );
        assert_eq!(merged["name"], "run-1");
        assert!(merged.get("template_id").is_none());
        assert_eq!(merged["tag"], "nightly");
        assert_eq!(merged["startupCommand"], "python train.py");
        assert_eq!(
            merged["bootstrap_script"], "echo mine",
            "an alias replaces the key"
        );
        assert_eq!(merged["config"]["mounts"], json!(["data", "models"]));
        assert_eq!(merged["config"]["environ"], json!({"EPOCHS": "5"}));
        assert_eq!(merged["config"]["resources"]["cpu"], "2");
    }
}
