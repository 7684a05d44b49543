# Sourced by the bench/compare_*.sh scripts: wait_ready PORT blocks until the server on
# 127.0.0.1:PORT answers /health (up to two minutes), else fails with a message.
wait_ready() {
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "server on port $1 did not come up" >&2
  return 1
}
