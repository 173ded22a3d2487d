"""Validates custom resources against the openAPIV3Schema of a vendored CRD, offline.

    python validate_crd.py CRD.yaml RESOURCE.yaml...

kubernetes-validate has no schema for custom resources (it only warns), so the
ServiceMonitor is checked here. Like `kubectl apply --validate=strict`, an unknown field is
an error: every object schema that lists `properties` gets `additionalProperties: false`
unless it says otherwise (the API server would silently prune such a field).
"""
import sys

import jsonschema
import yaml


def strict(schema):
    if isinstance(schema, dict):
        if (
            schema.get("type") == "object"
            and "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
        for v in schema.values():
            strict(v)
    elif isinstance(schema, list):
        for v in schema:
            strict(v)
    return schema


def main(crd_path, resource_paths):
    with open(crd_path) as f:
        crd = yaml.safe_load(f)
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    schemas = {
        f"{group}/{v['name']}": strict(v["schema"]["openAPIV3Schema"])
        for v in crd["spec"]["versions"]
    }
    failed = 0
    for path in resource_paths:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        for doc in docs:
            name = f"{path}: {doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
            if doc.get("kind") != kind:
                print(f"ERROR {name}: expected kind {kind}")
                failed += 1
                continue
            schema = schemas.get(doc.get("apiVersion"))
            if schema is None:
                print(f"ERROR {name}: apiVersion {doc.get('apiVersion')} not in {sorted(schemas)}")
                failed += 1
                continue
            # metadata is the API server's ObjectMeta, not part of the CRD's schema.
            body = {k: v for k, v in doc.items() if k != "metadata"}
            errors = sorted(
                jsonschema.Draft7Validator(schema).iter_errors(body), key=lambda e: list(e.path)
            )
            for e in errors:
                print(f"ERROR {name}: {'.'.join(map(str, e.path))}: {e.message}")
            failed += bool(errors)
            if not errors:
                print(f"INFO {name} passed against {doc['apiVersion']} (vendored CRD)")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
