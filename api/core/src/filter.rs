//! Backend.AI's list `filter` mini-language, the part its client and console use:
//! `name == "x"`, `status != "RUNNING"`, `name ilike "%gpu%"`, comparisons `< <= > >=`,
//! lists `status in ["A", "B"]` and `status not in [...]`, joined with `&` and `|` (`&` binds
//! tighter), negated with a leading `!` and grouped with parentheses. Only the fields a list
//! allows may be named; anything else is a clear BAD_REQUEST. The text, its nesting and its
//! number of comparisons are bounded before anything recurses.
//!
//! The parser yields a plain expression over the caller's column handles (`Filter<C>`); the
//! services turn it into a database condition (`bai_services::db::condition`).
use crate::error::{ApiError, ApiResult};

/// A parsed filter over columns `C`: the shape of the text, `|` of `&` of comparisons.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter<C> {
    /// Any of these holds (`|`).
    Any(Vec<Filter<C>>),
    /// All of these hold (`&`).
    All(Vec<Filter<C>>),
    /// `column op value`.
    Compare { column: C, op: Op, value: String },
    /// `column in [values]` (`not in` when `negated`).
    In {
        column: C,
        values: Vec<String>,
        negated: bool,
    },
    /// `!term`: the term does not hold.
    Not(Box<Filter<C>>),
}

impl<C> Filter<C> {
    /// Rewrites the values compared with the columns `of` picks (e.g. Backend.AI's enum names
    /// into the words bai stores).
    pub fn map_values(&mut self, of: &impl Fn(&C) -> bool, f: &impl Fn(&str) -> String) {
        match self {
            Filter::Any(parts) | Filter::All(parts) => {
                parts.iter_mut().for_each(|p| p.map_values(of, f));
            }
            Filter::Compare { column, value, .. } => {
                if of(column) {
                    *value = f(value);
                }
            }
            Filter::In { column, values, .. } => {
                if of(column) {
                    values.iter_mut().for_each(|v| *v = f(v));
                }
            }
            Filter::Not(inner) => inner.map_values(of, f),
        }
    }
}

/// A comparison operator of the language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Like,
    /// `like`, ignoring case.
    ILike,
    Contains,
}

impl Op {
    fn parse(op: &str) -> ApiResult<Op> {
        Ok(match op {
            "==" => Op::Eq,
            "!=" => Op::Ne,
            "<" => Op::Lt,
            "<=" => Op::Le,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            "like" => Op::Like,
            "ilike" => Op::ILike,
            "contains" => Op::Contains,
            other => return Err(bad(format!("unknown operator '{other}'"))),
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Num(String),
    Op(String),
    And,
    Or,
    Not,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
}

/// Longest filter accepted, in bytes.
pub const MAX_LEN: usize = 4096;
/// Deepest parenthesis nesting accepted.
pub const MAX_DEPTH: usize = 16;
/// Most comparisons in one filter.
pub const MAX_TERMS: usize = 64;

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::bad_request(format!("Invalid filter: {}", msg.into()))
}

fn lex(s: &str) -> ApiResult<Vec<Tok>> {
    let mut out = Vec::new();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\n' => i += 1,
            '&' => {
                out.push(Tok::And);
                i += 1;
            }
            '|' => {
                out.push(Tok::Or);
                i += 1;
            }
            '(' => {
                out.push(Tok::LParen);
                i += 1;
            }
            '[' => {
                out.push(Tok::LBracket);
                i += 1;
            }
            ']' => {
                out.push(Tok::RBracket);
                i += 1;
            }
            ',' => {
                out.push(Tok::Comma);
                i += 1;
            }
            '!' if chars.get(i + 1) != Some(&'=') => {
                out.push(Tok::Not);
                i += 1;
            }
            ')' => {
                out.push(Tok::RParen);
                i += 1;
            }
            '"' | '\'' => {
                let mut v = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err(bad("unterminated string")),
                        Some('\\') => {
                            if let Some(n) = chars.get(i + 1) {
                                v.push(*n);
                            }
                            i += 2;
                        }
                        Some(q) if *q == c => {
                            i += 1;
                            break;
                        }
                        Some(x) => {
                            v.push(*x);
                            i += 1;
                        }
                    }
                }
                out.push(Tok::Str(v));
            }
            '=' | '!' | '<' | '>' => {
                let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
                let op = if ["==", "!=", "<=", ">="].contains(&two.as_str()) {
                    two
                } else if c == '<' || c == '>' {
                    c.to_string()
                } else {
                    return Err(bad(format!("unknown operator near '{two}'")));
                };
                i += op.len();
                out.push(Tok::Op(op));
            }
            c if c.is_ascii_digit() || c == '-' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_digit() || chars[i] == '.' || chars[i] == '-')
                {
                    i += 1;
                }
                out.push(Tok::Num(chars[start..i].iter().collect()));
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                match word.to_ascii_lowercase().as_str() {
                    "like" | "ilike" | "contains" => out.push(Tok::Op(word.to_ascii_lowercase())),
                    _ => out.push(Tok::Ident(word)),
                }
            }
            other => return Err(bad(format!("unexpected '{other}'"))),
        }
    }
    Ok(out)
}

struct Parser<'a, C> {
    toks: Vec<Tok>,
    pos: usize,
    depth: usize,
    terms: usize,
    cols: &'a [(&'a str, C)],
}

impl<C: Copy> Parser<'_, C> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }
    fn or(&mut self) -> ApiResult<Filter<C>> {
        let mut any = vec![self.and()?];
        while self.peek() == Some(&Tok::Or) {
            self.pos += 1;
            any.push(self.and()?);
        }
        Ok(Filter::Any(any))
    }
    fn and(&mut self) -> ApiResult<Filter<C>> {
        let mut all = vec![self.term()?];
        while self.peek() == Some(&Tok::And) {
            self.pos += 1;
            all.push(self.term()?);
        }
        Ok(Filter::All(all))
    }
    /// `[v, v, …]` after `in`; each value counts against the comparison bound.
    fn list(&mut self, field: &str) -> ApiResult<Vec<String>> {
        if self.next() != Some(Tok::LBracket) {
            return Err(bad(format!("expected '[' after '{field} in'")));
        }
        let mut values = Vec::new();
        if self.peek() == Some(&Tok::RBracket) {
            self.pos += 1;
            return Ok(values);
        }
        loop {
            match self.next() {
                Some(Tok::Str(v)) | Some(Tok::Num(v)) | Some(Tok::Ident(v)) => values.push(v),
                _ => return Err(bad(format!("expected a value in the list of '{field}'"))),
            }
            self.terms += 1;
            if self.terms > MAX_TERMS {
                return Err(bad(format!("more than {MAX_TERMS} comparisons")));
            }
            match self.next() {
                Some(Tok::Comma) => continue,
                Some(Tok::RBracket) => return Ok(values),
                _ => return Err(bad(format!("expected ',' or ']' in the list of '{field}'"))),
            }
        }
    }
    fn term(&mut self) -> ApiResult<Filter<C>> {
        match self.next() {
            Some(Tok::Not) => {
                if self.depth >= MAX_DEPTH {
                    return Err(bad(format!(
                        "negations are nested more than {MAX_DEPTH} deep"
                    )));
                }
                self.depth += 1;
                let inner = self.term()?;
                self.depth -= 1;
                Ok(Filter::Not(Box::new(inner)))
            }
            Some(Tok::LParen) => {
                if self.depth >= MAX_DEPTH {
                    return Err(bad(format!(
                        "parentheses are nested more than {MAX_DEPTH} deep"
                    )));
                }
                self.depth += 1;
                let c = self.or()?;
                self.depth -= 1;
                match self.next() {
                    Some(Tok::RParen) => Ok(c),
                    _ => Err(bad("missing ')'")),
                }
            }
            Some(Tok::Ident(field)) => {
                self.terms += 1;
                if self.terms > MAX_TERMS {
                    return Err(bad(format!("more than {MAX_TERMS} comparisons")));
                }
                let col = self
                    .cols
                    .iter()
                    .find(|(n, _)| *n == field)
                    .map(|(_, c)| *c)
                    .ok_or_else(|| {
                        let names: Vec<&str> = self.cols.iter().map(|(n, _)| *n).collect();
                        bad(format!(
                            "unknown field '{field}' (one of: {})",
                            names.join(", ")
                        ))
                    })?;
                let negated = match self.peek() {
                    Some(Tok::Ident(w)) if w.eq_ignore_ascii_case("not") => {
                        self.pos += 1;
                        true
                    }
                    _ => false,
                };
                if let Some(Tok::Ident(w)) = self.peek()
                    && w.eq_ignore_ascii_case("in")
                {
                    self.pos += 1;
                    let values = self.list(&field)?;
                    return Ok(Filter::In {
                        column: col,
                        values,
                        negated,
                    });
                }
                if negated {
                    return Err(bad(format!("expected 'in' after '{field} not'")));
                }
                let Some(Tok::Op(op)) = self.next() else {
                    return Err(bad(format!("expected an operator after '{field}'")));
                };
                let value = match self.next() {
                    Some(Tok::Str(v)) | Some(Tok::Num(v)) => v,
                    Some(Tok::Ident(v)) => v,
                    _ => return Err(bad(format!("expected a value after '{field} {op}'"))),
                };
                Ok(Filter::Compare {
                    column: col,
                    op: Op::parse(&op)?,
                    value,
                })
            }
            _ => Err(bad("expected a field name or '('")),
        }
    }
}

/// Parses `filter` over the allowed `(name, column)` pairs; `None` for an empty filter.
pub fn parse<C: Copy>(filter: &str, cols: &[(&str, C)]) -> ApiResult<Option<Filter<C>>> {
    if filter.len() > MAX_LEN {
        return Err(bad(format!("longer than {MAX_LEN} bytes")));
    }
    let toks = lex(filter)?;
    if toks.is_empty() {
        return Ok(None);
    }
    let mut p = Parser {
        toks,
        pos: 0,
        depth: 0,
        terms: 0,
        cols,
    };
    let c = p.or()?;
    if p.pos != p.toks.len() {
        return Err(bad("unexpected text after the expression"));
    }
    Ok(Some(c))
}

#[cfg(test)]
mod tests {
    use super::{Filter, Op};

    /// The parsed filter written out fully parenthesised (columns are their names here).
    fn show(f: &Filter<&str>) -> String {
        let join = |parts: &[Filter<&str>], sep: &str| {
            let parts: Vec<String> = parts.iter().map(show).collect();
            format!("({})", parts.join(sep))
        };
        match f {
            Filter::Any(p) => join(p, " OR "),
            Filter::All(p) => join(p, " AND "),
            Filter::Compare { column, op, value } => format!("{column} {op:?} '{value}'"),
            Filter::In {
                column,
                values,
                negated,
            } => format!(
                "{column} {}In {values:?}",
                if *negated { "Not" } else { "" }
            ),
            Filter::Not(inner) => format!("NOT {}", show(inner)),
        }
    }

    fn sql(f: &str) -> Result<String, String> {
        let cols = [("name", "name"), ("status", "status")];
        super::parse(f, &cols)
            .map(|c| c.map(|c| show(&c)).unwrap_or_default())
            .map_err(|e| e.message)
    }

    #[test]
    fn filters() {
        let s = sql(r#"name == "a b" & (status == "RUNNING" | status == 'PENDING')"#).unwrap();
        assert_eq!(
            s,
            "((name Eq 'a b' AND ((status Eq 'RUNNING') OR (status Eq 'PENDING'))))"
        );
        let s = sql(r#"name ilike "%GPU%" | status != x"#).unwrap();
        assert_eq!(s, "((name ILike '%GPU%') OR (status Ne 'x'))");
        assert_eq!(
            super::parse("name contains 'a'", &[("name", 1)]).unwrap(),
            Some(Filter::Any(vec![Filter::All(vec![Filter::Compare {
                column: 1,
                op: Op::Contains,
                value: "a".into()
            }])]))
        );
        assert!(sql("password == 1").unwrap_err().contains("unknown field"));
        assert!(sql(r#"name == "x"#).unwrap_err().contains("unterminated"));
        assert!(sql(r#"name = "x""#).unwrap_err().contains("operator"));
        assert!(sql(r#"(name == "x""#).unwrap_err().contains("')'"));
        assert!(sql("").is_ok());
    }

    #[test]
    fn lists_and_negations() {
        assert_eq!(
            sql(r#"status in ["A", 'B'] & name not in []"#).unwrap(),
            r#"((status In ["A", "B"] AND name NotIn []))"#
        );
        assert_eq!(
            sql(r#"(! name ilike ".%")&(status != "x")"#).unwrap(),
            "((((NOT name ILike '.%')) AND ((status Ne 'x'))))"
        );
        assert_eq!(sql("!!name == 1").unwrap(), "((NOT NOT name Eq '1'))");
        assert!(sql("status in [\"A\"").unwrap_err().contains("']'"));
        assert!(sql("status in \"A\"").unwrap_err().contains("'['"));
        assert!(sql("status not == 1").unwrap_err().contains("'in'"));
        let long = format!("status in [{}]", vec!["\"a\""; 65].join(","));
        assert!(sql(&long).unwrap_err().contains("comparisons"));
        let nots = format!("{}name == 1", "!".repeat(17));
        assert!(sql(&nots).unwrap_err().contains("nested"));
        let mut f = super::parse(
            r#"status in ["DELETE_PENDING"] | status == "READY""#,
            &[("status", 1)],
        )
        .unwrap()
        .unwrap();
        f.map_values(&|c| *c == 1, &|v| v.to_lowercase().replace('_', "-"));
        assert_eq!(
            f,
            Filter::Any(vec![
                Filter::All(vec![Filter::In {
                    column: 1,
                    values: vec!["delete-pending".into()],
                    negated: false
                }]),
                Filter::All(vec![Filter::Compare {
                    column: 1,
                    op: Op::Eq,
                    value: "ready".into()
                }])
            ])
        );
    }

    #[test]
    fn hostile_filters_are_refused_without_recursing() {
        let deep = "(".repeat(200_000);
        assert!(sql(&deep).unwrap_err().contains("longer than"));
        let nested = format!("{}name == \"x\"{}", "(".repeat(17), ")".repeat(17));
        assert!(sql(&nested).unwrap_err().contains("nested"));
        let ok = format!("{}name == \"x\"{}", "(".repeat(16), ")".repeat(16));
        assert!(sql(&ok).is_ok());
        let many = vec!["name == \"x\""; 65].join(" | ");
        assert!(sql(&many).unwrap_err().contains("comparisons"));
    }

    proptest::proptest! {
        /// Any text at all: an answer (never a panic), and a refusal beyond the length bound.
        #[test]
        fn any_text_gets_an_answer(f in "[()&|=!<> \"'a-z0-9_%.-]{0,400}") {
            // An answer of either kind is fine; a panic fails the test.
            let _ = sql(&f);
        }

        /// Well-formed expressions within the bounds are accepted, nested or not.
        #[test]
        fn bounded_expressions_parse(depth in 0usize..=super::MAX_DEPTH, terms in 1usize..=8, v in "[a-z0-9]{0,12}") {
            let inner = vec![format!("name == \"{v}\""); terms].join(" & ");
            let f = format!("{}{inner}{}", "(".repeat(depth), ")".repeat(depth));
            proptest::prop_assert!(sql(&f).is_ok(), "{}", f);
            let too_deep = format!("(({}))", f.replace(&inner, &format!("{}{inner}{}", "(".repeat(super::MAX_DEPTH), ")".repeat(super::MAX_DEPTH))));
            proptest::prop_assert!(sql(&too_deep).is_err());
        }
    }

    /// Random byte soup of the filter's own alphabet never panics and never recurses past
    /// the depth bound.
    #[test]
    fn fuzz_never_panics() {
        let alphabet: Vec<char> = "()[],&|=!<> \"'\\namestuslikeicontains0123456789-._%"
            .chars()
            .collect();
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 300) as usize;
            let mut s = String::new();
            let mut x = seed;
            for _ in 0..len {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                s.push(alphabet[((x >> 33) as usize) % alphabet.len()]);
            }
            // An answer of either kind is fine; a panic fails the test.
            let _ = sql(&s);
        }
    }
}
