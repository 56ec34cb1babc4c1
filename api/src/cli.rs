//! The `bai` command: `serve`, `migrate`, `superadmin`, `schema`, `bench`, `gpus`, backups,
//! configuration checks (`bai --help`).
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "bai", about = "Backend.AI, rebuilt in Rust as one binary")]
struct Cli {
    /// TOML configuration file.
    #[arg(long, global = true, env = "BAI_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (manager, agents and web console).
    Serve {
        /// Listen address (default 127.0.0.1:8090).
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Data directory (default ./data).
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Apply database migrations and exit.
    Migrate {
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Create a superadmin, or reset an account's password and make it a superadmin.
    Superadmin {
        #[arg(long)]
        email: String,
        /// The new password; omitted = a random one-time password, printed once.
        #[arg(long, env = "BAI_NEW_PASSWORD")]
        password: Option<String>,
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Print the GraphQL schema (SDL), as committed in api/schema.graphql.
    Schema,
    /// Print the example configuration (as committed in deploy/bai.toml): every setting with
    /// its documentation, environment variable and default.
    ConfigExample,
    /// Check a configuration file as `bai serve` reads it (without the environment): prints
    /// what is wrong, with its line and key, and exits non-zero.
    CheckConfig {
        /// The TOML file (default: --config).
        file: Option<PathBuf>,
    },
    /// What NVML sees on this host (GPUs, UUIDs, memory, MIG mode, driver, processes) and the
    /// GPU slots an agent here would offer; needs no server, database or Docker.
    Gpus {
        /// One JSON object (NVML's snapshot, the devices and slots) instead of the report.
        #[arg(long)]
        json: bool,
        /// Print the MPS environment a container granted this many `cuda.shares` of the first
        /// GPU would get (`KEY=VALUE` lines), and nothing else.
        #[arg(long, value_name = "SHARES")]
        mps_env: Option<rust_decimal::Decimal>,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions { shell: clap_complete::Shell },
    /// Print the manual page (roff): `bai man > bai.1`.
    Man,
    /// Write a consistent copy of the SQLite database to PATH (a new file) while the server
    /// runs. PostgreSQL: use pg_dump.
    Backup {
        path: PathBuf,
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Put a backup in place in a data directory whose server is stopped.
    Restore {
        path: PathBuf,
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Replace an existing database (kept as bai.db.before-restore).
        #[arg(long)]
        force: bool,
    },
    /// Benchmarks: scheduler placements/s and session launch latency, each against a
    /// baseline measured in the same run.
    Bench(crate::bench::Args),
}

/// `format`: `text` (default) or `json` (one object per line, for log shippers).
fn init_logging(filter: &str, format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter));
    let fmt = tracing_subscriber::fmt().with_env_filter(filter);
    if format.eq_ignore_ascii_case("json") {
        fmt.json().with_current_span(false).init();
    } else {
        fmt.with_target(false).init();
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
    tracing::info!("shutting down");
}

fn print_password_banner(email: &str, password: &str) {
    eprintln!();
    eprintln!("==================================================================");
    eprintln!(" bai superadmin: {email}");
    eprintln!(" one-time password: {password}");
    eprintln!(" (shown only now; you must change it at the first login)");
    eprintln!("==================================================================");
    eprintln!();
}

/// The `bai` command line: parses the arguments and runs the command on a multi-threaded tokio
/// runtime. It lives in the library, not in the binary: a binary that awaited the library's
/// async functions would compile their whole call tree (the server, GraphQL, every service)
/// a second time — that copy was 2.5 of the 14 minutes of a fresh release build.
///
/// `version` is what `bai --version` and the manual page print (`0.1.0 (commit 94894b5)`): the
/// binary's, which embeds the commit, so that a new commit recompiles the binary alone.
pub fn main(version: &'static str) -> anyhow::Result<()> {
    let cli = parse(version);
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?
        .block_on(run(cli, version))
}

/// The command line as clap describes it, with `version` (`--version`, the manual page).
fn command(version: &'static str) -> clap::Command {
    use clap::CommandFactory;
    Cli::command().version(version)
}

/// The arguments (`Cli::parse` with the version given at run time): help, the version and
/// usage errors are printed and end the process.
fn parse(version: &'static str) -> Cli {
    use clap::FromArgMatches;
    let mut cmd = command(version);
    let mut matches = cmd.get_matches_mut();
    Cli::from_arg_matches_mut(&mut matches).unwrap_or_else(|e| e.format(&mut cmd).exit())
}

async fn run(cli: Cli, version: &'static str) -> anyhow::Result<()> {
    // These read no configuration of their own (a broken one is what check-config reports).
    match &cli.command {
        Command::ConfigExample => {
            print!("{}", crate::Config::example_toml());
            return Ok(());
        }
        Command::CheckConfig { file } => {
            let file = file.clone().or(cli.config.clone()).ok_or_else(|| {
                anyhow::anyhow!("which file? `bai check-config FILE` (or --config)")
            })?;
            let (config, set) = match crate::Config::check_file(&file) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("{} is not a valid bai configuration: {e:#}", file.display());
                    std::process::exit(1);
                }
            };
            println!(
                "{}: valid ({set} setting{} given; bai would listen on {})",
                file.display(),
                if set == 1 { "" } else { "s" },
                config.listen
            );
            return Ok(());
        }
        _ => {}
    }
    let mut config = crate::Config::load(cli.config.as_deref())?;
    match cli.command {
        Command::Serve { listen, data_dir } => {
            if let Some(l) = listen {
                config.listen = l;
            }
            if let Some(d) = data_dir {
                config.data_dir = d;
            }
            init_logging(&config.log, &config.log_format);
            let scheme = if config.tls_cert.is_some() {
                "https"
            } else {
                "http"
            };
            let server = crate::start_with_shutdown(config, Box::pin(shutdown_signal())).await?;
            if let Some((email, Some(pw))) = &server.created_superadmin {
                print_password_banner(email, pw);
            } else if let Some((email, None)) = &server.created_superadmin {
                tracing::info!(%email, "created the first superadmin from BAI_ADMIN_EMAIL/BAI_ADMIN_PASSWORD");
            }
            tracing::info!(addr = %server.addr, version = crate::VERSION, "bai is listening: {scheme}://{}", server.addr);
            server.wait().await
        }
        Command::Migrate { data_dir } => {
            if let Some(d) = data_dir {
                config.data_dir = d;
            }
            init_logging(&config.log, &config.log_format);
            if config.database_url.is_none() {
                crate::db::prepare_data_dir(&config)?;
            }
            crate::db::connect_and_migrate(&config.effective_database_url()).await?;
            tracing::info!("migrations applied");
            Ok(())
        }
        Command::Superadmin {
            email,
            password,
            data_dir,
        } => {
            if let Some(d) = data_dir {
                config.data_dir = d;
            }
            init_logging(&config.log, &config.log_format);
            if config.database_url.is_none() {
                crate::db::prepare_data_dir(&config)?;
            }
            let db = crate::db::connect_and_migrate(&config.effective_database_url()).await?;
            crate::db::seed_defaults(&db, &bai_core::clock::SystemClock)
                .await
                .context("seeding default objects")?;
            let generated = password.is_none();
            let pw = password.unwrap_or_else(crate::auth::tokens::new_password);
            let email = crate::db::set_superadmin(
                &db,
                &config,
                &bai_core::clock::SystemClock,
                &email,
                &pw,
                generated,
            )
            .await?;
            if generated {
                print_password_banner(&email, &pw);
            } else {
                eprintln!("superadmin {email} is ready");
            }
            Ok(())
        }
        Command::Bench(args) => {
            init_logging("warn", "text");
            crate::bench::run(args).await
        }
        Command::Backup { path, data_dir } => {
            if let Some(d) = data_dir {
                config.data_dir = d;
            }
            init_logging("warn", "text");
            crate::db::backup(&config, &path).await?;
            eprintln!("backup written to {} (integrity checked)", path.display());
            Ok(())
        }
        Command::Restore {
            path,
            data_dir,
            force,
        } => {
            if let Some(d) = data_dir {
                config.data_dir = d;
            }
            init_logging("warn", "text");
            crate::db::restore(&config, &path, force).await?;
            eprintln!(
                "restored {} into {}; start the server",
                path.display(),
                config.data_dir.display()
            );
            Ok(())
        }
        Command::Completions { shell } => {
            print!("{}", completions(shell, version));
            Ok(())
        }
        Command::Gpus { json, mps_env } => {
            let per_gpu = config.cuda_shares_per_gpu;
            let snap = bai_engine::gpu::read()
                .map_err(|e| anyhow::anyhow!("NVML is not available on this host: {e}"))?;
            if let Some(shares) = mps_env {
                print!("{}", crate::gpus::mps_env(&snap, per_gpu, shares)?);
                return Ok(());
            }
            let dir = (!config.gpu_mps_dir.is_empty()).then_some(config.gpu_mps_dir.as_str());
            let mps = dir.map(|d| {
                let devices = bai_engine::gpu::devices(&snap);
                (
                    d,
                    bai_engine::gpu::mps_all_ready(std::path::Path::new(d), &devices),
                )
            });
            if json {
                let devices = bai_engine::gpu::devices(&snap);
                let slots: serde_json::Map<String, serde_json::Value> =
                    bai_engine::gpu::slots(&devices, per_gpu)
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), serde_json::json!(v.to_string())))
                        .collect();
                let out = serde_json::json!({
                    "nvml": snap,
                    "devices": devices,
                    "slots": slots,
                    "cuda_shares_per_gpu": per_gpu,
                    "mps": mps.as_ref().map(|(d, r)| serde_json::json!({
                        "dir": d, "ready": r.is_ok(), "reason": r.as_ref().err(),
                    })),
                });
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                print!("{}", crate::gpus::report(&snap, per_gpu, mps));
            }
            Ok(())
        }
        Command::Man => {
            print!("{}", man_page(version)?);
            Ok(())
        }
        Command::Schema => {
            print!("{}", crate::graphql::schema::sdl());
            Ok(())
        }
        // Handled before the configuration is loaded.
        Command::ConfigExample | Command::CheckConfig { .. } => Ok(()),
    }
}

fn completions(shell: clap_complete::Shell, version: &'static str) -> String {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command(version), "bai", &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn man_page(version: &'static str) -> anyhow::Result<String> {
    let mut out = Vec::new();
    clap_mangen::Man::new(command(version))
        .render(&mut out)
        .context("rendering the manual page")?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn completions_and_man_page_name_the_commands() {
        let version = "0.1.0 (commit 94894b5)";
        let bash = super::completions(clap_complete::Shell::Bash, version);
        assert!(bash.contains("serve") && bash.contains("backup") && bash.contains("restore"));
        let zsh = super::completions(clap_complete::Shell::Zsh, version);
        assert!(zsh.contains("#compdef bai"));
        let man = super::man_page(version).unwrap();
        assert!(man.contains(".TH bai") && man.contains("backup"), "{man}");
        // The version the binary gives is the manual's.
        assert!(man.contains("\"bai 0.1.0 (commit 94894b5)\""), "{man}");
    }
}
