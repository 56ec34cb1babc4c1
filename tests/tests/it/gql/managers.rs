//! Operations of the `managers` tests (several `bai serve` on one database).

operation!(Logout, "../web/graphql/login/logout.graphql");
