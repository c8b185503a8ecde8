"""Kubernetes manifests for rocsync's tests, read as YAML and checked against the API's
own types, offline.

usage: python manifests.py load FILE...          every YAML document of the FILEs
                                                  ('-': stdin), as one JSON list
       python manifests.py validate VERSION...   each document of the JSON list on stdin
                                                  checked strictly against every Kubernetes
                                                  VERSION: a JSON list, one entry per
                                                  document, null when valid, else why not

Built-in kinds: kubernetes-validate's strict schemas (JSON schemas made from each release's
OpenAPI, every object closed: a field the API does not have is an error). ServiceMonitor, a
CRD those schemas lack: cloudcoil's prometheus-operator models, generated from the CRD's
openAPIV3Schema; pydantic drops what it does not know, so a key that the model, dumped
back, no longer has is reported as unknown.
"""
import json
import sys

import yaml


def load(files):
    docs = []
    for name in files:
        text = sys.stdin.read() if name == "-" else open(name).read()
        docs += [d for d in yaml.safe_load_all(text) if d is not None]
    return docs


def dropped(given, kept, path=""):
    """The keys of `given` that `kept` (the model's dump of it) lost, as paths."""
    if isinstance(given, dict) and isinstance(kept, dict):
        out = []
        for k, v in given.items():
            if k not in kept:
                out.append(f"{path}.{k}".lstrip("."))
            else:
                out += dropped(v, kept[k], f"{path}.{k}")
        return out
    if isinstance(given, list) and isinstance(kept, list):
        return [p for i, (a, b) in enumerate(zip(given, kept)) for p in dropped(a, b, f"{path}[{i}]")]
    return []


def service_monitor(doc):
    # Imported only when needed: the generated module takes seconds to load.
    from cloudcoil.models.prometheus_operator import v1

    try:
        model = v1.ServiceMonitor.model_validate(doc)
    except Exception as e:  # pydantic's ValidationError names every bad field
        return f"ServiceMonitor: {e}"
    unknown = dropped(doc, model.model_dump(by_alias=True, exclude_unset=True, mode="json"))
    return f"ServiceMonitor: unknown field(s) {unknown}" if unknown else None


def check(doc, versions):
    import kubernetes_validate as kv

    if doc.get("apiVersion") == "monitoring.coreos.com/v1" and doc.get("kind") == "ServiceMonitor":
        return service_monitor(doc)
    for version in versions:
        try:
            kv.validate(doc, version, strict=True)
        except kv.ValidationError as e:
            where = ".".join(str(p) for p in e.path)
            return f"{doc.get('kind')} (Kubernetes {version}): {where}: {e.message}"
        except (kv.SchemaNotFoundError, kv.VersionNotSupportedError) as e:
            return f"{doc.get('kind')} (Kubernetes {version}): {e.message}"
    return None


def main():
    match sys.argv[1:]:
        case ["load", *files] if files:
            print(json.dumps(load(files)))
        case ["validate", *versions] if versions:
            print(json.dumps([check(d, versions) for d in json.load(sys.stdin)]))
        case _:
            sys.exit(__doc__)


if __name__ == "__main__":
    main()
