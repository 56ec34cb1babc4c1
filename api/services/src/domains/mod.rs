//! Domains: the top layer of authority and resource control. Superadmins manage them;
//! everyone else sees only their own domain.
