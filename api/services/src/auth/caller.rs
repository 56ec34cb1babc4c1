//! Who is calling, and what that allows. Resolvers get a `Caller` and turn it into a scope:
//! an `AdminScope` (superadmin: everything; domain admin: one domain) or the caller's own
//! identity. List operations take the scope, so they cannot forget the owner filter.
use std::sync::Arc;

use entity::enums::UserRole;
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};

#[derive(Debug, Clone)]
pub struct Caller {
    pub uuid: Uuid,
    pub email: String,
    pub domain_name: String,
    pub role: UserRole,
    /// The keypair this request is accounted to.
    pub access_key: Option<String>,
    /// The login session used, if any (logout revokes it).
    pub login_session: Option<Uuid>,
}

/// The principal of a request: resolved once per request by the auth middleware.
#[derive(Debug, Clone)]
pub enum Principal {
    Anonymous,
    User(Arc<Caller>),
}

impl Principal {
    pub fn caller(&self) -> ApiResult<&Caller> {
        match self {
            Principal::User(c) => Ok(c),
            Principal::Anonymous => Err(ApiError::unauthenticated("Login required.")),
        }
    }
}

/// What an administrator may see and change. Only this crate makes one (the variants are
/// non-exhaustive): a surface gets it from [`Caller::require_admin`] or
/// [`Caller::admin_scope`] and hands it to the services, so it cannot forge one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminScope {
    #[non_exhaustive]
    Super,
    #[non_exhaustive]
    Domain(String),
}

impl AdminScope {
    pub fn covers_domain(&self, domain: &str) -> bool {
        match self {
            AdminScope::Super => true,
            AdminScope::Domain(d) => d == domain,
        }
    }

    /// The domain to filter by, or None for all.
    pub fn domain(&self) -> Option<&str> {
        match self {
            AdminScope::Super => None,
            AdminScope::Domain(d) => Some(d),
        }
    }
}

/// Proof that the caller is a superadmin. Only [`Caller::require_superadmin`] makes one (its
/// field is private), and the services whose operations are for superadmins alone take it as
/// a parameter: a surface that forgot the check does not compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuperadminScope {
    actor: String,
}

impl SuperadminScope {
    /// Who acts (recorded in the audit log).
    pub fn actor(&self) -> &str {
        &self.actor
    }
}

/// What a list query may return: all (superadmin), one domain (domain admin), or only the
/// caller's own objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadScope {
    Admin(AdminScope),
    Own { user: Uuid, domain: String },
}

/// Role order: superadmin > admin > user = monitor.
pub fn rank(role: UserRole) -> u8 {
    match role {
        UserRole::Superadmin => 3,
        UserRole::Admin => 2,
        UserRole::User | UserRole::Monitor => 1,
    }
}

/// The roles a domain admin governs (ranked below it).
pub const GOVERNED_BY_DOMAIN_ADMINS: [UserRole; 2] = [UserRole::User, UserRole::Monitor];

impl Caller {
    /// The caller a user row acts as: with the keypair the request is accounted to and the
    /// login session it came by, if any.
    pub fn of_user(
        user: entity::users::Model,
        access_key: Option<String>,
        login_session: Option<Uuid>,
    ) -> Caller {
        Caller {
            uuid: user.uuid,
            email: user.email,
            domain_name: user.domain_name,
            role: user.role,
            access_key,
            login_session,
        }
    }

    /// Whether the caller may see and act on what belongs to the user `uuid` (`role`, in
    /// `domain`): its own things; everything for a superadmin; for a domain admin, the things
    /// of lower-ranked users of its domain. Everything else must look like it does not exist.
    pub fn governs(&self, uuid: Uuid, role: UserRole, domain: &str) -> bool {
        if uuid == self.uuid || self.is_superadmin() {
            return true;
        }
        self.admin_scope()
            .is_some_and(|s| s.covers_domain(domain) && rank(role) < rank(self.role))
    }

    pub fn is_superadmin(&self) -> bool {
        self.role == UserRole::Superadmin
    }

    pub fn admin_scope(&self) -> Option<AdminScope> {
        match self.role {
            UserRole::Superadmin => Some(AdminScope::Super),
            UserRole::Admin => Some(AdminScope::Domain(self.domain_name.clone())),
            UserRole::User | UserRole::Monitor => None,
        }
    }

    pub fn require_admin(&self) -> ApiResult<AdminScope> {
        self.admin_scope()
            .ok_or_else(|| ApiError::forbidden("This operation requires administrator privileges."))
    }

    /// The proof a superadmin-only service asks for (FORBIDDEN for anyone else).
    pub fn require_superadmin(&self) -> ApiResult<SuperadminScope> {
        if self.is_superadmin() {
            Ok(SuperadminScope {
                actor: self.email.clone(),
            })
        } else {
            Err(ApiError::forbidden(
                "This operation requires superadmin privileges.",
            ))
        }
    }

    pub fn read_scope(&self) -> ReadScope {
        match self.admin_scope() {
            Some(s) => ReadScope::Admin(s),
            None => ReadScope::Own {
                user: self.uuid,
                domain: self.domain_name.clone(),
            },
        }
    }
}
