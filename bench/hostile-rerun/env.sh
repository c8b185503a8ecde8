# Paths of the built rocsync and fixtures (the worktree's release build).
W=/work/w-neighbours
ROCSYNC=${ROCSYNC:-/tmp/neighbours-attacks/rocsync-main}
OUT=${OUT:-/work/w-neighbours/target/release/build/rocsync-tests-d52178b914019c58/out}
NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups"
# start_daemon DIR EXE FLAGS...: a private daemon counting EXE; its log DIR/daemon.log.
start_daemon() {
  local d=$1 exe=$2; shift 2
  $ROCSYNC daemon --metrics-addr 127.0.0.1:0 --state-dir $d/state --socket $d/rocsync.sock \
    --lock $d/daemon.lock --include-exe $exe --budget-mode shed-only "$@" 2> $d/daemon.log &
  DAEMON=$!
  for i in $(seq 600); do grep -q "SIGTERM stops" $d/daemon.log && break; sleep 0.2; done
  ADDR=$(grep -o 'http://[0-9.:]*' $d/daemon.log | head -1)
}
stop_daemon() { kill -TERM $DAEMON; wait $DAEMON; }
