#!/bin/bash
# Item 1 variant: root's call blocks first (12 s), then nobody's churn of short-lived
# threads starts (each one hipStreamSynchronize(0)); the hang trace must end "returned"
# at the call's real return, and the call be timed (a stall, none untimed).
. /tmp/neighbours-attacks/env.sh
D=/tmp/neighbours-a1; rm -rf $D; mkdir -p $D; chmod 755 $D
cp ${SCEN:-/tmp/neighbours-attacks/scenario-main} $D/scenario
start_daemon $D $D/scenario --capture-on-stall 50ms --hang-after 1s
mkfifo $D/gate; chmod 666 $D/gate
SCENARIO_LOG=$D/victim.log $D/scenario gated stall 1 12000000 < $D/gate > $D/victim.out & V=$!
exec 3> $D/gate
for i in $(seq 300); do grep -q "tracking pid $V" $D/daemon.log && break; sleep 0.1; done
echo go >&3
sleep 1.5
$NOBODY $D/scenario churn 14000 > $D/churn.out & C=$!
wait $V; wait $C
sleep 2
cat $D/churn.out
grep -E "hang:|stall:" $D/daemon.log | grep "pid $V" | cut -c1-200
f=$(ls $D/state/traces/*hang*$V* $D/state/*hang*$V* 2>/dev/null | head -1)
echo "trace: $f"
[ -n "$f" ] && python3 -c "
import json; t=json.load(open('$f')); h=t['rocsync']['parameters']['hang']; print('ended', h.get('ended'))
rows=[e for e in t['traceEvents'] if e.get('cat')=='cuda_runtime' and e.get('pid')==$V and e['name']=='hipStreamSynchronize']
print('rows', [(r.get('dur'), r['args'].get('return')) for r in rows][:3])"
curl -s $ADDR/metrics | grep -E "^rocsync_(stalls_total|calls_untimed_total|hang_traces_total)"
stop_daemon
