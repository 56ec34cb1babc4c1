//! Backend.AI 26's typed filter inputs (`StringFilter`, the enum filters, `AND`/`OR`/`NOT`) as
//! database conditions. Patterns are matched literally: `%`, `_` and `\` in a value are
//! escaped, so `contains: "50%"` finds "50%" and nothing else.
use async_graphql::InputObject;
use sea_orm::sea_query::{Expr, Func, LikeExpr, SimpleExpr};
use sea_orm::{ColumnTrait, Condition};

/// Backend.AI's `StringFilter`; the `i…` forms ignore case. Every given test must hold.
#[derive(InputObject, Default, Clone)]
pub struct StringFilter {
    contains: Option<String>,
    starts_with: Option<String>,
    ends_with: Option<String>,
    equals: Option<String>,
    not_contains: Option<String>,
    not_starts_with: Option<String>,
    not_ends_with: Option<String>,
    not_equals: Option<String>,
    i_contains: Option<String>,
    i_starts_with: Option<String>,
    i_ends_with: Option<String>,
    i_equals: Option<String>,
    i_not_contains: Option<String>,
    i_not_starts_with: Option<String>,
    i_not_ends_with: Option<String>,
    i_not_equals: Option<String>,
    #[graphql(name = "in")]
    in_: Option<Vec<String>>,
    not_in: Option<Vec<String>>,
    i_in: Option<Vec<String>>,
    i_not_in: Option<Vec<String>>,
}

/// A LIKE pattern that matches `value` literally between `prefix` and `suffix` wildcards.
fn pattern(prefix: &str, value: &str, suffix: &str) -> LikeExpr {
    let mut p = String::from(prefix);
    for ch in value.chars() {
        if matches!(ch, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(ch);
    }
    p.push_str(suffix);
    LikeExpr::new(p).escape('\\')
}

fn lower<C: ColumnTrait>(col: C) -> Expr {
    Expr::expr(Func::lower(Expr::col(col)))
}

/// The condition `f` stands for on the text column `col`.
pub fn string<C: ColumnTrait>(col: C, f: &StringFilter) -> Condition {
    let mut c = Condition::all();
    let mut add = |e: Option<SimpleExpr>| {
        if let Some(e) = e {
            c = std::mem::replace(&mut c, Condition::all()).add(e);
        }
    };
    let lc = |s: &String| s.to_lowercase();
    add(f.contains.as_ref().map(|v| col.like(pattern("%", v, "%"))));
    add(f
        .starts_with
        .as_ref()
        .map(|v| col.like(pattern("", v, "%"))));
    add(f.ends_with.as_ref().map(|v| col.like(pattern("%", v, ""))));
    add(f.equals.as_ref().map(|v| col.eq(v.clone())));
    add(f
        .not_contains
        .as_ref()
        .map(|v| col.not_like(pattern("%", v, "%"))));
    add(f
        .not_starts_with
        .as_ref()
        .map(|v| col.not_like(pattern("", v, "%"))));
    add(f
        .not_ends_with
        .as_ref()
        .map(|v| col.not_like(pattern("%", v, ""))));
    add(f.not_equals.as_ref().map(|v| col.ne(v.clone())));
    add(f
        .i_contains
        .as_ref()
        .map(|v| lower(col).like(pattern("%", &lc(v), "%"))));
    add(f
        .i_starts_with
        .as_ref()
        .map(|v| lower(col).like(pattern("", &lc(v), "%"))));
    add(f
        .i_ends_with
        .as_ref()
        .map(|v| lower(col).like(pattern("%", &lc(v), ""))));
    add(f.i_equals.as_ref().map(|v| lower(col).eq(lc(v))));
    add(f
        .i_not_contains
        .as_ref()
        .map(|v| lower(col).not_like(pattern("%", &lc(v), "%"))));
    add(f
        .i_not_starts_with
        .as_ref()
        .map(|v| lower(col).not_like(pattern("", &lc(v), "%"))));
    add(f
        .i_not_ends_with
        .as_ref()
        .map(|v| lower(col).not_like(pattern("%", &lc(v), ""))));
    add(f.i_not_equals.as_ref().map(|v| lower(col).ne(lc(v))));
    add(f.in_.as_ref().map(|v| col.is_in(v.clone())));
    add(f.not_in.as_ref().map(|v| col.is_not_in(v.clone())));
    add(f.i_in.as_ref().map(|v| lower(col).is_in(v.iter().map(lc))));
    add(f
        .i_not_in
        .as_ref()
        .map(|v| lower(col).is_not_in(v.iter().map(lc))));
    c
}

/// The condition of an enum filter (`equals`, `in`, `notEquals`, `notIn`) on `col`, the
/// values already turned into what the column stores.
pub fn enumeration<C: ColumnTrait>(
    col: C,
    equals: Option<&str>,
    in_: Option<Vec<&str>>,
    not_equals: Option<&str>,
    not_in: Option<Vec<&str>>,
) -> Condition {
    let mut c = Condition::all();
    if let Some(v) = equals {
        c = c.add(col.eq(v));
    }
    if let Some(v) = in_ {
        c = c.add(col.is_in(v));
    }
    if let Some(v) = not_equals {
        c = c.add(col.ne(v));
    }
    if let Some(v) = not_in {
        c = c.add(col.is_not_in(v));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use entity::users;
    use sea_orm::sea_query::{Asterisk, Query, SqliteQueryBuilder};

    fn sql(c: Condition) -> String {
        Query::select()
            .column(Asterisk)
            .from(users::Entity)
            .cond_where(c)
            .to_string(SqliteQueryBuilder)
    }

    #[test]
    fn wildcards_in_values_are_matched_literally() {
        let f = StringFilter {
            contains: Some("50%_a\\".into()),
            ..Default::default()
        };
        let s = sql(string(users::Column::Email, &f));
        assert!(s.contains(r"LIKE '%50\%\_a\\%' ESCAPE '\'"), "{s}");
    }

    #[test]
    fn case_blind_forms_compare_lowercase() {
        let f = StringFilter {
            i_equals: Some("A@X.ORG".into()),
            i_in: Some(vec!["B@X.org".into()]),
            ..Default::default()
        };
        let s = sql(string(users::Column::Email, &f));
        assert!(s.contains("LOWER(\"email\") = 'a@x.org'"), "{s}");
        assert!(s.contains("LOWER(\"email\") IN ('b@x.org')"), "{s}");
    }
}
