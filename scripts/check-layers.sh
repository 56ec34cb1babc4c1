#!/usr/bin/env bash
# The pure layers depend on no web, GraphQL or database framework: fails, naming the crate,
# when `cargo tree` of bai-types (without features), bai-core, bai-bus or bai-storage
# reaches one — and fails too when `cargo tree` itself cannot answer.
set -euo pipefail
cd "$(dirname "$0")/.."
forbidden='^(axum|axum-core|hyper|tower|tower-http|async-graphql|async-graphql-axum|sea-orm|sea-query|sqlx|sqlx-core|reqwest|bollard)$'
status=0
for crate in bai-types bai-core bai-bus bai-storage; do
  tree=$(cargo tree -e normal -p "$crate" --prefix none --format '{p}' --no-default-features)
  found=$(awk '{print $1}' <<<"$tree" | sort -u | grep -E "$forbidden" || true)
  if [ -n "$found" ]; then
    echo "layer check: $crate depends on $(echo $found | tr '\n' ' ')" >&2
    status=1
  fi
done
[ $status -eq 0 ] && echo "layer check: bai-types, bai-core, bai-bus and bai-storage name no web, GraphQL or database crate"
exit $status
