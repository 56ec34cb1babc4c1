//! Network isolation of sessions. Every session container joins one bridge network per
//! engine (`bai-sessions`, shared by the installations on that engine) with inter-container
//! traffic off, and firewall rules on the host keep
//! containers away from the host itself (services on the bridge gateway included) and from
//! link-local addresses (cloud metadata at 169.254.169.254). The server still reaches the
//! session's ports at the containers' addresses on the bridge (connections the host opens).
use std::collections::HashMap;

use anyhow::Context;
use bollard::Docker;
use bollard::models::NetworkCreateRequest;

/// The session network and its bridge (a bridge name has at most 15 bytes).
pub const NETWORK: &str = "bai-sessions";
pub const BRIDGE: &str = "bai-sessions";

/// The rules, as `iptables` arguments after `-C`/`-I`: (chain, rule).
pub fn rules(bridge: &str) -> Vec<(&'static str, Vec<String>)> {
    let r = |parts: &[&str]| parts.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    vec![
        // Forwarded traffic: not to another container, not to link-local addresses.
        (
            "DOCKER-USER",
            r(&["-i", bridge, "-o", bridge, "-j", "DROP"]),
        ),
        (
            "DOCKER-USER",
            r(&["-i", bridge, "-d", "169.254.0.0/16", "-j", "DROP"]),
        ),
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
    ]
}

async fn iptables(args: &[String]) -> anyhow::Result<bool> {
    let out = tokio::process::Command::new("iptables")
        .arg("-w")
        .args(args)
        .output()
        .await
        .context("running iptables (network isolation needs it, as root)")?;
    Ok(out.status.success())
}

/// Installs each rule once (checked with `-C`, inserted at the top with `-I`; the rules are
/// listed so that inserting each at the top leaves ACCEPT above DROP).
async fn install_rules(bridge: &str) -> anyhow::Result<()> {
    for (chain, rule) in rules(bridge) {
        let mut check = vec!["-C".to_string(), chain.to_string()];
        check.extend(rule.iter().cloned());
        if iptables(&check).await? {
            continue;
        }
        let mut insert = vec!["-I".to_string(), chain.to_string(), "1".to_string()];
        insert.extend(rule.iter().cloned());
        if !iptables(&insert).await? {
            anyhow::bail!("iptables refused: {}", insert.join(" "));
        }
    }
    Ok(())
}

/// Makes sure the installation's network exists (and, for the local engine, the host's
/// firewall rules); returns the network's name.
pub async fn ensure(docker: &Docker, local: bool) -> anyhow::Result<String> {
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
        let labels: HashMap<String, String> = [(crate::MANAGED_LABEL, crate::MANAGED_VALUE)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let created = docker
            .create_network(NetworkCreateRequest {
                name: name.clone(),
                driver: Some("bridge".into()),
                options: Some(options),
                labels: Some(labels),
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
    if local {
        install_rules(&bridge)
            .await
            .with_context(|| format!("isolating the session network {name} (bridge {bridge})"))?;
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_fit_a_bridge() {
        assert!(super::BRIDGE.len() <= 15);
        let rules = super::rules(super::BRIDGE);
        // ACCEPT is inserted last, so it ends up above the DROP in INPUT.
        assert_eq!(rules.last().unwrap().1.last().unwrap(), "ACCEPT");
    }
}
