//! The surfaces reach the database through the services (ARCHITECTURE.md: "Surfaces parse, call
//! a service, map errors"), so every write and role check lives in one place: no file of this
//! crate spells an entity query, a write or a raw statement. A surface may still run a `Select`
//! a service built for it (the GraphQL pagination in `graphql/context.rs`). `bench/` is
//! exempt: it seeds rows to measure, and is no surface.
use std::path::{Path, PathBuf};

/// What only services write: queries of an entity, writes, raw SQL.
const DIRECT: &[&str] = &[
    "Entity::find",
    "Entity::update",
    "Entity::delete",
    "Entity::insert",
    "ActiveModel {",
    "into_active_model",
    "Statement::from",
    "query_all(",
    "query_one(",
];

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "bench") {
                rs_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn surfaces_spell_no_database_query() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rs_files(&src, &mut files);
    let mut found = Vec::new();
    for file in files {
        if file.ends_with("surfaces_tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        // The code before its unit tests (tests may seed rows), without comments.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for (n, line) in code.lines().enumerate() {
            let line = line.trim_start();
            if line.starts_with("//") {
                continue;
            }
            if let Some(p) = DIRECT.iter().find(|p| line.contains(*p)) {
                found.push(format!(
                    "{}:{}: {p}",
                    file.strip_prefix(&src).unwrap().display(),
                    n + 1
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "surfaces querying the database themselves (move the query into the service that owns \
         the data):\n{}",
        found.join("\n")
    );
}
