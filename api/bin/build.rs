//! Records the commit bai is built from (`bai --version`): `git rev-parse --short=12 HEAD`;
//! `unknown` outside a git checkout.
fn main() {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=BAI_COMMIT={commit}");
    // Run again when HEAD moves: a checkout changes HEAD, a commit the branch's ref.
    if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
        println!("cargo:rerun-if-changed={head}");
    }
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(path) = git(&["rev-parse", "--git-path", &r])
    {
        println!("cargo:rerun-if-changed={path}");
    }
}
