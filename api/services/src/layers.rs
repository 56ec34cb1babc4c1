//! The layers inside bai-services, checked. Cargo keeps bai's crates from importing up a
//! layer; inside this crate nothing would, so these tests read the sources: every file's
//! imports (`use` trees and paths through `crate::`, `super::`, `self::` or a child module)
//! point to a file of a lower layer of [`LAYERS`] or of its own unit, and no files import each
//! other in a circle. ARCHITECTURE.md explains the map.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layer map, lowest first: each layer's units (module paths; a unit holds its
/// submodules unless one of them is a unit of its own). A file may use files of its own unit
/// and of lower layers, never of its own layer's other units nor of a higher one.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "foundation: settings, database helpers, the bus, leases",
        &["config", "sql", "lookup", "events", "cluster", "db::counts"],
    ),
    ("e-mail, revocations", &["mail", "auth::revocations"]),
    (
        "handles: what the state holds, reaching no state",
        &[
            "agents::registry",
            "auth::cache",
            "auth::hmac",
            "auth::ratelimit",
            "auth::throttle",
            "auth::ws",
            "bgtasks::records",
            "keypairs::usage",
            "scheduler::handle",
            "sessions::apps::started",
            "sessions::commit::entries",
            "sessions::exec::runs",
            "sessions::locks",
            "sessions::phases",
            "serving::table",
        ],
    ),
    ("the handle sets services take", &["store"]),
    ("the audit log", &["audit"]),
    ("callers, credentials, who sees whom, logins", &["auth"]),
    ("background tasks", &["bgtasks"]),
    ("settings, resource policies", &["settings", "policies"]),
    ("usage rows", &["statistics::rows"]),
    (
        "administrative objects",
        &["domains", "groups", "keypairs", "presets", "scaling_groups"],
    ),
    ("users", &["users"]),
    (
        "accounts, dotfiles, the image catalog",
        &["accounts", "dotfiles", "images"],
    ),
    ("registries, storage folders", &["registries", "storage"]),
    ("agents", &["agents"]),
    ("sessions", &["sessions"]),
    (
        "the scheduler, statistics, session templates, model serving",
        &["scheduler", "serving", "statistics", "templates"],
    ),
    ("heartbeats", &["heartbeat"]),
    ("the database's set-up and seeds", &["db"]),
    ("the application state (the wiring)", &["state"]),
];

/// A source file: its module path and its code (comments, strings and tests blanked).
struct Source {
    module: Vec<String>,
    path: PathBuf,
    code: String,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rs_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `sessions/exec/runs.rs` → `sessions::exec::runs`; `sessions/mod.rs` → `sessions`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The code with comments, string and character literals replaced by spaces (line breaks
/// kept, so offsets still give line numbers).
fn blank(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let keep = |out: &mut String, c: u8| out.push(if c == b'\n' { '\n' } else { ' ' });
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                keep(&mut out, b[i]);
                i += 1;
            }
        } else if rest.starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    keep(&mut out, b[i]);
                    i += 1;
                }
            }
        } else if b[i] == b'r' && (rest.starts_with(b"r\"") || rest.starts_with(b"r#")) {
            let hashes = rest[1..].iter().take_while(|&&c| c == b'#').count();
            if rest.get(1 + hashes) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let start = i + 2 + hashes;
            let end = b[start..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(b.len(), |p| start + p + close.len());
            for &c in &b[i..end] {
                keep(&mut out, c);
            }
            i = end;
        } else if b[i] == b'"' {
            keep(&mut out, b[i]);
            i += 1;
            while i < b.len() && b[i] != b'"' {
                let n = if b[i] == b'\\' { 2 } else { 1 };
                for &c in &b[i..(i + n).min(b.len())] {
                    keep(&mut out, c);
                }
                i += n;
            }
            if i < b.len() {
                keep(&mut out, b[i]);
                i += 1;
            }
        } else if b[i] == b'\'' {
            // A character literal ('x', '\n', '\u{1F600}') or a lifetime ('a).
            let end = if rest.get(1) == Some(&b'\\') {
                rest[2..]
                    .iter()
                    .position(|&c| c == b'\'')
                    .map(|p| i + 3 + p)
            } else {
                let ch = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (rest.get(1 + ch) == Some(&b'\'')).then_some(i + 2 + ch)
            };
            match end {
                Some(end) => {
                    for &c in &b[i..end] {
                        keep(&mut out, c);
                    }
                    i = end;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// Blanks every `#[cfg(test)]` item (a module declared or written inline), keeping line
/// breaks; returns the names of test modules declared in their own file.
fn without_tests(code: &mut String) -> Vec<String> {
    let mut declared = Vec::new();
    while let Some(at) = code.find("#[cfg(test)]") {
        let after = &code[at..];
        let semi = after.find(';');
        let brace = after.find('{');
        let end = match (semi, brace) {
            (Some(s), Some(b)) if s < b => at + s + 1,
            (Some(s), None) => at + s + 1,
            (_, Some(b)) => {
                let mut depth = 0;
                let mut end = code.len();
                for (k, c) in code[at + b..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = at + b + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (None, None) => code.len(),
        };
        let item = code[at..end].to_string();
        if item.trim_end().ends_with(';')
            && let Some(name) = item.split_whitespace().skip_while(|w| *w != "mod").nth(1)
        {
            declared.push(name.trim_end_matches(';').to_string());
        }
        let blanked: String = item
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        code.replace_range(at..end, &blanked);
    }
    declared
}

/// Every source file of the crate but lib.rs and the test-only files.
fn sources() -> Vec<Source> {
    let src = src_dir();
    let mut files = Vec::new();
    rs_files(&src, &mut files);
    files.sort();
    let mut all = Vec::new();
    let mut test_only = BTreeSet::new();
    for path in files {
        let mut code = blank(&std::fs::read_to_string(&path).unwrap());
        let module = module_of(&src, &path);
        for name in without_tests(&mut code) {
            let mut m = module.clone();
            m.push(name);
            test_only.insert(m);
        }
        all.push(Source { module, path, code });
    }
    all.retain(|s| !s.module.is_empty() && !test_only.iter().any(|t| s.module.starts_with(t)));
    all
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths a `use` tree names (`a::{b, c::d as e, f::*}` → `a::b`, `a::c::d`, `a::f`).
fn use_paths(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let mut path = prefix.to_vec();
        let tree = tree.split(" as ").next().unwrap_or(tree);
        path.extend(
            tree.split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty() && *s != "*" && *s != "self")
                .map(String::from),
        );
        out.push(path);
        return;
    };
    let mut head = prefix.to_vec();
    head.extend(
        tree[..open]
            .split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from),
    );
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let (mut depth, mut start) = (0, 0);
    for (k, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                use_paths(&inner[start..k], &head, out);
                start = k + 1;
            }
            _ => {}
        }
    }
    if !inner[start..].trim().is_empty() {
        use_paths(&inner[start..], &head, out);
    }
}

/// The module paths a file names, each with its line: `use` trees and inline paths that
/// start at `crate`, `super`, `self` or a child module the file declares.
fn named_paths(s: &Source) -> Vec<(Vec<String>, usize)> {
    let code = &s.code;
    let line = |at: usize| code[..at].matches('\n').count() + 1;
    let children: BTreeSet<String> = code
        .split(';')
        .filter_map(|stmt| {
            let words: Vec<&str> = stmt.split_whitespace().collect();
            let at = words.iter().position(|w| *w == "mod")?;
            (at + 2 == words.len()).then(|| words[at + 1].to_string())
        })
        .collect();
    let absolute = |path: &[String]| -> Option<Vec<String>> {
        let first = path.first()?;
        if first == "crate" {
            return Some(path[1..].to_vec());
        }
        let mut base = s.module.clone();
        let mut rest = path;
        if first == "self" {
            rest = &path[1..];
        } else if first == "super" {
            while rest.first().is_some_and(|p| p == "super") {
                base.pop();
                rest = &rest[1..];
            }
        } else if !children.contains(first) {
            return None;
        }
        base.extend(rest.iter().cloned());
        Some(base)
    };
    let mut out = Vec::new();
    let mut rest = 0;
    while let Some(k) = code[rest..].find("use ") {
        let at = rest + k;
        rest = at + 4;
        if code[..at].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let end = code[at..].find(';').map_or(code.len(), |e| at + e);
        let mut paths = Vec::new();
        use_paths(&code[at + 4..end], &[], &mut paths);
        out.extend(
            paths
                .iter()
                .filter_map(|p| absolute(p))
                .map(|p| (p, line(at))),
        );
        rest = end;
    }
    // Inline paths, outside the `use` statements read above.
    let mut inline = code.clone();
    let mut from = 0;
    while let Some(k) = inline[from..].find("use ") {
        let at = from + k;
        from = at + 4;
        if inline[..at].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let end = inline[at..].find(';').map_or(inline.len(), |e| at + e);
        let blanked: String = inline[at..end]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        inline.replace_range(at..end, &blanked);
        from = end;
    }
    let chars: Vec<(usize, char)> = inline.char_indices().collect();
    let mut k = 0;
    while k < chars.len() {
        let (at, c) = chars[k];
        let starts = is_ident(c)
            && (k == 0 || {
                let before = chars[k - 1].1;
                !is_ident(before) && before != ':'
            });
        if !starts {
            k += 1;
            continue;
        }
        let mut segs = Vec::new();
        let mut j = k;
        loop {
            let from = j;
            while j < chars.len() && is_ident(chars[j].1) {
                j += 1;
            }
            segs.push(chars[from..j].iter().map(|(_, c)| c).collect::<String>());
            if j + 2 < chars.len() && chars[j].1 == ':' && chars[j + 1].1 == ':' {
                j += 2;
                if !is_ident(chars[j].1) {
                    break;
                }
            } else {
                break;
            }
        }
        if segs.len() > 1
            && let Some(p) = absolute(&segs)
        {
            out.push((p, line(at)));
        }
        k = j.max(k + 1);
    }
    out
}

/// The file (by index) a module path names: the longest prefix that is a source file.
fn file_of(files: &BTreeMap<Vec<String>, usize>, path: &[String]) -> Option<usize> {
    (1..=path.len())
        .rev()
        .find_map(|n| files.get(&path[..n]).copied())
}

/// The unit a module belongs to and its layer: the longest unit of the map it starts with.
fn unit_of(module: &[String]) -> Option<(String, usize)> {
    LAYERS
        .iter()
        .enumerate()
        .flat_map(|(layer, (_, units))| units.iter().map(move |u| (*u, layer)))
        .filter(|(u, _)| {
            let u: Vec<&str> = u.split("::").collect();
            module.len() >= u.len() && module.iter().zip(&u).all(|(a, b)| a == b)
        })
        .max_by_key(|(u, _)| u.len())
        .map(|(u, layer)| (u.to_string(), layer))
}

/// file → (file it names, line).
fn graph(sources: &[Source]) -> Vec<BTreeMap<usize, usize>> {
    let files: BTreeMap<Vec<String>, usize> = sources
        .iter()
        .enumerate()
        .map(|(k, s)| (s.module.clone(), k))
        .collect();
    sources
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let mut edges = BTreeMap::new();
            for (path, line) in named_paths(s) {
                if let Some(to) = file_of(&files, &path).filter(|&to| to != k) {
                    edges.entry(to).or_insert(line);
                }
            }
            edges
        })
        .collect()
}

fn name(s: &Source) -> String {
    s.path
        .strip_prefix(src_dir())
        .unwrap()
        .display()
        .to_string()
}

#[test]
fn every_file_has_a_place_on_the_layer_map() {
    let unplaced: Vec<String> = sources()
        .iter()
        .filter(|s| unit_of(&s.module).is_none())
        .map(name)
        .collect();
    assert!(
        unplaced.is_empty(),
        "files of no unit of the layer map (add their module to LAYERS in layers.rs and \
         ARCHITECTURE.md): {unplaced:?}"
    );
}

#[test]
fn imports_point_down_the_layer_map() {
    let sources = sources();
    let graph = graph(&sources);
    let mut wrong = Vec::new();
    for (k, edges) in graph.iter().enumerate() {
        let Some((unit, layer)) = unit_of(&sources[k].module) else {
            continue;
        };
        for (&to, line) in edges {
            let Some((their_unit, their_layer)) = unit_of(&sources[to].module) else {
                continue;
            };
            if their_unit != unit && their_layer >= layer {
                wrong.push(format!(
                    "{}:{line} ({unit}, layer {layer}) uses {} ({their_unit}, layer {their_layer})",
                    name(&sources[k]),
                    name(&sources[to])
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports up or across the layer map:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    let sources = sources();
    let graph = graph(&sources);
    // Depth-first search; a grey node met again closes a circle.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        White,
        Grey,
        Black,
    }
    fn visit(
        k: usize,
        graph: &[BTreeMap<usize, usize>],
        marks: &mut [Mark],
        stack: &mut Vec<usize>,
    ) -> Option<Vec<usize>> {
        marks[k] = Mark::Grey;
        stack.push(k);
        for &to in graph[k].keys() {
            match marks[to] {
                Mark::Grey => {
                    let from = stack.iter().position(|&s| s == to).unwrap();
                    let mut circle = stack[from..].to_vec();
                    circle.push(to);
                    return Some(circle);
                }
                Mark::White => {
                    if let Some(c) = visit(to, graph, marks, stack) {
                        return Some(c);
                    }
                }
                Mark::Black => {}
            }
        }
        stack.pop();
        marks[k] = Mark::Black;
        None
    }
    let mut marks = vec![Mark::White; sources.len()];
    for k in 0..sources.len() {
        if marks[k] == Mark::White
            && let Some(circle) = visit(k, &graph, &mut marks, &mut Vec::new())
        {
            let steps: Vec<String> = circle
                .windows(2)
                .map(|w| format!("{}:{}", name(&sources[w[0]]), graph[w[0]][&w[1]]))
                .chain(circle.last().map(|&l| name(&sources[l])))
                .collect();
            panic!("files import each other in a circle: {}", steps.join(" → "));
        }
    }
}

#[test]
fn the_check_reads_imports_as_rust_does() {
    let source = |module: &str, text: &str| {
        let mut code = blank(text);
        without_tests(&mut code);
        Source {
            module: module.split("::").map(String::from).collect(),
            path: PathBuf::new(),
            code,
        }
    };
    let s = source(
        "sessions::launch",
        "use crate::{agents::Agent, images::{self, local::scan as s}};\n\
         use super::status::{Change, apply};\n\
         // crate::users::create in a comment\n\
         fn f() { let _ = \"crate::groups::x\"; crate::storage::hosts(); super::super::mail::x(); }\n\
         #[cfg(test)]\nmod tests { use crate::scheduler::x; }\n",
    );
    let named: BTreeSet<String> = named_paths(&s).iter().map(|(p, _)| p.join("::")).collect();
    let expected: BTreeSet<String> = [
        "agents::Agent",
        "images",
        "images::local::scan",
        "sessions::status::Change",
        "sessions::status::apply",
        "storage::hosts",
        "mail::x",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(named, expected);
    let parent = source(
        "sessions",
        "pub mod status;\n#[cfg(test)]\nmod lifecycle_tests;\npub use status::apply;\n",
    );
    let named: Vec<String> = named_paths(&parent)
        .iter()
        .map(|(p, _)| p.join("::"))
        .collect();
    assert_eq!(named, ["sessions::status::apply"]);
    assert_eq!(
        unit_of(&["sessions".into(), "exec".into(), "runs".into()]).map(|u| u.0),
        Some("sessions::exec::runs".to_string())
    );
    assert_eq!(
        unit_of(&["sessions".into(), "exec".into()]).map(|u| u.0),
        Some("sessions".to_string())
    );
}

/// Services take the handle set they use (`store.rs`), never the whole application state.
#[test]
fn no_service_reaches_the_whole_state() {
    let reaching: Vec<String> = sources()
        .iter()
        .filter(|s| s.module != ["state"] && s.code.contains("AppState"))
        .map(name)
        .collect();
    assert!(
        reaching.is_empty(),
        "services taking the whole state: {reaching:?}"
    );
}
