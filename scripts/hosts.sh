#!/usr/bin/env bash
# Extra Docker engines as separate hosts, for the several-hosts tests (and to try bai with
# more than one agent on one machine). Each host is its own network namespace with a veth
# pair and address (10.231.N.2), its own bridge subnet (10.232.N.0/24) and session subnet
# for bai's session network (10.233.N.0/24, routed from here through the host, as an
# operator routes each node's session subnet; forwarded from one host's to another's), data-root, exec-root and pidfile, and a
# dockerd listening only on its address with mutual TLS (Docker's --tlsverify). The host's
# firewall rules are bai's to check and install (through the engine, at agent start). Certificates are made here with openssl: a CA, a server
# certificate per host, bai's client certificate, and a second CA with a client certificate
# of its own (which every engine must refuse).
#
#   scripts/hosts.sh up [N]    start hosts h1..hN (default 2); idempotent
#   scripts/hosts.sh down      stop them and remove their namespaces and routes
#   scripts/hosts.sh env       print BAI_ENGINES (JSON) for the running hosts
#
# Needs root, dockerd, ip, nsenter and openssl. State lives in $BAI_HOSTS_DIR
# (default /var/lib/bai-hosts): certificates in tls/, each engine's files in hN/.
set -euo pipefail
DIR="${BAI_HOSTS_DIR:-/var/lib/bai-hosts}"
TLS="$DIR/tls"

host_addr() { echo "10.231.$1.2"; }
peer_addr() { echo "10.231.$1.1"; }
bridge_net() { echo "10.232.$1.0/24"; }
bridge_ip() { echo "10.232.$1.1/24"; }
session_net() { echo "10.233.$1.0/24"; }

certs() {
  mkdir -p "$TLS"
  cd "$TLS"
  if [ ! -s ca.pem ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=bai test hosts CA" \
      -keyout ca-key.pem -out ca.pem 2>/dev/null
  fi
  if [ ! -s cert.pem ]; then
    openssl req -newkey rsa:2048 -nodes -subj "/CN=bai" -keyout key.pem -out client.csr 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' > client.ext
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 3650 \
      -extfile client.ext -out cert.pem 2>/dev/null
  fi
  # Another CA and a client certificate it signed: the engines must refuse it.
  if [ ! -s rogue-cert.pem ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=rogue CA" \
      -keyout rogue-ca-key.pem -out rogue-ca.pem 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=bai" -keyout rogue-key.pem -out rogue.csr 2>/dev/null
    openssl x509 -req -in rogue.csr -CA rogue-ca.pem -CAkey rogue-ca-key.pem -CAcreateserial \
      -days 3650 -extfile client.ext -out rogue-cert.pem 2>/dev/null
  fi
  chmod 600 ./*key.pem
  cd - >/dev/null
}

server_cert() {
  local n=$1 d="$DIR/h$1"
  [ -s "$d/server.pem" ] && return 0
  mkdir -p "$d"
  openssl req -newkey rsa:2048 -nodes -subj "/CN=h$n" -keyout "$d/server-key.pem" \
    -out "$d/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:%s\nextendedKeyUsage=serverAuth\n' "$(host_addr "$n")" > "$d/server.ext"
  openssl x509 -req -in "$d/server.csr" -CA "$TLS/ca.pem" -CAkey "$TLS/ca-key.pem" \
    -CAcreateserial -days 3650 -extfile "$d/server.ext" -out "$d/server.pem" 2>/dev/null
  chmod 600 "$d/server-key.pem"
}

running() { [ -s "$DIR/h$1/docker.pid" ] && kill -0 "$(cat "$DIR/h$1/docker.pid")" 2>/dev/null; }

answers() {
  docker --tlsverify --tlscacert "$TLS/ca.pem" --tlscert "$TLS/cert.pem" --tlskey "$TLS/key.pem" \
    -H "tcp://$(host_addr "$1"):2376" info >/dev/null 2>&1
}

up_one() {
  local n=$1 ns="h$1" d="$DIR/h$1"
  server_cert "$n"
  if ! ip netns list | grep -qw "$ns"; then
    ip netns add "$ns"
  fi
  if ! ip link show "${ns}a" >/dev/null 2>&1; then
    ip link add "${ns}a" type veth peer name "${ns}b"
    ip link set "${ns}b" netns "$ns"
    ip addr add "$(peer_addr "$n")/24" dev "${ns}a"
    ip link set "${ns}a" up
    ip netns exec "$ns" sh -c "ip addr add $(host_addr "$n")/24 dev ${ns}b; ip link set ${ns}b up; ip link set lo up; ip route add default via $(peer_addr "$n")"
  fi
  # The manager reaches that host's sessions through it.
  ip route replace "$(bridge_net "$n")" via "$(host_addr "$n")"
  ip route replace "$(session_net "$n")" via "$(host_addr "$n")"
  if ! running "$n"; then
    local driver
    driver=$(docker info -f '{{.Driver}}' 2>/dev/null || echo overlay2)
    # An own bridge subnet per engine, never "bridge": "none" (it removed the main docker0).
    printf '{"storage-driver":"%s","mtu":1400,"bip":"%s"}\n' "$driver" "$(bridge_ip "$n")" > "$d/daemon.json"
    # A host of its own has its own /etc/docker, hence its own engine id (key.json); the
    # engine sees it in a mount namespace of its own. nsenter, not `ip netns exec`: the
    # latter remounts /sys and dockerd loses its cgroups.
    mkdir -p "$d/etc"
    setsid unshare --mount --propagation private sh -c '
      mount --bind "$1/etc" /etc/docker && shift &&
      exec nsenter --net="$@"' sh "$d" "/var/run/netns/$ns" dockerd --config-file "$d/daemon.json" \
      --data-root "$d/root" --exec-root "$d/exec" --pidfile "$d/docker.pid" \
      -H "tcp://$(host_addr "$n"):2376" --tlsverify --tlscacert "$TLS/ca.pem" \
      --tlscert "$d/server.pem" --tlskey "$d/server-key.pem" >"$d/dockerd.log" 2>&1 </dev/null &
  fi
  for _ in $(seq 1 60); do
    answers "$n" && return 0
    sleep 0.5
  done
  echo "the engine of host h$n does not answer; see $d/dockerd.log" >&2
  tail -20 "$d/dockerd.log" >&2 || true
  return 1
}

down_one() {
  local n=$1 ns="h$1" d="$DIR/h$1"
  if running "$n"; then
    local pid
    pid=$(cat "$d/docker.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  ip route del "$(bridge_net "$n")" 2>/dev/null || true
  ip route del "$(session_net "$n")" 2>/dev/null || true
  ip link del "${ns}a" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
}

# The network between the hosts (this machine routes it) carries one host's session subnet
# to another's, as a site's network between nodes does: a multi-node cluster session's
# containers meet there, each host's own rules letting through only the pairs bai names.
# Nothing else is forwarded between them (this machine's FORWARD policy is DROP).
peer_forward() {
  local op=$1 n=$2 m=$3
  local rule=(-i "h${n}a" -o "h${m}a" -s "$(session_net "$n")" -d "$(session_net "$m")" -j ACCEPT)
  case $op in
    add) iptables -w -C FORWARD "${rule[@]}" 2>/dev/null || iptables -w -I FORWARD 1 "${rule[@]}" ;;
    del) while iptables -w -D FORWARD "${rule[@]}" 2>/dev/null; do :; done ;;
  esac
}

engines_json() {
  local n out="[" sep=""
  for d in "$DIR"/h*; do
    [ -d "$d" ] || continue
    n=${d##*/h}
    running "$n" || continue
    out+="$sep{\"endpoint\":\"tcp://$(host_addr "$n"):2376\",\"tls_ca\":\"$TLS/ca.pem\",\"tls_cert\":\"$TLS/cert.pem\",\"tls_key\":\"$TLS/key.pem\",\"scaling_group\":\"h$n\",\"session_subnet\":\"$(session_net "$n")\"}"
    sep=","
  done
  echo "$out]"
}

case "${1:-up}" in
  up)
    [ "$(id -u)" = 0 ] || { echo "scripts/hosts.sh needs root (network namespaces, dockerd)" >&2; exit 1; }
    for tool in dockerd ip nsenter openssl docker; do
      command -v "$tool" >/dev/null || { echo "scripts/hosts.sh needs $tool" >&2; exit 1; }
    done
    mkdir -p "$DIR"
    certs
    for n in $(seq 1 "${2:-2}"); do up_one "$n"; done
    for n in $(seq 1 "${2:-2}"); do
      for m in $(seq 1 "${2:-2}"); do
        [ "$n" = "$m" ] || peer_forward add "$n" "$m"
      done
    done
    echo "hosts up: $(engines_json)"
    ;;
  down)
    for d in "$DIR"/h*; do
      [ -d "$d" ] || continue
      for e in "$DIR"/h*; do
        [ "$d" = "$e" ] || peer_forward del "${d##*/h}" "${e##*/h}"
      done
    done
    for d in "$DIR"/h*; do
      [ -d "$d" ] || continue
      down_one "${d##*/h}"
    done
    ;;
  env)
    echo "BAI_ENGINES='$(engines_json)'"
    ;;
  *)
    echo "usage: scripts/hosts.sh up [N] | down | env" >&2
    exit 2
    ;;
esac
