//! What the Docker engine asks Docker to make, as plain values: a kernel's container (its
//! isolation, limits, mounts, devices and network), its scratch volume, the never-started
//! helper containers of a commit and a cluster's private network. Nothing here talks to an
//! engine: `DockerEngine` sends what these functions return, and the tests below read the
//! settings without Docker.
use std::collections::HashMap;
use std::path::PathBuf;

use bollard::models::{
    ContainerCreateBody, DeviceRequest, EndpointIpamConfig, EndpointSettings, HostConfig,
    HostConfigLogConfig, Ipam, IpamConfig, Mount, MountType, NetworkCreateRequest,
    NetworkingConfig, VolumeCreateRequest,
};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use uuid::Uuid;

use super::scratch_volume;
use crate::gpu;
use crate::{
    ClusterPlace, INSTANCE_LABEL, KERNEL_LABEL, KernelSpec, MANAGED_LABEL, MANAGED_VALUE,
    SESSION_LABEL,
};

/// Capabilities a session container keeps (Docker's defaults minus the risky ones;
/// SYS_CHROOT and AUDIT_WRITE let sshd work).
pub(super) const CAPS: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
    "AUDIT_WRITE",
];

/// The engine's own settings a kernel's container is made with (beside its [`KernelSpec`]).
pub(super) struct Settings<'a> {
    /// The installation the agent belongs to (labels, the container's name).
    pub instance: &'a str,
    /// The isolated session network (None when isolation is switched off).
    pub network: Option<&'a str>,
    /// Docker log rotation: size of one json-file log (two are kept).
    pub log_max_size: &'a str,
    /// Writable-layer size limit (`storage_opt size`).
    pub disk_size: Option<&'a str>,
    /// The host's cores: no container is limited to more (an overcommitted agent offers
    /// more in all, never more to one container).
    pub host_cpus: Decimal,
}

/// A kernel's container as the engine is asked for it, in the order it is made: the scratch
/// volume, the container (`name`, `body`), then, for a single-node cluster, the private
/// network it joins after creation (`join`).
pub(super) struct KernelContainer<'a> {
    pub volume: VolumeCreateRequest,
    pub name: String,
    pub body: ContainerCreateBody,
    pub join: Option<&'a ClusterPlace>,
}

/// The scratch volume, container and cluster network place of one kernel. `mps`: the MPS
/// limits and the daemon's directory of a container holding a fraction of a GPU.
pub(super) fn kernel_container<'a>(
    spec: &'a KernelSpec,
    settings: &Settings<'_>,
    mps: Option<&(gpu::MpsLimits, PathBuf)>,
) -> KernelContainer<'a> {
    let mut labels = HashMap::new();
    labels.insert(MANAGED_LABEL.to_string(), MANAGED_VALUE.to_string());
    labels.insert(INSTANCE_LABEL.to_string(), settings.instance.to_string());
    labels.insert(SESSION_LABEL.to_string(), spec.session_id.to_string());
    labels.insert(KERNEL_LABEL.to_string(), spec.kernel_id.to_string());
    labels.insert(
        "ai.backend.owner".to_string(),
        spec.owner_access_key.clone(),
    );
    labels.insert(
        "ai.backend.service-ports".to_string(),
        spec.service_ports.clone(),
    );
    let mut env: Vec<String> = spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if let Some((limits, _)) = mps {
        env.extend(
            gpu::mps_env(limits)
                .into_iter()
                .map(|(k, v)| format!("{k}={v}")),
        );
    }
    let cmd = crate::container_command(spec);
    let host_config = host_config(spec, settings, mps);
    // Service ports are not published on the host (each published port costs the engine a
    // proxy process and firewall rules at start): the app proxy reaches the container at
    // its address on the session network.
    let exposed: Vec<String> = spec.ports.iter().map(|p| format!("{p}/tcp")).collect();
    // A multi-node cluster's container sits at its fixed address on the session network;
    // a single-node one joins its private network after creation.
    let (fixed, join) = match &spec.cluster {
        Some(place) if settings.network == Some(place.network.as_str()) => (Some(place), None),
        other => (None, other.as_ref()),
    };
    let networking_config = fixed.map(|place| NetworkingConfig {
        endpoints_config: Some(HashMap::from([(
            place.network.clone(),
            endpoint_at(&place.address),
        )])),
    });
    let body = ContainerCreateBody {
        networking_config,
        image: Some(spec.image.clone()),
        hostname: Some(spec.hostname.clone()),
        user: Some("work".into()),
        working_dir: Some("/home/work".into()),
        env: Some(env),
        cmd: Some(cmd),
        labels: Some(labels),
        exposed_ports: Some(exposed),
        host_config: Some(host_config),
        ..Default::default()
    };
    // The scratch volume is made explicitly so it carries the same labels (cleanup by
    // installation); it is filled from the image's /home/work on first mount.
    let volume_labels: HashMap<String, String> = [
        (MANAGED_LABEL.to_string(), MANAGED_VALUE.to_string()),
        (INSTANCE_LABEL.to_string(), settings.instance.to_string()),
        (KERNEL_LABEL.to_string(), spec.kernel_id.to_string()),
    ]
    .into_iter()
    .collect();
    let volume = VolumeCreateRequest {
        name: Some(scratch_volume(spec.kernel_id)),
        labels: Some(volume_labels),
        ..Default::default()
    };
    let name = format!(
        "bai-{}-{}",
        &settings.instance[..8.min(settings.instance.len())],
        spec.kernel_id
    );
    KernelContainer {
        volume,
        name,
        body,
        join,
    }
}

/// A kernel container's isolation and limits: never privileged, every capability dropped
/// but [`CAPS`], no new privileges, CPU, memory (no swap beyond it), shared memory and pids
/// limited, logs rotated; its scratch volume at /home/work, the storage folders and (under
/// MPS) the daemon's pipes and shared memory bound in; its GPUs requested from the NVIDIA
/// runtime.
fn host_config(
    spec: &KernelSpec,
    settings: &Settings<'_>,
    mps: Option<&(gpu::MpsLimits, PathBuf)>,
) -> HostConfig {
    let device_requests = (!spec.gpu_ids.is_empty()).then(|| {
        vec![DeviceRequest {
            driver: Some("nvidia".into()),
            device_ids: Some(spec.gpu_ids.clone()),
            capabilities: Some(vec![vec!["gpu".into()]]),
            ..Default::default()
        }]
    });
    let nano_cpus = (spec.cpu.min(settings.host_cpus) * Decimal::from(1_000_000_000u64))
        .trunc()
        .to_i64()
        .unwrap_or(1_000_000_000);
    HostConfig {
        nano_cpus: Some(nano_cpus),
        memory: Some(spec.mem_bytes),
        memory_swap: Some(spec.mem_bytes),
        // Under MPS /dev/shm is the daemon's (mounted below).
        shm_size: mps.is_none().then_some(spec.shmem_bytes),
        pids_limit: Some(spec.pids_limit),
        cap_drop: Some(vec!["ALL".into()]),
        cap_add: Some(CAPS.iter().map(|c| c.to_string()).collect()),
        security_opt: Some(vec!["no-new-privileges".into()]),
        privileged: Some(false),
        device_requests,
        network_mode: settings.network.map(str::to_string),
        // A cluster's members by name, this session's own (the hosts file is read before
        // the engine's name service, which also knows other sessions' containers).
        extra_hosts: spec.cluster.as_ref().map(|c| {
            c.hosts
                .iter()
                .map(|(host, addr)| format!("{host}:{addr}"))
                .collect()
        }),
        log_config: Some(HostConfigLogConfig {
            typ: Some("json-file".into()),
            config: Some(
                [
                    ("max-size".to_string(), settings.log_max_size.to_string()),
                    ("max-file".to_string(), "2".to_string()),
                ]
                .into_iter()
                .collect(),
            ),
        }),
        storage_opt: settings
            .disk_size
            .map(|s| [("size".to_string(), s.to_string())].into_iter().collect()),
        mounts: Some(
            std::iter::once(Mount {
                target: Some("/home/work".into()),
                source: Some(scratch_volume(spec.kernel_id)),
                typ: Some(MountType::VOLUME),
                read_only: Some(false),
                ..Default::default()
            })
            .chain(spec.mounts.iter().map(|m| Mount {
                target: Some(m.target.clone()),
                source: Some(m.host_path.clone()),
                typ: Some(MountType::BIND),
                read_only: Some(m.read_only),
                ..Default::default()
            }))
            // An MPS client talks to the daemon through its pipes and shared memory.
            .chain(mps.into_iter().flat_map(|(_, dir)| {
                // The pipes read-only (a socket is still connected to there).
                [
                    ("pipe", gpu::MPS_PIPE_IN_CONTAINER, true),
                    ("shm", "/dev/shm", false),
                ]
                .map(|(from, to, read_only)| Mount {
                    target: Some(to.into()),
                    source: Some(dir.join(from).to_string_lossy().into_owned()),
                    typ: Some(MountType::BIND),
                    read_only: Some(read_only),
                    ..Default::default()
                })
            }))
            .collect(),
        ),
        ..Default::default()
    }
}

/// A container's endpoint at a fixed `address` on a network.
pub(super) fn endpoint_at(address: &str) -> EndpointSettings {
    EndpointSettings {
        ipam_config: Some(EndpointIpamConfig {
            ipv4_address: Some(address.to_string()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A container of `image` that is never started, for its file system only (a commit's
/// helpers): no network, every capability dropped, no new privileges; `start` is its
/// (entrypoint, command), `mounts` as given.
pub(super) fn inert_container(
    image: &str,
    start: (Option<Vec<String>>, Option<Vec<String>>),
    mounts: Vec<Mount>,
) -> ContainerCreateBody {
    ContainerCreateBody {
        image: Some(image.to_string()),
        entrypoint: start.0,
        cmd: start.1,
        network_disabled: Some(true),
        host_config: Some(HostConfig {
            network_mode: Some("none".into()),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(vec!["no-new-privileges".into()]),
            mounts: Some(mounts),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The commit reader's one mount: the kernel's scratch volume, read-only at /bai-home.
pub(super) fn home_reader_mount(kernel_id: Uuid) -> Mount {
    Mount {
        target: Some("/bai-home".into()),
        source: Some(scratch_volume(kernel_id)),
        typ: Some(MountType::VOLUME),
        read_only: Some(true),
        ..Default::default()
    }
}

/// A cluster session's private network `name` on the subnet `10.250.<third>.0/24`: an
/// internal bridge (no gateway out), its bridge named for the host rules, labelled as this
/// installation's.
pub(super) fn cluster_network(
    name: &str,
    instance: &str,
    session_id: Uuid,
    third: u8,
) -> NetworkCreateRequest {
    let labels = HashMap::from([
        (MANAGED_LABEL.to_string(), MANAGED_VALUE.to_string()),
        (INSTANCE_LABEL.to_string(), instance.to_string()),
        (SESSION_LABEL.to_string(), session_id.to_string()),
    ]);
    let options = HashMap::from([(
        "com.docker.network.bridge.name".to_string(),
        crate::network::cluster_bridge_name(session_id),
    )]);
    NetworkCreateRequest {
        name: name.to_string(),
        driver: Some("bridge".into()),
        // No gateway out: the containers reach each other and nothing else.
        internal: Some(true),
        options: Some(options),
        labels: Some(labels),
        ipam: Some(Ipam {
            config: Some(vec![IpamConfig {
                subnet: Some(format!("10.250.{third}.0/24")),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::PathBuf;

    use bollard::models::{
        DeviceRequest, EndpointIpamConfig, EndpointSettings, HostConfig, HostConfigLogConfig,
        Mount, MountType,
    };
    use rust_decimal::Decimal;
    use uuid::Uuid;

    use super::{Settings, cluster_network, home_reader_mount, inert_container, kernel_container};
    use crate::gpu::MpsLimits;
    use crate::{BindMount, ClusterPlace, KernelSpec};

    const SESSION: Uuid = Uuid::from_u128(0x1111_2222_3333_4444_5555_6666_7777_8888);
    const KERNEL: Uuid = Uuid::from_u128(0x9999_aaaa_bbbb_cccc_dddd_eeee_ffff_0000);

    fn spec() -> KernelSpec {
        KernelSpec {
            session_id: SESSION,
            kernel_id: KERNEL,
            owner_access_key: "AKIAOWNER".into(),
            image: "bai.local/stable/python:3.11".into(),
            hostname: "main1".into(),
            cpu: Decimal::new(15, 1),
            mem_bytes: 2 << 30,
            shmem_bytes: 64 << 20,
            gpu_ids: Vec::new(),
            gpu_shares: Vec::new(),
            env: vec![("LANG".into(), "C.UTF-8".into())],
            command: None,
            bootstrap: None,
            cluster: None,
            service_ports: "jupyter:http:8888".into(),
            ports: vec![8888, 2200],
            pids_limit: 4096,
            mounts: vec![
                BindMount {
                    host_path: "/srv/vfroot/local/data".into(),
                    target: "/home/work/data".into(),
                    read_only: false,
                },
                BindMount {
                    host_path: "/srv/vfroot/local/shared".into(),
                    target: "/home/work/shared".into(),
                    read_only: true,
                },
            ],
            home_files: Vec::new(),
        }
    }

    const SETTINGS: Settings<'static> = Settings {
        instance: "0123456789abcdef",
        network: Some("bai-sessions"),
        log_max_size: "10m",
        disk_size: Some("20G"),
        host_cpus: Decimal::from_parts(16, 0, 0, false, 0),
    };

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn map(items: &[(&str, &str)]) -> HashMap<String, String> {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn scratch_mount() -> Mount {
        Mount {
            target: Some("/home/work".into()),
            source: Some(format!("bai-scratch-{KERNEL}")),
            typ: Some(MountType::VOLUME),
            read_only: Some(false),
            ..Default::default()
        }
    }

    fn bind(source: &str, target: &str, read_only: bool) -> Mount {
        Mount {
            target: Some(target.into()),
            source: Some(source.into()),
            typ: Some(MountType::BIND),
            read_only: Some(read_only),
            ..Default::default()
        }
    }

    /// Every host setting of a kernel's container, compared whole: a setting added, dropped
    /// or changed fails here.
    #[test]
    fn a_kernel_container_is_unprivileged_limited_and_isolated() {
        let spec = spec();
        let made = kernel_container(&spec, &SETTINGS, None);
        let host = made.body.host_config.clone().unwrap();
        assert_eq!(
            host,
            HostConfig {
                nano_cpus: Some(1_500_000_000),
                memory: Some(2 << 30),
                // No swap beyond the memory limit.
                memory_swap: Some(2 << 30),
                shm_size: Some(64 << 20),
                pids_limit: Some(4096),
                cap_drop: Some(strings(&["ALL"])),
                cap_add: Some(strings(&[
                    "CHOWN",
                    "DAC_OVERRIDE",
                    "FOWNER",
                    "FSETID",
                    "KILL",
                    "SETGID",
                    "SETUID",
                    "NET_BIND_SERVICE",
                    "SYS_CHROOT",
                    "AUDIT_WRITE",
                ])),
                security_opt: Some(strings(&["no-new-privileges"])),
                privileged: Some(false),
                device_requests: None,
                network_mode: Some("bai-sessions".into()),
                extra_hosts: None,
                log_config: Some(HostConfigLogConfig {
                    typ: Some("json-file".into()),
                    config: Some(map(&[("max-size", "10m"), ("max-file", "2")])),
                }),
                storage_opt: Some(map(&[("size", "20G")])),
                mounts: Some(vec![
                    scratch_mount(),
                    bind("/srv/vfroot/local/data", "/home/work/data", false),
                    bind("/srv/vfroot/local/shared", "/home/work/shared", true),
                ]),
                ..Default::default()
            }
        );
        // What the defaults leave unset stays so: no host namespace, device, port binding,
        // extra group or read-only root file system.
        assert_eq!(host.readonly_rootfs, None);
        assert_eq!(host.pid_mode, None);
        assert_eq!(host.ipc_mode, None);
        assert_eq!(host.userns_mode, None);
        assert_eq!(host.devices, None);
        assert_eq!(host.port_bindings, None);
        assert_eq!(host.publish_all_ports, None);
        assert_eq!(host.binds, None);
    }

    #[test]
    fn a_kernel_container_runs_as_work_with_its_labels_volume_and_name() {
        let spec = spec();
        let made = kernel_container(&spec, &SETTINGS, None);
        let body = &made.body;
        assert_eq!(body.image.as_deref(), Some("bai.local/stable/python:3.11"));
        assert_eq!(body.hostname.as_deref(), Some("main1"));
        assert_eq!(body.user.as_deref(), Some("work"));
        assert_eq!(body.working_dir.as_deref(), Some("/home/work"));
        assert_eq!(body.env, Some(strings(&["LANG=C.UTF-8"])));
        assert_eq!(body.cmd, Some(crate::container_command(&spec)));
        assert_eq!(body.entrypoint, None);
        // Exposed on the session network, never published on the host.
        assert_eq!(body.exposed_ports, Some(strings(&["8888/tcp", "2200/tcp"])));
        assert_eq!(body.networking_config, None);
        assert_eq!(body.network_disabled, None);
        let session = SESSION.to_string();
        let kernel = KERNEL.to_string();
        assert_eq!(
            body.labels,
            Some(map(&[
                ("ai.backend.managed-by", "bai"),
                ("ai.backend.bai-instance", "0123456789abcdef"),
                ("ai.backend.session-id", &session),
                ("ai.backend.kernel-id", &kernel),
                ("ai.backend.owner", "AKIAOWNER"),
                ("ai.backend.service-ports", "jupyter:http:8888"),
            ]))
        );
        assert_eq!(made.volume.name, Some(format!("bai-scratch-{KERNEL}")));
        assert_eq!(
            made.volume.labels,
            Some(map(&[
                ("ai.backend.managed-by", "bai"),
                ("ai.backend.bai-instance", "0123456789abcdef"),
                ("ai.backend.kernel-id", &kernel),
            ]))
        );
        assert_eq!(made.volume.driver, None);
        assert_eq!(made.name, format!("bai-01234567-{KERNEL}"));
        assert!(made.join.is_none());

        // A short instance id is the name's whole prefix.
        let short = Settings {
            instance: "abc",
            ..SETTINGS
        };
        assert_eq!(
            kernel_container(&spec, &short, None).name,
            format!("bai-abc-{KERNEL}")
        );
    }

    #[test]
    fn without_isolation_or_a_disk_limit_those_settings_are_left_out() {
        let spec = spec();
        let open = Settings {
            network: None,
            disk_size: None,
            ..SETTINGS
        };
        let host = kernel_container(&spec, &open, None)
            .body
            .host_config
            .unwrap();
        assert_eq!(host.network_mode, None);
        assert_eq!(host.storage_opt, None);
        // The rest holds whatever the engine's settings.
        assert_eq!(host.cap_drop, Some(strings(&["ALL"])));
        assert_eq!(host.privileged, Some(false));
        assert_eq!(host.security_opt, Some(strings(&["no-new-privileges"])));
    }

    #[test]
    fn the_cpu_limit_is_truncated_to_nanocpus_and_never_above_the_hosts_cores() {
        let nano = |cpu: Decimal| {
            let spec = KernelSpec { cpu, ..spec() };
            kernel_container(&spec, &SETTINGS, None)
                .body
                .host_config
                .unwrap()
                .nano_cpus
        };
        assert_eq!(nano(Decimal::new(3_333_333_333, 10)), Some(333_333_333));
        assert_eq!(nano(Decimal::new(2, 0)), Some(2_000_000_000));
        // An overcommitted agent offers more cores in all, never more to one container
        // (the engine refuses a limit above the host's cores).
        assert_eq!(nano(Decimal::new(24, 0)), Some(16_000_000_000));
        assert_eq!(nano(Decimal::from(10_000_000_000u64)), Some(16_000_000_000));
    }

    #[test]
    fn whole_gpus_are_requested_from_the_nvidia_runtime() {
        let spec = KernelSpec {
            gpu_ids: strings(&["0", "2"]),
            ..spec()
        };
        let host = kernel_container(&spec, &SETTINGS, None)
            .body
            .host_config
            .unwrap();
        assert_eq!(
            host.device_requests,
            Some(vec![DeviceRequest {
                driver: Some("nvidia".into()),
                device_ids: Some(strings(&["0", "2"])),
                capabilities: Some(vec![strings(&["gpu"])]),
                ..Default::default()
            }])
        );
        // Whole devices: the container's own /dev/shm, no MPS mounts.
        assert_eq!(host.shm_size, Some(64 << 20));
        assert_eq!(host.mounts.map(|m| m.len()), Some(3));
        assert_eq!(host.privileged, Some(false));
    }

    #[test]
    fn a_gpu_fraction_under_mps_gets_its_limits_and_the_daemons_pipes_and_memory() {
        let spec = KernelSpec {
            gpu_ids: strings(&["1"]),
            gpu_shares: vec![Decimal::new(5, 1)],
            ..spec()
        };
        let mps = (
            MpsLimits {
                active_thread_percentage: 50,
                pinned_mib: vec![(0, 8192)],
            },
            PathBuf::from("/var/lib/bai-mps/GPU-1234"),
        );
        let made = kernel_container(&spec, &SETTINGS, Some(&mps));
        assert_eq!(
            made.body.env,
            Some(strings(&[
                "LANG=C.UTF-8",
                "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps",
                "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50",
                "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8192M",
            ]))
        );
        let host = made.body.host_config.unwrap();
        // /dev/shm is the daemon's.
        assert_eq!(host.shm_size, None);
        assert_eq!(
            host.mounts,
            Some(vec![
                scratch_mount(),
                bind("/srv/vfroot/local/data", "/home/work/data", false),
                bind("/srv/vfroot/local/shared", "/home/work/shared", true),
                bind("/var/lib/bai-mps/GPU-1234/pipe", "/tmp/nvidia-mps", true),
                bind("/var/lib/bai-mps/GPU-1234/shm", "/dev/shm", false),
            ])
        );
        assert_eq!(
            host.device_requests.unwrap()[0].device_ids,
            Some(strings(&["1"]))
        );
        // The limits stay.
        assert_eq!(host.memory, Some(2 << 30));
        assert_eq!(host.pids_limit, Some(4096));
        assert_eq!(host.cap_drop, Some(strings(&["ALL"])));
    }

    fn place(network: &str) -> ClusterPlace {
        ClusterPlace {
            network: network.into(),
            address: "10.250.7.3".into(),
            hosts: vec![
                ("main1".into(), "10.250.7.2".into()),
                ("sub1".into(), "10.250.7.3".into()),
            ],
        }
    }

    #[test]
    fn a_single_node_cluster_member_joins_its_private_network_after_creation() {
        let spec = KernelSpec {
            cluster: Some(place("bai-cluster-x")),
            ..spec()
        };
        let made = kernel_container(&spec, &SETTINGS, None);
        assert_eq!(made.join, spec.cluster.as_ref());
        assert_eq!(made.body.networking_config, None);
        let host = made.body.host_config.unwrap();
        assert_eq!(host.network_mode, Some("bai-sessions".into()));
        assert_eq!(
            host.extra_hosts,
            Some(strings(&["main1:10.250.7.2", "sub1:10.250.7.3"]))
        );
    }

    #[test]
    fn a_multi_node_cluster_member_sits_at_its_fixed_address_on_the_session_network() {
        let spec = KernelSpec {
            cluster: Some(place("bai-sessions")),
            ..spec()
        };
        let made = kernel_container(&spec, &SETTINGS, None);
        assert!(made.join.is_none());
        let endpoints = made.body.networking_config.unwrap().endpoints_config;
        assert_eq!(
            endpoints,
            Some(HashMap::from([(
                "bai-sessions".to_string(),
                EndpointSettings {
                    ipam_config: Some(EndpointIpamConfig {
                        ipv4_address: Some("10.250.7.3".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }
            )]))
        );
        let host = made.body.host_config.unwrap();
        assert_eq!(host.network_mode, Some("bai-sessions".into()));
        assert_eq!(
            host.extra_hosts,
            Some(strings(&["main1:10.250.7.2", "sub1:10.250.7.3"]))
        );
    }

    #[test]
    fn a_commits_helper_containers_have_no_network_and_no_capabilities() {
        let body = inert_container(
            "sha256:abc",
            (None, Some(strings(&["/bin/true"]))),
            vec![home_reader_mount(KERNEL)],
        );
        assert_eq!(body.image.as_deref(), Some("sha256:abc"));
        assert_eq!(body.entrypoint, None);
        assert_eq!(body.cmd, Some(strings(&["/bin/true"])));
        assert_eq!(body.network_disabled, Some(true));
        assert_eq!(
            body.host_config,
            Some(HostConfig {
                network_mode: Some("none".into()),
                cap_drop: Some(strings(&["ALL"])),
                security_opt: Some(strings(&["no-new-privileges"])),
                mounts: Some(vec![Mount {
                    target: Some("/bai-home".into()),
                    source: Some(format!("bai-scratch-{KERNEL}")),
                    typ: Some(MountType::VOLUME),
                    read_only: Some(true),
                    ..Default::default()
                }]),
                ..Default::default()
            })
        );
    }

    #[test]
    fn a_cluster_network_is_an_internal_bridge_of_this_installation() {
        let net = cluster_network("bai-cluster-x", "0123456789abcdef", SESSION, 42);
        assert_eq!(net.name, "bai-cluster-x");
        assert_eq!(net.driver.as_deref(), Some("bridge"));
        assert_eq!(net.internal, Some(true));
        assert_eq!(
            net.options,
            Some(map(&[(
                "com.docker.network.bridge.name",
                "bai-c1111222233"
            )]))
        );
        let session = SESSION.to_string();
        assert_eq!(
            net.labels,
            Some(map(&[
                ("ai.backend.managed-by", "bai"),
                ("ai.backend.bai-instance", "0123456789abcdef"),
                ("ai.backend.session-id", &session),
            ]))
        );
        let ipam = net.ipam.unwrap();
        assert_eq!(ipam.driver, None);
        let config = ipam.config.unwrap();
        assert_eq!(config.len(), 1);
        assert_eq!(config[0].subnet.as_deref(), Some("10.250.42.0/24"));
        assert_eq!(config[0].gateway, None);
        assert_eq!(net.attachable, None);
        assert_eq!(net.enable_ipv6, None);
    }
}
