#!/usr/bin/env python3
"""Checks what deploy/ ships without a container runtime or a cluster.

- Kubernetes manifests: valid YAML, the fields each kind needs, selectors
  that match the pods, probes on the health endpoints, resource requests,
  a non-root pod; `kubectl kustomize` renders them when kubectl is here.
- docker-compose.yml: valid YAML, every service has an image or a build.
- Dockerfile: a non-root runtime stage with an exec-form entrypoint.
- Prometheus rules and the Grafana dashboard: valid, and every metric
  they name is one the code defines.
- systemd units: `systemd-analyze verify` when it is here.

Prints what it checked and what it could not; exits 1 on any problem.
Needs PyYAML (scripts/test.sh installs it into .venv).
"""

import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
problems = []
skipped = []


def problem(where, what):
    problems.append(f"{where}: {what}")


def known_metrics():
    """Every metric family the code names (`"switchboard_..."` or
    `"process_..."` string constants)."""
    names = set()
    for path in ROOT.glob("*/src/**/*.rs"):
        for m in re.finditer(r'"((?:switchboard|process)_[a-z0-9_]+)"', path.read_text()):
            names.add(m.group(1))
    return names


def metric_families(expr):
    for name in re.findall(r"\b((?:switchboard|process)_[a-z0-9_]+)", expr):
        yield re.sub(r"_(bucket|count|sum)$", "", name)


def labels_match(selector, labels):
    return all(labels.get(k) == v for k, v in (selector or {}).items())


def check_kubernetes():
    docs = []
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        if path.name == "nats-values.yaml":
            # Values for the NATS Helm chart, not a manifest.
            try:
                yaml.safe_load(path.read_text())
            except yaml.YAMLError as e:
                problem(path.name, f"not YAML: {e}")
            continue
        try:
            for doc in yaml.safe_load_all(path.read_text()):
                if doc is not None:
                    docs.append((path.name, doc))
        except yaml.YAMLError as e:
            problem(path.name, f"not YAML: {e}")
    kustomization = next((d for n, d in docs if d.get("kind") == "Kustomization"), None)
    if kustomization is None:
        problem("kubernetes", "no kustomization.yaml")
    else:
        for resource in kustomization.get("resources", []):
            if not (DEPLOY / "kubernetes" / resource).exists():
                problem("kustomization.yaml", f"resource {resource} is missing")
    workloads = []
    for name, doc in docs:
        kind = doc.get("kind")
        where = f"{name} {kind}/{doc.get('metadata', {}).get('name')}"
        if kind in ("Kustomization",):
            continue
        for field in ("apiVersion", "kind", "metadata"):
            if field not in doc:
                problem(where, f"no {field}")
        if not doc.get("metadata", {}).get("name"):
            problem(where, "no metadata.name")
        if kind in ("Deployment", "StatefulSet"):
            spec = doc.get("spec", {})
            template = spec.get("template", {})
            labels = template.get("metadata", {}).get("labels", {})
            selector = spec.get("selector", {}).get("matchLabels")
            if not selector or not labels_match(selector, labels):
                problem(where, "selector does not match the pod template's labels")
            workloads.append(labels)
            pod = template.get("spec", {})
            if not pod.get("securityContext", {}).get("runAsNonRoot"):
                problem(where, "pod does not run as non-root")
            for c in pod.get("containers", []):
                cw = f"{where} container {c.get('name')}"
                if not c.get("image"):
                    problem(cw, "no image")
                requests = c.get("resources", {}).get("requests", {})
                if "cpu" not in requests or "memory" not in requests:
                    problem(cw, "no cpu and memory requests")
                ports = {p.get("name") for p in c.get("ports", [])}
                for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
                    get = c.get(probe, {}).get("httpGet", {})
                    if get.get("path") != path:
                        problem(cw, f"{probe} is not GET {path}")
                    if get.get("port") not in ports:
                        problem(cw, f"{probe} port {get.get('port')} is not a container port")
                sc = c.get("securityContext", {})
                if sc.get("allowPrivilegeEscalation") is not False:
                    problem(cw, "allowPrivilegeEscalation is not false")
            if kind == "StatefulSet":
                if not spec.get("volumeClaimTemplates"):
                    problem(where, "a StatefulSet without a volume claim")
                if not any(
                    d.get("kind") == "Service" and d["metadata"]["name"] == spec.get("serviceName")
                    for _, d in docs
                ):
                    problem(where, f"serviceName {spec.get('serviceName')} is not a Service here")
    for name, doc in docs:
        kind = doc.get("kind")
        where = f"{name} {kind}/{doc.get('metadata', {}).get('name')}"
        if kind == "Service":
            selector = doc.get("spec", {}).get("selector")
            if not any(labels_match(selector, w) for w in workloads):
                problem(where, "selects no pod")
        if kind == "PodDisruptionBudget":
            selector = doc.get("spec", {}).get("selector", {}).get("matchLabels")
            if not any(labels_match(selector, w) for w in workloads):
                problem(where, "selects no pod")
    if shutil.which("kubectl"):
        run = subprocess.run(
            ["kubectl", "kustomize", str(DEPLOY / "kubernetes")],
            capture_output=True,
            text=True,
        )
        if run.returncode != 0:
            problem("kubectl kustomize", run.stderr.strip())
        else:
            print(f"kubernetes: kubectl kustomize rendered {run.stdout.count('kind:')} objects")
    else:
        skipped.append("kubectl kustomize (no kubectl here)")
    print(f"kubernetes: {len(docs)} documents checked")


def check_compose():
    path = DEPLOY / "docker" / "docker-compose.yml"
    try:
        compose = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        problem(path.name, f"not YAML: {e}")
        return
    services = compose.get("services", {})
    for name, service in services.items():
        if "image" not in service and "build" not in service:
            problem(f"compose {name}", "no image or build")
    nats = [n for n, s in services.items() if str(s.get("image", "")).startswith("nats:")]
    if len(nats) != 3:
        problem("compose", f"{len(nats)} NATS nodes, not 3")
    print(f"compose: {len(services)} services checked")


def check_dockerfile():
    path = DEPLOY / "docker" / "Dockerfile"
    text = path.read_text()
    stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", text, re.M)
    if not stages or stages[-1][1] != "runtime":
        problem("Dockerfile", "the last stage is not `runtime`")
    for image, _ in stages:
        if image.endswith(":latest") or (":" not in image and image != "scratch"):
            problem("Dockerfile", f"{image} is not pinned to a tag")
    runtime = text[text.rfind("FROM ") :]
    if not re.search(r"^USER\s+(nonroot|\d+)", runtime, re.M):
        problem("Dockerfile", "the runtime stage does not switch to a non-root user")
    if not re.search(r'^ENTRYPOINT\s+\[', runtime, re.M):
        problem("Dockerfile", "the entrypoint is not in exec form")
    if shutil.which("hadolint"):
        run = subprocess.run(["hadolint", str(path)], capture_output=True, text=True)
        if run.returncode != 0:
            problem("hadolint", run.stdout.strip())
    else:
        skipped.append("hadolint (not installable here)")
    print("Dockerfile: checked")


def check_monitoring():
    known = known_metrics()
    path = DEPLOY / "monitoring" / "switchboard-rules.yml"
    rules = yaml.safe_load(path.read_text())
    count = 0
    for group in rules.get("groups", []):
        for rule in group.get("rules", []):
            count += 1
            where = f"rule {rule.get('alert')}"
            for field in ("alert", "expr"):
                if not rule.get(field):
                    problem(where, f"no {field}")
            if not rule.get("labels", {}).get("severity"):
                problem(where, "no severity label")
            if not rule.get("annotations", {}).get("summary"):
                problem(where, "no summary")
            for family in metric_families(rule.get("expr", "")):
                if family not in known:
                    problem(where, f"{family} is not a metric the code defines")
    if shutil.which("promtool"):
        run = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)
        if run.returncode != 0:
            problem("promtool", run.stdout.strip() + run.stderr.strip())
    else:
        skipped.append("promtool check rules (no promtool here)")
    dashboard = json.loads((DEPLOY / "monitoring" / "grafana-dashboard.json").read_text())
    targets = 0
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets", []):
            targets += 1
            for family in metric_families(target.get("expr", "")):
                if family not in known:
                    problem(f"dashboard panel {panel.get('title')}", f"{family} is not a metric the code defines")
    print(f"monitoring: {count} alert rules and {targets} dashboard queries checked")


def check_systemd():
    units = sorted((DEPLOY / "systemd").glob("*.service"))
    if not shutil.which("systemd-analyze"):
        skipped.append("systemd-analyze verify (no systemd here)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        for unit in units:
            # The binary is not installed here: verify the unit with a
            # stand-in command at the same place in ExecStart.
            text = unit.read_text().replace("/usr/local/bin/switchboard", shutil.which("true"))
            copy = pathlib.Path(tmp) / unit.name
            copy.write_text(text)
            run = subprocess.run(
                ["systemd-analyze", "verify", "--man=no", str(copy)],
                capture_output=True,
                text=True,
            )
            lines = [
                l
                for l in (run.stdout + run.stderr).splitlines()
                if l.strip() and "Documentation" not in l and "Failed to connect to bus" not in l
            ]
            if run.returncode != 0 or lines:
                problem(unit.name, "; ".join(lines) or f"exit {run.returncode}")
    print(f"systemd: {len(units)} units verified")


check_kubernetes()
check_compose()
check_dockerfile()
check_monitoring()
check_systemd()
for s in skipped:
    print(f"not run here: {s}")
if problems:
    for p in problems:
        print(f"PROBLEM {p}", file=sys.stderr)
    sys.exit(1)
print("deploy: ok")
