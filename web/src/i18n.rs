//! The console's words, one catalogue per language. The English text is the key; each other
//! language is a file `web/i18n/<code>.json` mapping that text to its own (placeholders such
//! as `{name}` kept). A third language is one file and one line in `LANGUAGES`. The choice is
//! made in the user menu and remembered in the browser (`localStorage`); switching reloads the
//! page so that every string is drawn again.
use std::cell::RefCell;
use std::collections::HashMap;

/// (code, name in that language, catalogue). English needs none: its keys are its words.
pub const LANGUAGES: &[(&str, &str, &str)] = &[
    ("en", "English", "{}"),
    ("ko", "한국어", include_str!("../i18n/ko.json")),
];

const STORAGE_KEY: &str = "bai.lang";

thread_local! {
    static CURRENT: RefCell<Option<(String, HashMap<String, String>)>> = const { RefCell::new(None) };
}

fn storage() -> Option<web_sys::Storage> {
    web_sys::window().and_then(|w| w.local_storage().ok().flatten())
}

/// The language chosen (remembered), else the browser's if we have it, else English.
pub fn lang() -> String {
    CURRENT.with(|c| {
        if let Some((code, _)) = c.borrow().as_ref() {
            return code.clone();
        }
        let known = |code: &str| LANGUAGES.iter().any(|(c, _, _)| *c == code);
        let stored = storage()
            .and_then(|s| s.get_item(STORAGE_KEY).ok().flatten())
            .filter(|c| known(c));
        let browser = web_sys::window()
            .and_then(|w| w.navigator().language())
            .map(|l| l.split('-').next().unwrap_or_default().to_string())
            .filter(|c| known(c));
        let code = stored.or(browser).unwrap_or_else(|| "en".into());
        let catalogue = LANGUAGES
            .iter()
            .find(|(c, _, _)| *c == code)
            .and_then(|(_, _, text)| serde_json::from_str(text).ok())
            .unwrap_or_default();
        if let Some(root) = web_sys::window()
            .and_then(|w| w.document())
            .and_then(|d| d.document_element())
        {
            let _ = root.set_attribute("lang", &code);
        }
        *c.borrow_mut() = Some((code.clone(), catalogue));
        code
    })
}

/// Remembers `code` and draws the console again in it.
pub fn set_lang(code: &str) {
    if let Some(s) = storage() {
        let _ = s.set_item(STORAGE_KEY, code);
    }
    if let Some(w) = web_sys::window() {
        let _ = w.location().reload();
    }
}

/// `english` in the chosen language (itself when the catalogue lacks it).
pub fn t(english: &str) -> String {
    lang();
    CURRENT.with(|c| {
        c.borrow()
            .as_ref()
            .and_then(|(_, m)| m.get(english).cloned())
            .unwrap_or_else(|| english.to_string())
    })
}

/// `t` with placeholders: `tr("Session {name}", &[("name", &n)])`.
pub fn tr(english: &str, args: &[(&str, &str)]) -> String {
    let mut s = t(english);
    for (k, v) in args {
        s = s.replace(&format!("{{{k}}}"), v);
    }
    s
}

/// Marks English text that is translated later, where it is drawn (labels kept in tables of
/// `&'static str`: tabs, menu links, column heads): `key("Images")` is `"Images"`, and the
/// catalogue test finds it.
pub const fn key(english: &'static str) -> &'static str {
    english
}
