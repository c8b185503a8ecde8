import json, os, sys
out = sys.argv[1]; n = int(sys.argv[2]); distinct = sys.argv[3] == "distinct"
os.makedirs(out, exist_ok=True)
for i in range(n):
    r = {"ph": "X", "cat": "cpu_op", "name": "ncclAllReduce", "pid": 1000 + i, "tid": 1, "ts": 1, "dur": 1,
         "args": {"correlation": 1, "Seq": 1, "comm": "0x10", "Rank": i % 8, "Group size": 8,
                  "In msg nelems": (4 + i) if distinct else 4, "dtype": "Float"}}
    with open(os.path.join(out, "rank%05d.json" % i), "w") as f:
        json.dump({"schemaVersion": 1, "traceEvents": [r], "rocsync": {"drops": {}}}, f)
