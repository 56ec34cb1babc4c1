# Sourced by scripts/test.sh: installs Debian's PostgreSQL if missing, starts a cluster on
# 127.0.0.1:5432, ensures the role bai/bai, drops leftover test databases and exports
# BAI_TEST_PG_URL for the tests.
ensure_debs postgresql
pg_version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
pg_lsclusters -h | awk '{print $1" "$2}' | grep -qx "$pg_version main" || pg_createcluster "$pg_version" main >/dev/null
pg_lsclusters -h | awk '$1=="'"$pg_version"'" && $2=="main" {print $4}' | grep -qx online || pg_ctlcluster "$pg_version" main start
for _ in $(seq 1 60); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.5; done
pg_isready -h 127.0.0.1 -p 5432
psql_admin() { su postgres -c "psql -v ON_ERROR_STOP=1 -qtAc \"$1\""; }
psql_admin "SELECT 1 FROM pg_roles WHERE rolname = 'bai'" | grep -q 1 \
  || psql_admin "CREATE ROLE bai LOGIN SUPERUSER PASSWORD 'bai'"
for db in $(psql_admin "SELECT datname FROM pg_database WHERE datname LIKE 'bai_t_%'"); do
  psql_admin "DROP DATABASE IF EXISTS $db" || true
done
export BAI_TEST_PG_URL="postgres://bai:bai@127.0.0.1:5432/postgres"
