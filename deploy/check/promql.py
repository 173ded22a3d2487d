"""The PromQL in deploy/: which metrics it names, and whether it returns data.

    python promql.py static  REPO RULES_OUT
        Every metric named by the dashboard's panels and variables and by the alert rules
        must be one `ldpstream serve` exports (its name is a string literal in the Rust
        sources), one Prometheus makes itself (`up`), or one listed in
        deploy/check/pending-metrics.txt. A pending metric that the sources now export must
        be taken off that list. Writes every dashboard expression, with Grafana's variables
        replaced, as a recording rule to RULES_OUT, for `promtool check rules` to parse.

    python promql.py live    REPO PROMETHEUS_URL SERVE_URL
        Every dashboard expression and variable query, run through Prometheus' HTTP API,
        returns at least one series; except those naming a pending metric or one listed in
        deploy/check/no-data-in-check.txt (Kafka-only metrics: the check runs the
        simulator), which are reported as skipped. Every metric the rules and the dashboard
        name (but those) is in serve's own /metrics text. Every rule loaded and evaluates
        without error.

Exit status 1 on any failure.
"""
import json
import os
import re
import sys
import urllib.parse
import urllib.request

import yaml

# Grafana's variables, as the check substitutes them: "All" for the template variables;
# 15s = a few scrape intervals of the check's 1 s scrapes.
SUBSTITUTIONS = {
    "$__rate_interval": "15s",
    "$__interval": "5s",
    "$__range": "5m",
    "$stream": ".*",
    "$test": ".*",
}

PROMQL_WORDS = {
    "by", "without", "and", "or", "unless", "on", "ignoring", "group_left", "group_right",
    "bool", "offset", "inf", "nan", "atan2",
}
# Series Prometheus makes itself for every target.
PROMETHEUS_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}


def substitute(expr):
    for k in sorted(SUBSTITUTIONS, key=len, reverse=True):
        expr = expr.replace(k, SUBSTITUTIONS[k])
    return expr


def metric_names(expr):
    """Metric names in a PromQL expression (no full parser: enough for this project's)."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings (label values, regexes)
    s = re.sub(r"\{[^}]*\}", "", s)  # label matchers
    s = re.sub(r"\[[^\]]*\]", "", s)  # range and subquery durations
    # Label lists of aggregations and vector matching.
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    names = set()
    # Not after a digit or a dot: the "e" of 1e-6, the "m" of offset 5m.
    for m in re.finditer(r"(?<![A-Za-z0-9_:.])[A-Za-z_:][A-Za-z0-9_:]*", s):
        word = m.group(0)
        rest = s[m.end():].lstrip()
        if rest.startswith("("):
            continue  # a function or aggregation
        if word.lower() in PROMQL_WORDS:
            continue
        names.add(word)
    return names


def label_values_query(q):
    """Grafana's label_values(selector, label) -> (selector, label)."""
    m = re.fullmatch(r"\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*", q)
    if not m:
        raise ValueError(f"unsupported variable query: {q}")
    return m.group(1), m.group(2)


def dashboard_queries(dashboard):
    """(where, expr) for every panel target, and (where, selector, label) for variables."""
    exprs, variables = [], []

    def walk(panels):
        for p in panels:
            walk(p.get("panels", []))
            for t in p.get("targets", []):
                if t.get("expr"):
                    exprs.append((f"panel {p['id']} {p['title']!r} {t['refId']}", t["expr"]))

    walk(dashboard["panels"])
    for v in dashboard["templating"]["list"]:
        if v["type"] == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            sel, label = label_values_query(q)
            variables.append((f"variable ${v['name']}", sel, label))
    return exprs, variables


def rule_exprs(rules):
    return [
        (f"rule {r.get('alert') or r.get('record')}", r["expr"])
        for g in rules["groups"]
        for r in g["rules"]
    ]


def listed(path):
    """Metric names listed in a file, one per line, before any '#' comment."""
    out = {}
    with open(path) as f:
        for line in f:
            body, _, note = line.partition("#")
            if body.strip():
                out[body.split()[0]] = note.strip()
    return out


def exported_names(repo):
    """ldpstream_* string literals in the Rust sources: the metrics serve can export."""
    names = set()
    for base, dirs, files in os.walk(repo):
        dirs[:] = [d for d in dirs if d not in {"target", ".git", "tests", ".venv", ".kafka"}]
        for f in files:
            if f.endswith(".rs"):
                with open(os.path.join(base, f), encoding="utf-8", errors="replace") as fh:
                    names.update(re.findall(r'"(ldpstream_[a-z0-9_]+)"', fh.read()))
    return names


def base_name(name, exported):
    for suffix in ("_bucket", "_count", "_sum"):
        if name.endswith(suffix) and name[: -len(suffix)] in exported:
            return name[: -len(suffix)]
    return name


def load(repo):
    with open(os.path.join(repo, "deploy/grafana/ldpstream.json")) as f:
        dashboard = json.load(f)
    with open(os.path.join(repo, "deploy/prometheus/rules.yml")) as f:
        rules = yaml.safe_load(f)
    pending = listed(os.path.join(repo, "deploy/check/pending-metrics.txt"))
    no_data = listed(os.path.join(repo, "deploy/check/no-data-in-check.txt"))
    return dashboard, rules, pending, no_data


def static(repo, rules_out):
    dashboard, rules, pending, _ = load(repo)
    exported = exported_names(repo)
    exprs, variables = dashboard_queries(dashboard)
    everything = exprs + rule_exprs(rules) + [(w, sel) for w, sel, _ in variables]
    failed = 0
    # The dashboard's own shape: unique panel ids, a query in every panel, one data source.
    ids = []
    for p in dashboard["panels"]:
        ids.append(p["id"])
        if p["type"] == "row":
            continue
        if not p.get("targets"):
            print(f"FAIL panel {p['id']} {p['title']!r} has no query")
            failed += 1
        for ds in [p.get("datasource")] + [t.get("datasource") for t in p.get("targets", [])]:
            if ds != {"type": "prometheus", "uid": "${datasource}"}:
                print(f"FAIL panel {p['id']} {p['title']!r}: data source {ds}, not the variable")
                failed += 1
    if len(ids) != len(set(ids)):
        print(f"FAIL duplicate panel ids: {sorted(ids)}")
        failed += 1
    used_pending = set()
    for where, expr in everything:
        names = metric_names(substitute(expr))
        if not names:
            print(f"FAIL {where}: no metric found in {expr!r}")
            failed += 1
        for n in sorted(names):
            b = base_name(n, exported)
            if b in exported or n in PROMETHEUS_SERIES:
                continue
            if b in pending:
                used_pending.add(b)
                continue
            print(f"FAIL {where}: {n} is not exported by serve (no \"{b}\" in the Rust sources)")
            failed += 1
    for name in sorted(pending):
        if name in exported:
            print(f"FAIL {name} is exported now: take it off deploy/check/pending-metrics.txt")
            failed += 1
        elif name not in used_pending:
            print(f"FAIL {name} is listed as pending but nothing in deploy/ uses it")
            failed += 1
        else:
            print(f"PENDING {name}: {pending[name]}")
    # Every dashboard expression as a recording rule, for `promtool check rules` to parse.
    doc = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}", "expr": substitute(e)} for i, (_, e) in enumerate(exprs)
    ] + [
        {"record": f"dashboard:variable_{i}", "expr": substitute(sel)}
        for i, (_, sel, _) in enumerate(variables)
    ]}]}
    with open(rules_out, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False, width=1000)
    print(f"{len(exprs)} dashboard queries, {len(variables)} variables, "
          f"{len(rule_exprs(rules))} rules: {failed} metric-name failures")
    return failed


def api(url, path, params):
    q = urllib.parse.urlencode(params, doseq=True)
    with urllib.request.urlopen(f"{url}{path}?{q}", timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"{path} {params}: {body}")
    return body["data"]


def scraped_names(serve_url):
    with urllib.request.urlopen(f"{serve_url}/metrics", timeout=10) as r:
        text = r.read().decode()
    return set(re.findall(r"^# TYPE (\S+) ", text, re.M))


def live(repo, url, serve_url):
    dashboard, rules, pending, no_data = load(repo)
    exported = exported_names(repo)
    exprs, variables = dashboard_queries(dashboard)
    failed = skipped = passed = 0

    scraped = scraped_names(serve_url)
    named = set()
    for _, e in exprs + rule_exprs(rules) + [(w, sel) for w, sel, _ in variables]:
        named |= {base_name(n, exported) for n in metric_names(substitute(e))}
    for n in sorted(named - PROMETHEUS_SERIES - set(pending) - set(no_data)):
        if n in scraped:
            passed += 1
        else:
            failed += 1
            print(f"FAIL {n} is named in deploy/ but not in serve's /metrics")
    print(f"{len(named)} metric names in the rules and the dashboard; serve's /metrics has "
          f"{len(scraped)} families")

    def why_skip(expr):
        names = {base_name(n, exported) for n in metric_names(expr)}
        for n in sorted(names):
            if n in pending:
                return f"{n} is pending (not exported yet)"
            if n in no_data:
                return f"{n}: {no_data[n]}"
        return None

    for where, expr in exprs:
        e = substitute(expr)
        skip = why_skip(e)
        try:
            result = api(url, "/api/v1/query", {"query": e})["result"]
        except Exception as err:  # an HTTP 400 is a query Prometheus rejects
            print(f"FAIL {where}: {e}\n     {err}")
            failed += 1
            continue
        if result:
            passed += 1
            print(f"ok   {where}: {len(result)} series")
        elif skip:
            skipped += 1
            print(f"SKIP {where}: no data; {skip}")
        else:
            failed += 1
            print(f"FAIL {where}: no data for {e}")
    for where, sel, label in variables:
        values = api(url, f"/api/v1/label/{label}/values", {"match[]": substitute(sel)})
        if values:
            passed += 1
            print(f"ok   {where}: {values}")
        else:
            failed += 1
            print(f"FAIL {where}: label_values({sel}, {label}) is empty")
    for g in api(url, "/api/v1/rules", {})["groups"]:
        for r in g["rules"]:
            if r.get("health") != "ok":
                failed += 1
                print(f"FAIL rule {r['name']}: health {r.get('health')} {r.get('lastError', '')}")
    print(f"dashboard against Prometheus: {passed} passed, {failed} failed, {skipped} skipped")
    return failed


def main(argv):
    if len(argv) == 4 and argv[1] == "static":
        return 1 if static(argv[2], argv[3]) else 0
    if len(argv) == 5 and argv[1] == "live":
        return 1 if live(argv[2], argv[3], argv[4]) else 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
