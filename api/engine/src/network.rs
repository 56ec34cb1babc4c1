//! Network isolation of sessions. Every session container joins one bridge network per
//! engine (`bai-sessions`, shared by the installations on that engine) with inter-container
//! traffic off, and firewall rules on the engine's host keep containers away from the host
//! itself (services on the bridge gateway included), from link-local addresses (cloud
//! metadata at 169.254.169.254) and from the other hosts' engines and sessions. The server
//! reaches the session's ports at the containers' addresses on the bridge: on its own host
//! directly, on a remote host through a route to that host's session subnet, where the rules
//! let in the manager's address alone.
//!
//! On the manager's host bai runs `iptables` itself. On a remote host it has no program of
//! its own: it runs a short-lived container of its probe image (a static busybox) through the
//! engine — not privileged, but in the host's network and PID namespaces with the capabilities
//! to enter the engine process's mount namespace and run the host's own `iptables` — to check
//! the rules and insert what is missing,
//! then a second, unprivileged probe on the session network proves what a session sees: the
//! manager reaches it, it does not reach its host. An engine whose host fails either is refused.
use std::collections::HashMap;
use std::net::IpAddr;

use anyhow::Context;
use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig, Ipam, IpamConfig, NetworkCreateRequest};
use futures_util::StreamExt;

/// The session network and its bridge (a bridge name has at most 15 bytes).
pub const NETWORK: &str = "bai-sessions";
pub const BRIDGE: &str = "bai-sessions";

/// A cluster session's private network, and its bridge: `bai-c` and ten hex digits of the
/// session id (a bridge name has at most 15 bytes); the host's rules match them all by the
/// prefix ([`CLUSTER_BRIDGES`]).
pub fn cluster_network_name(session_id: uuid::Uuid) -> String {
    format!("bai-cluster-{}", session_id.simple())
}

pub fn cluster_bridge_name(session_id: uuid::Uuid) -> String {
    format!("bai-c{}", &session_id.simple().to_string()[..10])
}

/// Where cluster networks' subnets are taken from: a /24 of 10.250.0.0/16 per session (the
/// first free one from a place picked by the session id).
pub fn cluster_subnet_candidates(session_id: uuid::Uuid) -> impl Iterator<Item = u8> {
    let start = session_id.as_bytes()[0];
    (0..=255u8).map(move |i| start.wrapping_add(i))
}

/// `iptables`' wildcard for every cluster bridge.
pub const CLUSTER_BRIDGES: &str = "bai-c+";

/// The probe image bai makes on each remote engine from a static busybox.
pub const PROBE_IMAGE: &str = "bai.local/probe:busybox-1";

/// The label of what this installation makes on an engine (networks, probes).
fn managed_labels() -> HashMap<String, String> {
    HashMap::from([(
        crate::MANAGED_LABEL.to_string(),
        crate::MANAGED_VALUE.to_string(),
    )])
}

/// Where the session network of one engine's host sits among the others.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostNetwork {
    /// The session network's subnet (`10.233.1.0/24`); required on a remote host, whose
    /// sessions the manager reaches through a route to it. None: Docker picks one.
    pub subnet: Option<String>,
    /// The manager's address as this host sees it: the one source let into its sessions
    /// (remote hosts; None: found from the route to the engine).
    pub manager: Option<IpAddr>,
    /// Addresses and subnets this host's sessions must never reach: the other hosts' engines
    /// and session networks (through the manager's host, a session would otherwise arrive
    /// there masqueraded as the manager).
    pub forbidden: Vec<String>,
    /// A static busybox binary (`/bin/busybox` of Debian's busybox-static) for the probe image.
    pub busybox: std::path::PathBuf,
}

/// The rules, as `iptables` arguments after `-C`/`-I`: (chain, rule). Each is inserted at the
/// top, so a rule listed later sits above the earlier ones.
pub fn rules(bridge: &str, net: &HostNetwork) -> Vec<(&'static str, Vec<String>)> {
    let r = |parts: &[&str]| parts.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    let mut out = vec![
        // Forwarded traffic: not to another container, not to link-local addresses.
        (
            "DOCKER-USER",
            r(&["-i", bridge, "-o", bridge, "-j", "DROP"]),
        ),
        (
            "DOCKER-USER",
            r(&["-i", bridge, "-d", "169.254.0.0/16", "-j", "DROP"]),
        ),
    ];
    // Into the sessions from outside: nothing new, whatever the host's FORWARD policy, but
    // the manager's connections (the app proxy, the port pool) on a remote host. One rule,
    // so that its place among rules already there does not matter.
    let mut inbound = r(&["-o", bridge]);
    if let Some(manager) = net.manager {
        inbound.extend(r(&["!", "-s", &manager.to_string()]));
    }
    inbound.extend(r(&["-m", "conntrack", "--ctstate", "NEW", "-j", "DROP"]));
    out.push(("DOCKER-USER", inbound));
    for target in &net.forbidden {
        out.push((
            "DOCKER-USER",
            r(&["-i", bridge, "-d", target, "-j", "DROP"]),
        ));
    }
    out.extend([
        // A cluster session's private network carries only its own containers' traffic:
        // nothing forwarded elsewhere, nothing to the host.
        (
            "DOCKER-USER",
            r(&[
                "-i",
                CLUSTER_BRIDGES,
                "!",
                "-o",
                CLUSTER_BRIDGES,
                "-j",
                "DROP",
            ]),
        ),
        // Nor anything into one from elsewhere (another session through its default route).
        (
            "DOCKER-USER",
            r(&[
                "-o",
                CLUSTER_BRIDGES,
                "!",
                "-i",
                CLUSTER_BRIDGES,
                "-j",
                "DROP",
            ]),
        ),
        ("INPUT", r(&["-i", CLUSTER_BRIDGES, "-j", "DROP"])),
        // To the host itself: only answers to connections the host opened (the app proxy).
        ("INPUT", r(&["-i", bridge, "-j", "DROP"])),
        (
            "INPUT",
            r(&[
                "-i",
                bridge,
                "-m",
                "conntrack",
                "--ctstate",
                "ESTABLISHED,RELATED",
                "-j",
                "ACCEPT",
            ]),
        ),
    ]);
    out
}

/// A rule's words for a script: each quoted, and the whole as plain text for a message.
fn shell_rule(rule: &[String]) -> (String, String) {
    let words: Vec<String> = rule.iter().map(|w| quoted(w)).collect();
    (words.join(" "), rule.join(" ").replace('\'', ""))
}

/// A shell word in single quotes.
fn quoted(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// The script that puts the host's rules in place (after [`rules_preamble`]): each checked,
/// inserted at the top when missing, then every rule checked again.
pub fn host_rules_script(bridge: &str, net: &HostNetwork) -> String {
    let mut script = String::new();
    let all = rules(bridge, net);
    for (chain, rule) in &all {
        let (words, plain) = shell_rule(rule);
        script.push_str(&format!(
            "ipt -C {chain} {words} 2>/dev/null || ipt -I {chain} 1 {words} || echo 'cannot insert: {chain} {plain}'\n"
        ));
    }
    script.push_str("missing=0\n");
    for (chain, rule) in &all {
        let (words, plain) = shell_rule(rule);
        script.push_str(&format!(
            "ipt -C {chain} {words} 2>/dev/null || {{ echo 'missing: {chain} {plain}'; missing=1; }}\n"
        ));
    }
    script.push_str("exit $missing\n");
    script
}

/// Makes sure the installation's network exists (with `net.subnet` when given) and that the
/// host's firewall rules are in place — on this host with iptables, on a remote one through
/// the probe containers; returns the network's name. `engine_addr` is the remote engine's
/// `host:port` (None for a local socket).
pub async fn ensure(
    docker: &Docker,
    engine_addr: Option<&str>,
    net: &HostNetwork,
) -> anyhow::Result<String> {
    let (name, bridge) = (NETWORK.to_string(), BRIDGE.to_string());
    if let Ok(existing) = docker.inspect_network(&name, None).await {
        let icc = existing
            .options
            .as_ref()
            .and_then(|o| o.get("com.docker.network.bridge.enable_icc"))
            .map(String::as_str);
        if icc != Some("false") {
            anyhow::bail!(
                "the network {name} exists but lets containers talk to each other; remove it (docker network rm {name})"
            );
        }
        if let Some(want) = &net.subnet {
            let has: Vec<String> = existing
                .ipam
                .and_then(|i| i.config)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|c| c.subnet)
                .collect();
            anyhow::ensure!(
                has.iter().any(|s| s == want),
                "the network {name} exists with the subnet {} instead of the configured session_subnet {want}; remove it (docker network rm {name}) or change the setting",
                has.join(", ")
            );
        }
    } else {
        let options: HashMap<String, String> = [
            ("com.docker.network.bridge.name", bridge.as_str()),
            ("com.docker.network.bridge.enable_icc", "false"),
            ("com.docker.network.bridge.enable_ip_masquerade", "true"),
            ("com.docker.network.bridge.host_binding_ipv4", "127.0.0.1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let labels = managed_labels();
        let ipam = net.subnet.as_ref().map(|subnet| Ipam {
            config: Some(vec![IpamConfig {
                subnet: Some(subnet.clone()),
                ..Default::default()
            }]),
            ..Default::default()
        });
        let created = docker
            .create_network(NetworkCreateRequest {
                name: name.clone(),
                driver: Some("bridge".into()),
                options: Some(options),
                labels: Some(labels),
                ipam,
                ..Default::default()
            })
            .await;
        // Another server on the same engine may have made it meanwhile.
        if let Err(e) = created
            && docker.inspect_network(&name, None).await.is_err()
        {
            return Err(e).with_context(|| format!("creating the session network {name}"));
        }
    }
    match engine_addr {
        None => host_rules(docker, false, &bridge, net)
            .await
            .with_context(|| format!("isolating the session network {name} (bridge {bridge})"))?,
        Some(addr) => {
            anyhow::ensure!(
                net.subnet.is_some(),
                "a remote engine needs session_subnet: the manager reaches its sessions through a route to that subnet"
            );
            let manager = match net.manager {
                Some(m) => m,
                None => manager_address(addr).await?,
            };
            let net = HostNetwork {
                manager: Some(manager),
                ..net.clone()
            };
            ensure_probe_image(docker, &net.busybox).await?;
            host_rules(docker, true, &bridge, &net).await?;
            prove(docker, &name, addr).await?;
        }
    }
    Ok(name)
}

/// The address this process sends from towards `addr` (`host:port`): what the remote host
/// sees as the manager (no packet is sent: a UDP socket only picks its route).
pub async fn manager_address(addr: &str) -> anyhow::Result<IpAddr> {
    let target = tokio::net::lookup_host(addr)
        .await
        .with_context(|| format!("resolving {addr}"))?
        .next()
        .with_context(|| format!("{addr} has no address"))?;
    let any: std::net::SocketAddr = if target.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    }
    .parse()?;
    let socket = tokio::net::UdpSocket::bind(any).await?;
    socket
        .connect(target)
        .await
        .with_context(|| format!("no route to {addr}"))?;
    Ok(socket.local_addr()?.ip())
}

/// The probe image (a static busybox, nothing else) on this engine.
async fn ensure_probe_image(docker: &Docker, busybox: &std::path::Path) -> anyhow::Result<()> {
    if docker.inspect_image(PROBE_IMAGE).await.is_ok() {
        return Ok(());
    }
    let binary = tokio::fs::read(busybox).await.with_context(|| {
        format!(
            "reading {} for the probe image that checks remote hosts (Debian: apt install busybox-static; setting probe_busybox)",
            busybox.display()
        )
    })?;
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Directory);
    h.set_mode(0o755);
    h.set_size(0);
    b.append_data(&mut h, "bin/", std::io::empty())?;
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_mode(0o755);
    h.set_size(binary.len() as u64);
    b.append_data(&mut h, "bin/busybox", binary.as_slice())?;
    let archive = b.into_inner()?;
    let (repo, tag) = PROBE_IMAGE
        .rsplit_once(':')
        .unwrap_or((PROBE_IMAGE, "latest"));
    let opts = bollard::query_parameters::CreateImageOptionsBuilder::default()
        .from_src("-")
        .repo(repo)
        .tag(tag)
        .changes(vec![format!(
            "LABEL {}={}",
            crate::MANAGED_LABEL,
            crate::MANAGED_VALUE
        )])
        .build();
    let mut answers =
        docker.create_image(Some(opts), Some(bollard::body_full(archive.into())), None);
    while let Some(answer) = answers.next().await {
        let answer = answer.context("importing the probe image")?;
        if let Some(e) = answer.error_detail {
            anyhow::bail!(
                "importing the probe image: {}",
                e.message.unwrap_or_default()
            );
        }
    }
    Ok(())
}

/// Runs `cmd` in a probe container with `host` settings to its end (at most `limit`);
/// returns its exit code and output, and removes it.
async fn run_probe(
    docker: &Docker,
    host: HostConfig,
    cmd: Vec<String>,
    limit: std::time::Duration,
    during: impl AsyncFnOnce(&str) -> anyhow::Result<()>,
) -> anyhow::Result<(i64, String)> {
    let labels = managed_labels();
    let created = docker
        .create_container(
            None::<bollard::query_parameters::CreateContainerOptions>,
            ContainerCreateBody {
                image: Some(PROBE_IMAGE.to_string()),
                cmd: Some(cmd),
                labels: Some(labels),
                host_config: Some(host),
                ..Default::default()
            },
        )
        .await
        .context("creating a probe container")?;
    let id = created.id;
    let outcome = async {
        docker
            .start_container(
                &id,
                None::<bollard::query_parameters::StartContainerOptions>,
            )
            .await
            .context("starting a probe container")?;
        during(&id).await?;
        let mut wait =
            docker.wait_container(&id, None::<bollard::query_parameters::WaitContainerOptions>);
        let code = match tokio::time::timeout(limit, wait.next()).await {
            Ok(Some(Ok(r))) => r.status_code,
            Ok(Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. }))) => code,
            Ok(Some(Err(e))) => return Err(e).context("waiting for a probe container"),
            Ok(None) => anyhow::bail!("a probe container vanished"),
            Err(_) => anyhow::bail!("a probe container did not end in {limit:?}"),
        };
        let mut logs = docker.logs(
            &id,
            Some(
                bollard::query_parameters::LogsOptionsBuilder::default()
                    .stdout(true)
                    .stderr(true)
                    .build(),
            ),
        );
        let mut out = String::new();
        while let Some(Ok(chunk)) = logs.next().await {
            out.push_str(&chunk.to_string());
            if out.len() > 64 * 1024 {
                break;
            }
        }
        Ok((code, out))
    }
    .await;
    let remove = bollard::query_parameters::RemoveContainerOptionsBuilder::default()
        .force(true)
        .build();
    if let Err(e) = docker.remove_container(&id, Some(remove)).await {
        tracing::warn!(container = %id, error = %e, "removing a probe container failed");
    }
    outcome
}

/// Checks and inserts the host's rules: with its own iptables here, through the rules probe on a
/// remote host.
async fn host_rules(
    docker: &Docker,
    remote: bool,
    bridge: &str,
    net: &HostNetwork,
) -> anyhow::Result<()> {
    let (code, out) = run_rules_script(
        docker,
        remote,
        &host_rules_script(bridge, net),
        std::time::Duration::from_secs(30),
    )
    .await
    .context("checking the host's firewall rules")?;
    anyhow::ensure!(
        code == 0,
        "the host's firewall rules for the session network are not in place (exit {code}): {}",
        out.trim()
    );
    Ok(())
}

/// The rules probe's settings. Not privileged: the host's network namespace, its processes to
/// find the engine's, and the capabilities to enter that process's mount namespace and change
/// the rules.
fn rules_probe_host() -> HostConfig {
    HostConfig {
        pid_mode: Some("host".into()),
        network_mode: Some("host".into()),
        cap_drop: Some(vec!["ALL".into()]),
        cap_add: Some(
            [
                "NET_ADMIN",
                "NET_RAW",
                "SYS_ADMIN",
                "SYS_PTRACE",
                "SYS_CHROOT",
            ]
            .map(String::from)
            .to_vec(),
        ),
        ..Default::default()
    }
}

/// The start of a script that changes a host's rules with `ipt` (the host's `iptables -w`) and
/// `$B` before busybox's tools: on this host its own programs; on a remote one, the rules
/// probe's busybox entering the mount namespace of the host's engine.
fn rules_preamble(remote: bool) -> &'static str {
    if remote {
        "B=/bin/busybox; self=$($B readlink /proc/self/ns/net); engine=\n\
         for p in $($B pidof dockerd); do [ \"$($B readlink /proc/$p/ns/net)\" = \"$self\" ] && engine=$p; done\n\
         [ -n \"$engine\" ] || { echo 'no dockerd process in the host network namespace'; exit 2; }\n\
         ipt() { $B nsenter -t \"$engine\" -m -- env PATH=/usr/sbin:/sbin:/usr/bin:/bin iptables -w \"$@\"; }\n"
    } else {
        "B=; ipt() { iptables -w \"$@\"; }\n"
    }
}

/// Runs a rules script (after [`rules_preamble`]) on the engine's host: here with `sh`, on a
/// remote host in the rules probe. Its exit code and output.
pub async fn run_rules_script(
    docker: &Docker,
    remote: bool,
    body: &str,
    limit: std::time::Duration,
) -> anyhow::Result<(i64, String)> {
    let script = format!("{}{body}", rules_preamble(remote));
    if !remote {
        let out = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .output()
            .await
            .context("running iptables (network isolation needs it, as root)")?;
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        return Ok((i64::from(out.status.code().unwrap_or(-1)), text));
    }
    let cmd = vec!["/bin/busybox".into(), "sh".into(), "-c".into(), script];
    run_probe(docker, rules_probe_host(), cmd, limit, async |_| Ok(())).await
}

/// `count` addresses of the IPv4 `subnet` that are not in `used`, from the top down (never
/// the network's own, its broadcast, nor the gateway at its first address); None when fewer
/// are free or the subnet is not IPv4.
pub fn free_from_top(subnet: &str, used: &[String], count: usize) -> Option<Vec<String>> {
    let (ip, len) = subnet.split_once('/')?;
    let ip: std::net::Ipv4Addr = ip.parse().ok()?;
    let len: u32 = len.parse().ok()?;
    if !(8..=30).contains(&len) {
        return None;
    }
    let mask = u32::MAX << (32 - len);
    let base = u32::from(ip) & mask;
    let last = base | !mask;
    let used: std::collections::HashSet<&str> = used.iter().map(String::as_str).collect();
    let out: Vec<String> = (base + 2..last)
        .rev()
        .map(|a| std::net::Ipv4Addr::from(a).to_string())
        .filter(|a| !used.contains(a.as_str()))
        .take(count)
        .collect();
    (out.len() == count).then_some(out)
}

/// The comment on a multi-node cluster session's peer rules on a host: this installation's
/// and the session's ids, so that each installation lists and removes only its own.
pub fn peer_tag(instance: &str, session_id: uuid::Uuid) -> String {
    format!("{}{}", peer_tag_prefix(instance), session_id.simple())
}

pub fn peer_tag_prefix(instance: &str) -> String {
    let instance: String = instance
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(32)
        .collect();
    format!("bai-peers-{instance}-")
}

/// A multi-node cluster session's rules on one host, as (table, chain, rule): for each of its
/// containers here (`local`) and every other member of the session (`members`, wherever it
/// runs), traffic from one to the other and back passes the session network's rules, and
/// leaves the host unmasqueraded (a peer sees the sender's own address). Nothing else is
/// opened: each rule names both addresses. Inserted at the top, above the rules that keep
/// sessions apart.
pub fn peer_rules(
    bridge: &str,
    tag: &str,
    local: &[String],
    members: &[String],
) -> Vec<(&'static str, &'static str, Vec<String>)> {
    let mut out = Vec::new();
    for a in local {
        for b in members.iter().filter(|b| *b != a) {
            let words = |parts: &[&str]| -> Vec<String> {
                parts
                    .iter()
                    .map(|s| s.to_string())
                    .chain(
                        ["-m", "comment", "--comment", tag, "-j"]
                            .iter()
                            .map(|s| s.to_string()),
                    )
                    .collect()
            };
            let mut out_rule = words(&["-i", bridge, "-s", a, "-d", b]);
            out_rule.push("ACCEPT".into());
            let mut in_rule = words(&["-o", bridge, "-s", b, "-d", a]);
            in_rule.push("ACCEPT".into());
            let mut nat = words(&["-s", a, "-d", b]);
            nat.push("RETURN".into());
            out.push(("filter", "DOCKER-USER", out_rule));
            out.push(("filter", "DOCKER-USER", in_rule));
            out.push(("nat", "POSTROUTING", nat));
        }
    }
    out
}

/// The script that inserts [`peer_rules`] and fails when one cannot be (a session's tag is
/// new to the host, so nothing is checked first: one `iptables` per rule).
pub fn peer_rules_script(rules: &[(&'static str, &'static str, Vec<String>)]) -> String {
    let mut script = String::from("fail=0\n");
    for (table, chain, rule) in rules {
        let (words, plain) = shell_rule(rule);
        script.push_str(&format!(
            "ipt -t {table} -I {chain} 1 {words} || {{ echo 'cannot insert: {table} {chain} {plain}'; fail=1; }}\n"
        ));
    }
    script.push_str("exit $fail\n");
    script
}

/// The script that deletes every rule whose comment starts with `tag` (one session's, or with
/// the prefix alone every session's of the installation), in both tables.
pub fn remove_peers_script(tag: &str) -> String {
    // The tag is letters, digits and dashes (never a shell or sed character).
    let tag: String = tag
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    format!(
        "for t in filter nat; do\n\
         ipt -t $t -S | $B grep -e '--comment {tag}' | $B sed 's/^-A /-D /' | \
         while read -r line; do eval \"ipt -t $t $line\"; done\n\
         done\n\
         left=0\n\
         for t in filter nat; do ipt -t $t -S | $B grep -q -e '--comment {tag}' && left=1; done\n\
         exit $left\n"
    )
}

/// The script that prints every peer rule on the host (of any installation: an address one of
/// them names is not free), as `iptables -S` writes it.
pub fn list_peers_script() -> String {
    "for t in filter nat; do ipt -t $t -S | $B grep -e '--comment bai-peers-' || true; done\nexit 0\n"
        .to_string()
}

/// What [`list_peers_script`] printed: the sessions of the installation (`prefix`) with rules
/// here, and every address any peer rule names.
pub fn parse_peer_rules(
    out: &str,
    prefix: &str,
) -> (
    std::collections::HashSet<uuid::Uuid>,
    std::collections::HashSet<String>,
) {
    let (mut sessions, mut addresses) = (
        std::collections::HashSet::new(),
        std::collections::HashSet::new(),
    );
    for line in out.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        for pair in words.windows(2) {
            match pair[0] {
                "-s" | "-d" => {
                    addresses.insert(pair[1].trim_end_matches("/32").to_string());
                }
                "--comment" => {
                    if let Some(id) = pair[1]
                        .trim_matches('"')
                        .strip_prefix(prefix)
                        .and_then(|id| uuid::Uuid::parse_str(id).ok())
                    {
                        sessions.insert(id);
                    }
                }
                _ => {}
            }
        }
    }
    (sessions, addresses)
}

/// What a session on this host sees: the manager reaches it on the session network, and it
/// does not reach its own host (the engine's own port there).
async fn prove(docker: &Docker, network: &str, engine_addr: &str) -> anyhow::Result<()> {
    let (host, port) = engine_addr
        .rsplit_once(':')
        .with_context(|| format!("{engine_addr} is not host:port"))?;
    let script = format!(
        "/bin/busybox timeout 20 /bin/busybox nc -l -p 2000 -e /bin/busybox echo bai-probe & \
         if /bin/busybox nc -w 3 {} {} -e /bin/busybox true; then echo HOST-REACHABLE; fi; wait",
        quoted(host.trim_start_matches('[').trim_end_matches(']')),
        quoted(port)
    );
    let host_config = HostConfig {
        network_mode: Some(network.to_string()),
        cap_drop: Some(vec!["ALL".into()]),
        ..Default::default()
    };
    let cmd = vec!["/bin/busybox".into(), "sh".into(), "-c".into(), script];
    let reach = async |id: &str| -> anyhow::Result<()> {
        let info = docker
            .inspect_container(
                id,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await?;
        let ip: IpAddr = info
            .network_settings
            .and_then(|n| n.networks)
            .and_then(|n| n.get(network).and_then(|e| e.ip_address.clone()))
            .and_then(|ip| ip.parse().ok())
            .with_context(|| format!("the probe has no address on {network}"))?;
        let target = std::net::SocketAddr::new(ip, 2000);
        let mut last = None;
        // The listener takes a moment to start; a route that is missing or dropped times out.
        for _ in 0..5 {
            match tokio::time::timeout(
                std::time::Duration::from_secs(2),
                tokio::net::TcpStream::connect(target),
            )
            .await
            {
                Ok(Ok(mut conn)) => {
                    use tokio::io::AsyncReadExt;
                    let mut buf = [0u8; 16];
                    let n = tokio::time::timeout(
                        std::time::Duration::from_secs(2),
                        conn.read(&mut buf),
                    )
                    .await
                    .unwrap_or(Ok(0))
                    .unwrap_or(0);
                    if buf[..n].starts_with(b"bai-probe") {
                        return Ok(());
                    }
                    last = Some(format!(
                        "{target} answered {:?}",
                        String::from_utf8_lossy(&buf[..n])
                    ));
                }
                Ok(Err(e)) => last = Some(format!("{target}: {e}")),
                Err(_) => last = Some(format!("{target}: no answer in 2 s")),
            }
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
        anyhow::bail!(
            "the manager cannot reach a session on this host ({}): route the session subnet through the host and let the manager's address in (see the book, docs/src/several-hosts.md)",
            last.unwrap_or_default()
        )
    };
    let (_, out) = run_probe(
        docker,
        host_config,
        cmd,
        std::time::Duration::from_secs(30),
        reach,
    )
    .await
    .context("probing the session network")?;
    anyhow::ensure!(
        !out.contains("HOST-REACHABLE"),
        "a session on this host reaches the host itself ({engine_addr}): its firewall rules are not in effect"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_addresses_come_from_the_top_and_skip_the_used() {
        let used = vec!["10.233.1.254".to_string()];
        assert_eq!(
            free_from_top("10.233.1.0/24", &used, 2).unwrap(),
            ["10.233.1.253", "10.233.1.252"]
        );
        // 10.233.1.0/30: .1 is the gateway, .3 the broadcast; only .2 is a container's.
        assert_eq!(
            free_from_top("10.233.1.0/30", &[], 1).unwrap(),
            ["10.233.1.2"]
        );
        assert_eq!(free_from_top("10.233.1.0/30", &[], 2), None);
        assert_eq!(free_from_top("fd00::/64", &[], 1), None);
    }

    #[test]
    fn peer_rules_name_both_addresses_and_the_session() {
        let tag = peer_tag("0123abcd", uuid::Uuid::nil());
        assert!(tag.starts_with(&peer_tag_prefix("0123abcd")));
        let members = ["10.233.1.254".to_string(), "10.233.2.254".to_string()];
        let rules = peer_rules(BRIDGE, &tag, &members[..1], &members);
        let text: Vec<String> = rules
            .iter()
            .map(|(t, c, r)| format!("{t} {c} {}", r.join(" ")))
            .collect();
        assert_eq!(
            text,
            [
                format!(
                    "filter DOCKER-USER -i {BRIDGE} -s 10.233.1.254 -d 10.233.2.254 -m comment --comment {tag} -j ACCEPT"
                ),
                format!(
                    "filter DOCKER-USER -o {BRIDGE} -s 10.233.2.254 -d 10.233.1.254 -m comment --comment {tag} -j ACCEPT"
                ),
                format!(
                    "nat POSTROUTING -s 10.233.1.254 -d 10.233.2.254 -m comment --comment {tag} -j RETURN"
                ),
            ]
        );
        let script = peer_rules_script(&rules);
        assert!(script.contains("-I DOCKER-USER 1"), "{script}");
        // What the host lists: this installation's sessions, and every address named.
        let listed = format!(
            "-A DOCKER-USER -s 10.233.1.254/32 -d 10.233.2.254/32 -i bai-sessions -m comment --comment {tag} -j ACCEPT\n\
             -A POSTROUTING -s 10.233.1.200/32 -d 10.233.2.7/32 -m comment --comment bai-peers-other-{} -j RETURN\n",
            uuid::Uuid::nil().simple()
        );
        let (sessions, addresses) = parse_peer_rules(&listed, &peer_tag_prefix("0123abcd"));
        assert_eq!(
            sessions.into_iter().collect::<Vec<_>>(),
            [uuid::Uuid::nil()]
        );
        let mut addresses: Vec<String> = addresses.into_iter().collect();
        addresses.sort();
        assert_eq!(
            addresses,
            ["10.233.1.200", "10.233.1.254", "10.233.2.254", "10.233.2.7"]
        );
        // A tag cannot smuggle shell or sed text into the removal script.
        let removal = remove_peers_script("bai-peers-x'; reboot; '");
        assert!(!removal.contains("reboot;"), "{removal}");
    }

    #[test]
    fn names_fit_a_bridge() {
        assert!(super::BRIDGE.len() <= 15);
        let rules = super::rules(super::BRIDGE, &HostNetwork::default());
        // ACCEPT is inserted last, so it ends up above the DROP in INPUT.
        assert_eq!(rules.last().unwrap().1.last().unwrap(), "ACCEPT");
    }

    #[test]
    fn remote_rules_let_in_the_manager_and_keep_out_the_others() {
        let net = HostNetwork {
            subnet: Some("10.233.1.0/24".into()),
            manager: Some("10.231.1.1".parse().unwrap()),
            forbidden: vec!["10.233.2.0/24".into(), "10.231.2.2".into()],
            busybox: "/bin/busybox".into(),
        };
        let rules = rules(BRIDGE, &net);
        let has = |want: &[&str]| {
            rules
                .iter()
                .any(|(_, r)| r.iter().map(String::as_str).eq(want.iter().copied()))
        };
        assert!(has(&[
            "-o",
            BRIDGE,
            "!",
            "-s",
            "10.231.1.1",
            "-m",
            "conntrack",
            "--ctstate",
            "NEW",
            "-j",
            "DROP"
        ]));
        assert!(has(&["-i", BRIDGE, "-d", "10.233.2.0/24", "-j", "DROP"]));
        assert!(has(&["-i", BRIDGE, "-d", "10.231.2.2", "-j", "DROP"]));
        // The manager's own host: nothing new from outside at all.
        let local = super::rules(BRIDGE, &HostNetwork::default());
        assert!(
            local
                .iter()
                .any(|(_, r)| r.join(" ")
                    == format!("-o {BRIDGE} -m conntrack --ctstate NEW -j DROP"))
        );
        let script = host_rules_script(BRIDGE, &net);
        assert!(script.contains("'!' '-s' '10.231.1.1'"), "{script}");
        assert!(script.ends_with("exit $missing\n"));
        // A word with a quote cannot leave its quotes.
        assert_eq!(quoted("a'b"), "'a'\\''b'");
    }
}
