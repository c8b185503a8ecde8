"""Parses Prometheus text exposition from stdin with prometheus_client's own parser and
prints every sample as JSON: [[name, {labels}, value], ...]. A malformed exposition is an
exception (non-zero exit).

usage: python parse_metrics.py < metrics.txt
"""
import json
import sys

from prometheus_client.parser import text_string_to_metric_families


def main() -> int:
    samples = []
    types = {}
    for family in text_string_to_metric_families(sys.stdin.read()):
        types[family.name] = family.type
        for s in family.samples:
            samples.append([s.name, s.labels, s.value])
    print(json.dumps({"types": types, "samples": samples}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
