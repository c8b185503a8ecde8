# A/B on train.py: untraced, rocsync at 089719b, rocsync at HEAD, interleaved per round.
cd scripts/gpu-validate
for r in 1 2 3 4 5 6 7; do
  for m in untraced old new; do
    case $m in
      untraced) python3 train.py 150 ;;
      old) ../../target/device-bench/rocsync-089719b run --no-status --backend cuda -o /tmp/s.json -- python3 train.py 150 2>/dev/null ;;
      new) ../../target/device-bench/rocsync run --no-status --backend cuda -o /tmp/s.json -- python3 train.py 150 2>/dev/null ;;
    esac | tail -1 | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print(json.dumps({'round':$r,'mode':'$m','seconds':d['seconds']}))" >> $OUT/ab.jsonl
  done
done
python3 -c "
import json,statistics as st,collections
rs=[json.loads(l) for l in open('$OUT/ab.jsonl')]
by=collections.defaultdict(list)
for x in rs: by[x['mode']].append(x['seconds'])
u=st.median(by['untraced'])
for m,v in by.items(): print(m, 'median %.3f'%st.median(v), 'ratio %.3f'%(st.median(v)/u), ['%.3f'%s for s in v])
for m in ('old','new'):
  rat=[a['seconds']/b['seconds'] for a in rs if a['mode']==m for b in rs if b['mode']=='untraced' and b['round']==a['round']]
  print(m,'per-round ratio to untraced: median %.3f'%st.median(rat), ['%.3f'%x for x in rat])
"
