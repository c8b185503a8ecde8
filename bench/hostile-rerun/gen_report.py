import gzip, sys, json, os
kind = sys.argv[1]; out = sys.argv[2]
def row(i, name="cudaStreamSynchronize", args=None, stream="0x1"):
    a = {"correlation": i, "cuda_stream": stream}
    if args: a.update(args)
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 7, "tid": 7, "ts": i, "dur": 1, "args": a}
with gzip.open(out, "wt", compresslevel=1) as f:
    f.write('{"schemaVersion": 1, "traceEvents": [')
    f.write(json.dumps(row(0, "cudaDeviceSynchronize")))
    if kind == "deep":       # one row whose args nest 200 000 deep
        f.write(', {"ph":"X","cat":"cuda_runtime","name":"x","pid":7,"tid":7,"ts":1,"dur":1,"args":{"a":' + "[" * 200000 + "]" * 200000 + "}}")
    elif kind == "deepobj":  # nesting at the top level of the file, outside rows
        f.write('], "x": ' + "[" * 200000 + "]" * 200000 + ', "traceEvents2": [')
    elif kind == "keys":     # 100 000 rows, 200 distinct 100-byte arg keys each
        for i in range(1, 100001):
            a = {("k%03d" % j) + "q" * 96 + str(i): "v" for j in range(200)}
            f.write(", " + json.dumps(row(i, args=a)))
    elif kind == "kilo":     # 200 000 rows, a distinct 1000-byte stream and name each
        for i in range(1, 200001):
            f.write(", " + json.dumps(row(i, name="cudaStreamSynchronize" + str(i) + "n" * 980, stream="0x" + ("%0998x" % i))))
    elif kind == "manyfields":  # 100 000 rows with 50 extra top-level fields of 1 KB
        for i in range(1, 100001):
            r = row(i); r.update({"f%d" % j: "z" * 1000 for j in range(50)})
            f.write(", " + json.dumps(r))
    f.write('], "rocsync": {"drops": {"lost_ids": 0}}}')
print(out, os.path.getsize(out))
