# Sourced by the bench/compare_*.sh scripts: wait_ready PORT blocks until the server on
# 127.0.0.1:PORT answers /health (up to READY_TIMEOUT seconds, default 120: a 16 GB mixture of
# experts needs more), else fails with a message.
wait_ready() {
  local deadline=$((SECONDS + ${READY_TIMEOUT:-120}))
  while ((SECONDS < deadline)); do
    curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "server on port $1 did not come up" >&2
  return 1
}
