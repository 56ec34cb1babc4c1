//! The console's catalogues: every text the console draws through `t`, `tr` or `key` has a
//! Korean entry, no entry is stale, and placeholders survive translation.
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The string literals passed to `t(`, `tr(` and `key(` in the console's sources.
fn keys_in_sources(dir: &Path) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        // i18n.rs only explains the calls (its examples are no texts).
        if path.extension().and_then(|e| e.to_str()) != Some("rs")
            || path.file_name().and_then(|n| n.to_str()) == Some("i18n.rs")
        {
            continue;
        }
        let src = std::fs::read_to_string(&path).unwrap();
        let bytes = src.as_bytes();
        for call in ["t(", "tr(", "key("] {
            let mut from = 0;
            while let Some(at) = src[from..].find(call) {
                let start = from + at;
                from = start + call.len();
                // A call of its own, not the end of another name (`set(`, `get(`).
                if start > 0 {
                    let before = bytes[start - 1] as char;
                    if before.is_alphanumeric() || before == '_' {
                        continue;
                    }
                }
                // The literal may follow on the next line (rustfmt).
                let rest = src[from..].trim_start();
                let Some(rest) = rest.strip_prefix('"') else {
                    continue;
                };
                let mut text = String::new();
                let mut chars = rest.chars();
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => match chars.next() {
                            Some('n') => text.push('\n'),
                            // A continued line: the newline and the next line's indent go.
                            Some('\n') => {
                                let tail: String = chars.clone().collect();
                                let skipped = tail.len() - tail.trim_start().len();
                                for _ in 0..tail[..skipped].chars().count() {
                                    chars.next();
                                }
                            }
                            Some(other) => text.push(other),
                            None => break,
                        },
                        c => text.push(c),
                    }
                }
                keys.insert(text);
            }
        }
    }
    keys
}

fn placeholders(s: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = s;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        out.insert(rest[open..open + close + 1].to_string());
        rest = &rest[open + close + 1..];
    }
    out
}

#[test]
fn korean_catalogue_covers_the_console() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../web");
    let used = keys_in_sources(&root.join("src"));
    assert!(used.len() > 200, "only {} texts found", used.len());
    let ko: BTreeMap<String, String> =
        serde_json::from_str(&std::fs::read_to_string(root.join("i18n/ko.json")).unwrap())
            .expect("web/i18n/ko.json is a JSON object of strings");
    let missing: Vec<&String> = used.iter().filter(|k| !ko.contains_key(*k)).collect();
    assert!(missing.is_empty(), "texts without Korean: {missing:#?}");
    let stale: Vec<&String> = ko.keys().filter(|k| !used.contains(*k)).collect();
    assert!(stale.is_empty(), "Korean entries nothing uses: {stale:#?}");
    for (en, text) in &ko {
        assert!(!text.trim().is_empty(), "empty translation of {en:?}");
        assert_eq!(
            placeholders(en),
            placeholders(text),
            "placeholders differ: {en:?} → {text:?}"
        );
    }
}

/// WCAG contrast of two `#rrggbb` colours.
fn contrast(a: &str, b: &str) -> f64 {
    let lum = |hex: &str| {
        let c = |i: usize| {
            let v = f64::from(u8::from_str_radix(&hex[i..i + 2], 16).unwrap()) / 255.0;
            if v <= 0.03928 {
                v / 12.92
            } else {
                ((v + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * c(1) + 0.7152 * c(3) + 0.0722 * c(5)
    };
    let (x, y) = (lum(a), lum(b));
    (x.max(y) + 0.05) / (x.min(y) + 0.05)
}

// Text colours of the console against the backgrounds they are drawn on reach WCAG AA
// (4.5:1): white on the accent (buttons), the accent and muted text on the page and cards.
#[test]
fn console_colours_have_enough_contrast() {
    let html =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../web/index.html"))
            .unwrap();
    let var = |name: &str| {
        let at = html.find(&format!("--{name}: #")).unwrap() + name.len() + 4;
        let hex = &html[at..at + 7];
        if hex.len() == 7 && hex[1..].chars().all(|c| c.is_ascii_hexdigit()) {
            hex.to_string()
        } else {
            // #rgb
            let s: String = html[at + 1..at + 4].chars().flat_map(|c| [c, c]).collect();
            format!("#{s}")
        }
    };
    let (accent, bg, text, muted, danger) = (
        var("accent"),
        var("bg"),
        var("text"),
        var("muted"),
        var("danger"),
    );
    for (fg, back, what) in [
        ("#ffffff", accent.as_str(), "white on the accent"),
        (accent.as_str(), "#ffffff", "accent on a card"),
        (accent.as_str(), bg.as_str(), "accent on the page"),
        (muted.as_str(), "#ffffff", "muted on a card"),
        (muted.as_str(), bg.as_str(), "muted on the page"),
        (text.as_str(), bg.as_str(), "text on the page"),
        (danger.as_str(), "#ffffff", "danger on a card"),
    ] {
        let c = contrast(fg, back);
        assert!(c >= 4.5, "{what}: {fg} on {back} is {c:.2}:1");
    }
}
