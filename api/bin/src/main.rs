//! The `bai` binary: the command line lives in the library (`api::cli`), so that this crate
//! compiles nothing of the server a second time. What it adds is the commit it was built from
//! (build.rs): a new commit recompiles this crate alone, never the server.

/// `bai --version`: the version and the commit it was built from (`unknown` outside a git
/// checkout), e.g. `0.1.0 (commit 94894b5)`.
const VERSION_LINE: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("BAI_COMMIT"),
    ")"
);

fn main() -> anyhow::Result<()> {
    api::cli::main(VERSION_LINE)
}
