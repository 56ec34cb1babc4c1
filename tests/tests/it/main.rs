//! The one integration-test binary: every test boots the real server and talks to it over
//! HTTP/WebSocket, on SQLite and on PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod gql;
mod support;

mod admin;
mod auth;
mod browser;
mod cli;
mod consoles;
mod dotfiles;
mod faults;
mod folders;
mod hostile;
mod hosts;
mod i18n;
mod lablup;
mod live;
mod mail;
mod managers;
mod matrix;
mod nodes;
mod ops;
mod registry;
mod roles;
mod sandbox;
mod serving;
mod sessions;
mod statistics;
mod storage;
