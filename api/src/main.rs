//! The `bai` binary: the command line lives in the library (`api::cli`), so that this crate
//! compiles nothing of the server a second time.
fn main() -> anyhow::Result<()> {
    api::cli::main()
}
