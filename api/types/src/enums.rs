//! Enumerations stored as strings, using Backend.AI's own values so existing scripts and
//! dashboards read the same words.
#[cfg(feature = "db")]
use sea_orm::entity::prelude::StringLen;
use serde::{Deserialize, Serialize};

/// Generates `as_str`, `parse` and `ALL` for a string-valued enum so the GraphQL layer can
/// validate free-form input against Backend.AI's values with one call.
macro_rules! string_enum {
    ($name:ident { $($variant:ident = $value:literal),+ $(,)? }) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[cfg_attr(feature = "db", derive(sea_orm::EnumIter, sea_orm::DeriveActiveEnum))]
        #[cfg_attr(feature = "db", sea_orm(rs_type = "String", db_type = "String(StringLen::N(32))"))]
        pub enum $name {
            $(
                #[cfg_attr(feature = "db", sea_orm(string_value = $value))]
                #[serde(rename = $value)]
                $variant,
            )+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $value,)+
                }
            }

            /// Parses Backend.AI's string value (case-insensitive).
            pub fn parse(s: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.as_str().eq_ignore_ascii_case(s.trim()))
            }

            /// The accepted values, for error messages.
            pub fn choices() -> String {
                Self::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ")
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

string_enum!(UserRole {
    Superadmin = "superadmin",
    Admin = "admin",
    User = "user",
    Monitor = "monitor",
});

string_enum!(UserStatus {
    Active = "active",
    Inactive = "inactive",
    Deleted = "deleted",
    BeforeVerification = "before-verification",
});

string_enum!(DefaultForUnspecified {
    Limited = "LIMITED",
    Unlimited = "UNLIMITED",
});

string_enum!(SchedulerKind {
    Fifo = "fifo",
    Lifo = "lifo",
    Drf = "drf",
});

string_enum!(AgentStatus {
    Alive = "ALIVE",
    Lost = "LOST",
    Restarting = "RESTARTING",
    Terminated = "TERMINATED",
});

string_enum!(SessionStatus {
    Pending = "PENDING",
    Scheduled = "SCHEDULED",
    Preparing = "PREPARING",
    Pulling = "PULLING",
    Running = "RUNNING",
    Restarting = "RESTARTING",
    Terminating = "TERMINATING",
    Terminated = "TERMINATED",
    Error = "ERROR",
    Cancelled = "CANCELLED",
});

impl SessionStatus {
    /// Statuses in which a session holds resources on an agent (and may have a container).
    pub const ALLOCATED: &'static [SessionStatus] = &[
        SessionStatus::Scheduled,
        SessionStatus::Preparing,
        SessionStatus::Pulling,
        SessionStatus::Running,
        SessionStatus::Restarting,
        SessionStatus::Terminating,
    ];

    /// Statuses of sessions that are not over yet (the complement of `is_over`), for queries
    /// that select live sessions.
    pub const LIVE: &'static [SessionStatus] = &[
        SessionStatus::Pending,
        SessionStatus::Scheduled,
        SessionStatus::Preparing,
        SessionStatus::Pulling,
        SessionStatus::Running,
        SessionStatus::Restarting,
        SessionStatus::Terminating,
    ];

    /// Whether the session is over: terminated, cancelled or failed. An ended session holds
    /// no resources and its status never changes again.
    pub fn is_over(self) -> bool {
        matches!(self, Self::Terminated | Self::Cancelled | Self::Error)
    }

    /// Whether the session is not over yet: pending, on its way, running or ending.
    pub fn is_live(self) -> bool {
        !self.is_over()
    }
}

string_enum!(SessionType {
    Interactive = "interactive",
    Batch = "batch",
    Inference = "inference",
    System = "system",
});

string_enum!(ClusterMode {
    SingleNode = "single-node",
    MultiNode = "multi-node",
});

string_enum!(SessionResult {
    Undefined = "undefined",
    Success = "success",
    Failure = "failure",
});

string_enum!(ClusterRole {
    Main = "main",
    Sub = "sub",
});

string_enum!(ImageType {
    Compute = "compute",
    System = "system",
    Service = "service",
});

string_enum!(RegistryType {
    Docker = "docker",
    Harbor = "harbor",
    Harbor2 = "harbor2",
    Local = "local",
});

string_enum!(VFolderPermission {
    ReadOnly = "ro",
    ReadWrite = "rw",
    ReadWriteDelete = "wd",
});

string_enum!(VFolderOwnershipType {
    User = "user",
    Group = "group",
});

string_enum!(VFolderUsageMode {
    General = "general",
    Model = "model",
    Data = "data",
});

string_enum!(VFolderStatus {
    Ready = "ready",
    Performing = "performing",
    Mounted = "mounted",
    Error = "error",
    DeletePending = "delete-pending",
    DeleteOngoing = "delete-ongoing",
    DeleteComplete = "delete-complete",
});

string_enum!(InvitationState {
    Pending = "pending",
    Accepted = "accepted",
    Rejected = "rejected",
    Canceled = "canceled",
});

string_enum!(GroupType {
    General = "general",
    ModelStore = "model-store",
});

#[cfg(test)]
mod tests {
    use super::SessionStatus;

    #[test]
    fn live_is_the_complement_of_over() {
        let live: Vec<_> = SessionStatus::ALL
            .iter()
            .copied()
            .filter(|s| s.is_live())
            .collect();
        assert_eq!(live, SessionStatus::LIVE);
        for s in [
            SessionStatus::Terminated,
            SessionStatus::Cancelled,
            SessionStatus::Error,
        ] {
            assert!(s.is_over(), "{s} is over");
        }
        assert!(
            SessionStatus::Terminating.is_live(),
            "a session that is ending is not over"
        );
    }
}
