#!/usr/bin/env python3
"""Checks what deploy/ ships without a container runtime or a cluster.

- Kubernetes manifests: valid YAML, the fields each kind needs, selectors
  that match the pods, probes on the health endpoints, resource requests,
  a non-root pod; `kubectl kustomize` renders them when kubectl is here.
- The Helm chart: lint, rendered with each values file, validated against
  the Kubernetes schemas, and checked as the manifests are.
- docker-compose.yml: valid YAML, every service has an image or a build.
- Dockerfile: a non-root runtime stage with an exec-form entrypoint.
- Prometheus rules and the Grafana dashboard: valid, and every metric
  they name is one the code defines.
- systemd units: `systemd-analyze verify` when it is here.

Prints what it checked and what it could not; exits 1 on any problem.
Needs PyYAML (scripts/test.sh installs it into .venv).
"""

import copy
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
VERSION = re.search(r'^version = "([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M).group(1)
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


KUBE = DEPLOY / "kubernetes"


def render(directory, component=False):
    """The documents a kustomization makes, by kustomize's rules for what
    this repository uses: resources (files and directories), components,
    namespace, labels (not on selectors) and images. Anything else is a
    problem, so that a feature this does not render is never skipped."""
    path = directory / "kustomization.yaml"
    try:
        k = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        problem(str(path.relative_to(ROOT)), f"unreadable: {e}")
        return []
    known = {"apiVersion", "kind", "resources", "components", "namespace", "labels", "images"}
    for key in set(k) - known:
        problem(str(path.relative_to(ROOT)), f"{key} is not rendered by scripts/check-deploy.py")
    docs = []
    for resource in k.get("resources", []):
        target = (directory / resource).resolve()
        if target.is_dir():
            docs += render(target)
        elif target.is_file():
            try:
                docs += [d for d in yaml.safe_load_all(target.read_text()) if d is not None]
            except yaml.YAMLError as e:
                problem(str(target.relative_to(ROOT)), f"not YAML: {e}")
        else:
            problem(str(path.relative_to(ROOT)), f"resource {resource} is missing")
    for c in k.get("components", []):
        docs += render((directory / c).resolve(), component=True)
    for doc in docs:
        meta = doc.setdefault("metadata", {})
        if k.get("namespace") and doc.get("kind") != "Namespace":
            meta["namespace"] = k["namespace"]
        for label in k.get("labels", []):
            meta.setdefault("labels", {}).update(label.get("pairs", {}))
            if label.get("includeSelectors"):
                problem(str(path.relative_to(ROOT)), "labels with includeSelectors are not rendered here")
        for c in doc.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            for image in k.get("images", []):
                name, _, tag = c.get("image", "").partition(":")
                if name == image["name"]:
                    c["image"] = f"{image.get('newName', name)}:{image.get('newTag', tag)}".rstrip(":")
    return docs


def check_kubernetes():
    for path in sorted(KUBE.rglob("*.yaml")):
        try:
            list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError as e:
            problem(str(path.relative_to(DEPLOY)), f"not YAML: {e}")
    docs = [("kustomization", d) for d in render(KUBE)]
    monitored = render(KUBE / "with-monitoring")
    if not any(d.get("kind") == "ServiceMonitor" for d in monitored):
        problem("with-monitoring", "renders no ServiceMonitor")
    if any(d.get("kind") == "ServiceMonitor" for _, d in docs):
        problem("kubernetes", "the default rendering needs the Prometheus operator's CRD")
    check_workloads(docs)
    validate_schemas("kustomization", yaml.safe_dump_all([d for _, d in docs]))
    validate_schemas("with-monitoring", yaml.safe_dump_all(monitored))
    if shutil.which("kubectl"):
        for target in (KUBE, KUBE / "with-monitoring"):
            run = subprocess.run(
                ["kubectl", "kustomize", str(target)],
                capture_output=True,
                text=True,
            )
            if run.returncode != 0:
                problem("kubectl kustomize", run.stderr.strip())
                continue
            theirs = sorted(
                (d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(run.stdout) if d
            )
            rendered = [d for _, d in docs] if target == KUBE else monitored
            ours = sorted((d["kind"], d["metadata"]["name"]) for d in rendered)
            if theirs != ours:
                problem("kubectl kustomize", f"{target.name}: renders {theirs}, this script {ours}")
            print(f"kubernetes: kubectl kustomize {target.relative_to(DEPLOY)} rendered {len(theirs)} objects, as this script does")
    else:
        skipped.append("kubectl kustomize (no kubectl here; rendered by this script only)")
    print(f"kubernetes: {len(docs)} rendered documents checked")
    secrets = example_secrets()
    for p in check_roles([d for _, d in docs], secrets):
        problem("config check", p)
    check_nats_users([d for _, d in docs], secrets)
    self_test([d for _, d in docs], secrets)


def check_workloads(docs):
    """The fields each kind needs, selectors that match the pods, probes
    on the health endpoints, resource requests, a non-root pod: on
    `(source, document)` pairs, rendered by kustomize or by Helm."""
    workloads = []
    for name, doc in docs:
        kind = doc.get("kind")
        where = f"{name} {kind}/{doc.get('metadata', {}).get('name')}"
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
                elif c["image"].startswith("switchboard") and c["image"] != f"switchboard:{VERSION}":
                    problem(cw, f"image {c['image']} is not switchboard:{VERSION}, what the documented docker build makes")
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


def example_secrets():
    """The Secrets of secret.example.yaml by (namespace, name): the keys
    the pods are documented to get."""
    found = {}
    for doc in yaml.safe_load_all((KUBE / "secret.example.yaml").read_text()):
        if doc and doc.get("kind") == "Secret":
            meta = doc["metadata"]
            found[(meta.get("namespace"), meta["name"])] = dict(doc.get("stringData", {}))
    return found


def switchboard_binary():
    target = os.environ.get("CARGO_TARGET_DIR") or str(ROOT / "target")
    return pathlib.Path(target) / "debug" / "switchboard"


def pod_environment(pod, container, namespace, configmaps, secrets, tmp, claims=()):
    """The environment and file system a container would see: mounted
    ConfigMaps and Secrets written under `tmp`, and a function mapping a
    path in the container to the file written here. Returns (env,
    resolve, problems)."""
    problems = []
    mounts = {}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for m in container.get("volumeMounts", []):
        volume = volumes.get(m["name"])
        if volume is None and m["name"] in claims:
            volume = {"persistentVolumeClaim": {}}
        if volume is None:
            problems.append(f"volume {m['name']} is not defined")
            continue
        local = pathlib.Path(tmp) / m["name"]
        local.mkdir(parents=True, exist_ok=True)
        if "configMap" in volume or "secret" in volume:
            ref = volume.get("configMap") or volume.get("secret")
            name = ref.get("name") or ref.get("secretName")
            data = (configmaps if "configMap" in volume else secrets).get((namespace, name))
            if data is None:
                if not ref.get("optional"):
                    problems.append(f"volume {m['name']}: {name} does not exist")
                data = {}
            items = ref.get("items") or [{"key": k, "path": k} for k in data]
            for item in items:
                if item["key"] not in data:
                    if not ref.get("optional"):
                        problems.append(f"volume {m['name']}: {name} has no key {item['key']}")
                    continue
                (local / item["path"]).write_text(str(data[item["key"]]))
        mounts[m["mountPath"].rstrip("/")] = local

    def resolve(value):
        for mount, local in mounts.items():
            if value == mount or value.startswith(mount + "/"):
                return str(local) + value[len(mount) :]
        return value

    env = {}
    for source in container.get("envFrom", []):
        ref = source.get("secretRef") or source.get("configMapRef") or {}
        data = (secrets if "secretRef" in source else configmaps).get((namespace, ref.get("name")))
        if data is None and not ref.get("optional"):
            problems.append(f"envFrom: {ref.get('name')} does not exist")
        env.update({k: str(v) for k, v in (data or {}).items()})
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = resolve(str(e["value"]))
            continue
        ref = e.get("valueFrom", {})
        key_ref = ref.get("secretKeyRef") or ref.get("configMapKeyRef")
        if key_ref is None:
            problems.append(f"env {e['name']}: only values and key references are checked here")
            continue
        data = (secrets if "secretKeyRef" in ref else configmaps).get((namespace, key_ref["name"])) or {}
        if key_ref["key"] in data:
            env[e["name"]] = str(data[key_ref["key"]])
        elif not key_ref.get("optional"):
            problems.append(f"env {e['name']}: {key_ref['name']} has no key {key_ref['key']}")
    return env, resolve, problems


def check_roles(docs, secrets, quiet=False):
    """Runs `switchboard config check` on each Switchboard container with
    the environment, files and flags its pod would have."""
    binary = switchboard_binary()
    if not binary.is_file():
        return [f"{binary} is not built (cargo build --bin switchboard)"]
    configmaps = {
        (d["metadata"].get("namespace"), d["metadata"]["name"]): d.get("data", {})
        for d in docs
        if d.get("kind") == "ConfigMap"
    }
    found = []
    for doc in docs:
        if doc.get("kind") not in ("Deployment", "StatefulSet"):
            continue
        pod = doc["spec"]["template"]["spec"]
        namespace = doc["metadata"].get("namespace")
        for c in pod.get("containers", []):
            args = c.get("args", [])
            if not str(c.get("image", "")).startswith("switchboard") or not args:
                continue
            where = f"{doc['kind']}/{doc['metadata']['name']} ({args[0]})"
            if args[0] not in ("gateway", "worker", "search"):
                found.append(f"{where}: no config check for role {args[0]}")
                continue
            with tempfile.TemporaryDirectory() as tmp:
                claims = [t["metadata"]["name"] for t in doc["spec"].get("volumeClaimTemplates", [])]
                env, resolve, problems = pod_environment(
                    pod, c, namespace, configmaps, secrets, tmp, claims
                )
                found += [f"{where}: {p}" for p in problems]
                command = [str(binary), "config", "check", "--role", args[0]]
                command += [resolve(str(a)) for a in args[1:]]
                env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}
                run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
                if run.returncode != 0:
                    lines = (run.stdout + run.stderr).strip().splitlines()
                    found += [f"{where}: {l}" for l in lines]
                elif not quiet:
                    print(f"config check {where}: {run.stdout.strip()}")
    return found


def check_nats_users(docs, secrets):
    """The users nats-server gets (nats-values.yaml includes
    accounts.conf, passwords from the Secret in `nats`) are the users the
    pods log in as, with the same passwords."""
    accounts = (ROOT / "nats" / "server" / "secure" / "accounts.conf").read_text()
    users = dict(re.findall(r"user:\s*(\w+)\s*\n\s*password:\s*\$(\w+)", accounts))
    if set(users) != {"admin", "worker", "gateway", "monitor"}:
        problem("accounts.conf", f"users {sorted(users)}, not admin, worker, gateway and monitor")
    values = yaml.safe_load((KUBE / "nats-values.yaml").read_text())
    includes = [v for k, v in values.get("config", {}).get("merge", {}).items() if k.endswith("$include")]
    if "accounts.conf" not in includes:
        problem("nats-values.yaml", "config.merge does not include accounts.conf")
    if "accounts.conf" not in values.get("configMap", {}).get("merge", {}).get("data", {}):
        problem("nats-values.yaml", "configMap.merge.data has no accounts.conf")
    server_env = values.get("container", {}).get("env", {})
    for user, var in users.items():
        ref = (server_env.get(var) or {}).get("valueFrom", {}).get("secretKeyRef")
        if ref is None:
            problem("nats-values.yaml", f"nats-server gets no {var} (user {user}'s password)")
            continue
        if ref.get("key") not in secrets.get(("nats", ref.get("name")), {}):
            problem("secret.example.yaml", f"Secret nats/{ref.get('name')} has no key {ref.get('key')}")
    configmaps = {}
    for doc in docs:
        if doc.get("kind") not in ("Deployment", "StatefulSet"):
            continue
        pod = doc["spec"]["template"]["spec"]
        for c in pod.get("containers", []):
            where = f"{doc['kind']}/{doc['metadata']['name']}"
            with tempfile.TemporaryDirectory() as tmp:
                env, _, _ = pod_environment(pod, c, doc["metadata"].get("namespace"), configmaps, secrets, tmp)
                user = env.get("SWITCHBOARD_NATS_USER")
                password = env.get("SWITCHBOARD_NATS_PASSWORD")
                if "SWITCHBOARD_NATS_PASSWORD_FILE" in env and pathlib.Path(env["SWITCHBOARD_NATS_PASSWORD_FILE"]).is_file():
                    password = pathlib.Path(env["SWITCHBOARD_NATS_PASSWORD_FILE"]).read_text().removesuffix("\n")
            if user is None:
                problem(where, "no NATS user (SWITCHBOARD_NATS_USER)")
                continue
            if user not in users:
                problem(where, f"NATS user {user} is not one of accounts.conf's")
                continue
            ref = (server_env.get(users[user]) or {}).get("valueFrom", {}).get("secretKeyRef", {})
            expected = secrets.get(("nats", ref.get("name")), {}).get(ref.get("key"))
            if password != expected:
                problem(where, f"its NATS password is not the one nats-server has for {user} ({users[user]})")
            args = c.get("args", [])
            define = env.get("SWITCHBOARD_DEFINE_BACKBONE")
            if args and args[0] == "gateway" and define != "false":
                problem(where, "a gateway without SWITCHBOARD_DEFINE_BACKBONE=false (user gateway may not manage JetStream)")


def self_test(docs, secrets):
    """The check must catch the crash of issue 32: pods whose NATS
    password and user disagree. Breaks a copy two ways and expects the
    config check to refuse each."""
    cases = []
    no_user = copy.deepcopy(docs)
    for doc in no_user:
        for c in doc.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            c["env"] = [e for e in c.get("env", []) if e.get("name") != "SWITCHBOARD_NATS_USER"]
    cases.append(("a pod without its NATS user", no_user, secrets, "a NATS password was given without a user"))
    missing_key = copy.deepcopy(secrets)
    missing_key[("switchboard", "switchboard")].pop("nats-gateway-password", None)
    cases.append(("a Secret without the gateway's password", docs, missing_key, "needs a password"))
    for what, case_docs, case_secrets, expected in cases:
        found = check_roles(case_docs, case_secrets, quiet=True)
        if not any(expected in f for f in found):
            problem("self-test", f"{what} passed the config check (expected {expected!r}; got {found})")
        else:
            print(f"self-test: {what} is refused ({expected})")


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



HELM_CHART = DEPLOY / "helm" / "switchboard"
# The values files CI renders the chart with, and values that must be
# refused (a rendering that should fail).
HELM_VALUES = {"default": [], "production": ["-f", str(HELM_CHART / "values-production.yaml")]}
HELM_REFUSED = {
    "an unknown store": ["--set", "store.kind=cassandra"],
    "CQL without nodes": ["--set", "store.kind=scylla"],
    "two gateways on local media": ["--set", "gateway.replicas=2"],
}


def validate_schemas(name, text):
    """`text`'s objects against the Kubernetes API schemas
    (kubernetes-validate, strict: no unknown field). The Prometheus
    operator's kinds have no schema there and are passed over."""
    validate = pathlib.Path(sys.executable).parent / "kubernetes-validate"
    if not validate.is_file():
        problem(name, "kubernetes-validate is not installed (scripts/test.sh installs it)")
        return
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as rendered:
        rendered.write(text)
        rendered.flush()
        check = subprocess.run([str(validate), "--strict", "--quiet", rendered.name], capture_output=True, text=True)
    for line in (check.stdout + check.stderr).strip().splitlines():
        if "Couldn't find schema for kind PrometheusRule" in line or "Couldn't find schema for kind ServiceMonitor" in line:
            continue
        problem(f"kubernetes-validate ({name})", line)
    if check.returncode != 0:
        problem(f"kubernetes-validate ({name})", f"exit {check.returncode}")


def check_helm():
    """deploy/helm/switchboard: `helm lint --strict` and `helm template`
    with each values file; the rendered objects validated against the
    Kubernetes schemas (kubernetes-validate, strict), checked as the
    kustomize manifests are (workloads, `switchboard config check` of
    each pod, NATS users); the alerts it ships the same as
    deploy/monitoring's; bad values refused."""
    helm = ROOT / ".tools" / "helm"
    if not helm.is_file():
        problem("helm", f"{helm} is not installed (scripts/install-helm.sh)")
        return
    chart = yaml.safe_load((HELM_CHART / "Chart.yaml").read_text())
    if chart.get("appVersion") != VERSION:
        problem("Chart.yaml", f"appVersion {chart.get('appVersion')} is not the release's {VERSION}")
    if (HELM_CHART / "files" / "switchboard-rules.yml").read_text() != (DEPLOY / "monitoring" / "switchboard-rules.yml").read_text():
        problem("helm", "files/switchboard-rules.yml is not deploy/monitoring/switchboard-rules.yml (copy it)")
    secrets = example_secrets()
    for name, args in HELM_VALUES.items():
        lint = subprocess.run([str(helm), "lint", "--strict", str(HELM_CHART), *args], capture_output=True, text=True)
        if lint.returncode != 0:
            problem(f"helm lint ({name})", (lint.stdout + lint.stderr).strip())
        run = subprocess.run(
            [str(helm), "template", "switchboard", str(HELM_CHART), "--namespace", "switchboard", *args],
            capture_output=True,
            text=True,
        )
        if run.returncode != 0:
            problem(f"helm template ({name})", run.stderr.strip())
            continue
        validate_schemas(f"helm {name}", run.stdout)
        docs = [d for d in yaml.safe_load_all(run.stdout) if d]
        for d in docs:
            d.setdefault("metadata", {})["namespace"] = "switchboard"
        check_workloads([(f"helm ({name})", d) for d in docs])
        for p in check_roles(docs, secrets, quiet=True):
            problem(f"helm ({name}) config check", p)
        check_nats_users(docs, secrets)
        kinds = sorted({d["kind"] for d in docs})
        print(f"helm ({name}): lint, {len(docs)} objects rendered ({', '.join(kinds)}), validated and checked")
    for what, args in HELM_REFUSED.items():
        run = subprocess.run([str(helm), "template", "switchboard", str(HELM_CHART), *args], capture_output=True, text=True)
        if run.returncode == 0:
            problem("helm", f"{what} is rendered, not refused")
    skipped.append("the chart's ServiceMonitor and PrometheusRule against the Prometheus operator's CRDs (no schema here)")

def check_nats_values():
    """What nats-values.yaml merges into the official NATS chart's
    nats-server configuration (`config.merge`, `config.jetstream.merge`,
    the included accounts.conf with its passwords from the Secret),
    assembled as a configuration file and checked by nats-server 2.15
    itself (`nats-server -t`). The chart's own rendering is not checked:
    the chart is not reachable from these machines' registries."""
    server = ROOT / ".venv" / "bin" / "nats-server"
    if not server.is_file():
        problem("nats-values.yaml", f"{server} is not installed (scripts/test.sh installs it)")
        return
    values = yaml.safe_load((KUBE / "nats-values.yaml").read_text())
    config = values.get("config", {})

    def block(merge, indent):
        lines = []
        for key, value in merge.items():
            if key.endswith("$include"):
                lines.append(f"{indent}include ./{value}")
            else:
                lines.append(f"{indent}{key}: {value}")
        return lines

    with tempfile.TemporaryDirectory() as tmp:
        lines = ["port: 4222"] + block(config.get("merge", {}), "")
        lines += ["jetstream {", f"  store_dir: {tmp}/js"] + block(config.get("jetstream", {}).get("merge", {}), "  ") + ["}"]
        (pathlib.Path(tmp) / "nats.conf").write_text("\n".join(lines) + "\n")
        shutil.copy(ROOT / "nats" / "server" / "secure" / "accounts.conf", pathlib.Path(tmp) / "accounts.conf")
        env = dict(os.environ)
        for doc in yaml.safe_load_all((KUBE / "secret.example.yaml").read_text()):
            if doc and doc.get("metadata", {}).get("name") == "switchboard-nats-users":
                env.update({k: str(v) for k, v in doc.get("stringData", {}).items()})
        run = subprocess.run([str(server), "-t", "-c", str(pathlib.Path(tmp) / "nats.conf")], capture_output=True, text=True, env=env)
        if run.returncode != 0:
            problem("nats-values.yaml", f"nats-server refuses what it merges: {(run.stdout + run.stderr).strip()}")
        else:
            print("nats-values.yaml: its merges and accounts.conf pass nats-server -t")
    skipped.append("the official NATS chart's rendering of nats-values.yaml (the chart is not reachable from here)")


check_kubernetes()
check_helm()
check_nats_values()
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
