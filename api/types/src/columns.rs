//! Typed JSON columns: what a JSON column holds, as a Rust type. A row whose JSON no longer has
//! that shape fails to load with an error (never read as empty, which would lose data).
use serde::{Deserialize, Serialize};

/// A list of names (agent ids, registry host names) stored as a JSON array of strings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "db", derive(sea_orm::FromJsonQueryResult))]
#[serde(transparent)]
pub struct StringList(pub Vec<String>);

impl StringList {
    pub fn contains(&self, s: &str) -> bool {
        self.0.iter().any(|x| x == s)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<Vec<String>> for StringList {
    fn from(v: Vec<String>) -> Self {
        Self(v)
    }
}

/// A folder mounted into a session: which, where on the host, where in the container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountSpec {
    pub id: uuid::Uuid,
    pub name: String,
    /// The storage host the folder lives on (rows written before it was recorded: None, and
    /// `host_path` holds wherever the manager's host sees it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_host: Option<String>,
    pub host_path: String,
    pub target: String,
    pub read_only: bool,
}

/// The folders of a session (and of its kernel), stored as a JSON array.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "db", derive(sea_orm::FromJsonQueryResult))]
#[serde(transparent)]
pub struct Mounts(pub Vec<MountSpec>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_a_json_array_and_nothing_else() {
        let l: StringList = serde_json::from_str(r#"["i-a","i-b"]"#).unwrap();
        assert!(l.contains("i-b") && !l.contains("i-c"));
        assert_eq!(serde_json::to_string(&l).unwrap(), r#"["i-a","i-b"]"#);
        assert!(serde_json::from_str::<StringList>(r#"{"a":1}"#).is_err());
        assert!(serde_json::from_str::<StringList>(r#"[1]"#).is_err());
    }

    #[test]
    fn mounts_without_their_fields_do_not_load() {
        let id = "00000000-0000-0000-0000-000000000001";
        let ok = format!(
            r#"[{{"id":"{id}","name":"data","host_path":"/v/data","target":"/home/work/data","read_only":true}}]"#
        );
        let m: Mounts = serde_json::from_str(&ok).unwrap();
        assert_eq!(m.0[0].target, "/home/work/data");
        assert!(serde_json::from_str::<Mounts>(&ok.replace("host_path", "path")).is_err());
    }
}
