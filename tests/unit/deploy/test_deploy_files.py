"""deploy/: what can be checked without a Docker engine or a Kubernetes cluster.

- The Kubernetes manifests against the API's schemas with ``kubernetes-validate`` (offline: its
  wheel carries the schemas), strict (unknown fields refused), at the newest bundled version and at
  an older one still served by managed clusters; then what a schema cannot say (probes on
  ``/health``, the grace period longer than the preStop, the HPA and the Service aimed at the pods).
- compose.yaml: no maintained compose-spec validator ships offline on PyPI, so it is YAML-loaded and
  its required fields checked here (``docker compose config`` was not run).
- The Dockerfile: multi-stage, slim Python 3.11, non-root, HEALTHCHECK; its build and run steps run
  outside Docker in scripts/check_image_steps.sh (.ci/run).
- Files that must agree: nginx's upstream lines and compose's node services, the ports everywhere.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
K8S = DEPLOY / "k8s"
MANIFESTS = sorted(p for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")
PORT = 8080


def load_all(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def resources() -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for path in MANIFESTS for doc in load_all(path)}


@pytest.mark.parametrize("version", [kubernetes_validate.latest_version(), "1.29.0"])
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifest_is_valid_against_the_kubernetes_schema(path, version):
    for doc in load_all(path):
        kubernetes_validate.validate(doc, version, strict=True)  # raises ValidationError


def test_a_manifest_with_an_unknown_field_is_refused():
    """The validator is not vacuous: a misspelt probe field fails strict validation."""
    deployment = resources()["Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    broken = {**container, "readinessProbes": container["readinessProbe"]}
    doc = {**deployment, "spec": {**deployment["spec"], "template": {"spec": {"containers": [broken]}}}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def test_kustomization_lists_every_manifest():
    listed = yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == [p.name for p in MANIFESTS]


def test_deployment_probes_drain_and_runs_unprivileged():
    found = resources()
    pod = found["Deployment"]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["ports"] == [{"name": "http", "containerPort": PORT}]
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}, probe
    # SIGTERM comes after the preStop; the node then needs time to hand its turns back.
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    assert pod["terminationGracePeriodSeconds"] >= int(pre_stop[1]) + 30
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    env = {e["name"]: e for e in container["env"]}
    assert env["AVM_DATABASE_URL"]["valueFrom"]["secretKeyRef"]["key"] == "database-url"  # never inline
    assert env["AVM_NODE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert found["Deployment"]["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_service_hpa_and_budget_select_the_pods():
    found = resources()
    labels = found["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert found["Deployment"]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = found["Service"]["spec"]
    assert service["selector"].items() <= labels.items()
    assert service.get("sessionAffinity", "None") == "None"  # no sticky sessions
    assert service["ports"][0]["targetPort"] == "http"
    assert found["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    hpa = found["HorizontalPodAutoscaler"]["spec"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "agentvm"}
    assert hpa["minReplicas"] >= 2 and hpa["maxReplicas"] > hpa["minReplicas"]
    [metric] = hpa["metrics"]
    assert metric["resource"]["name"] == "cpu"  # the documented metric (docs/cluster.md)
    assert "cpu" in found["Deployment"]["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
    ingress_backend = found["Ingress"]["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert ingress_backend == {"name": found["Service"]["metadata"]["name"], "port": {"name": "http"}}


def test_compose_runs_postgres_two_nodes_and_nginx():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "node1", "node2", "nginx"}
    for name in ("node1", "node2"):
        node = services[name]
        assert node["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
        assert (DEPLOY / node["build"]["context"] / node["build"]["dockerfile"]).is_file()
        assert node["depends_on"] == {"postgres": {"condition": "service_healthy"}}
        env = node["environment"]
        assert env["AVM_NODE_ID"] == name
        assert env["AVM_DATABASE_URL"].startswith("postgresql://agentvm:${POSTGRES_PASSWORD:?")
        assert "@postgres:5432/" in env["AVM_DATABASE_URL"]
        assert str(PORT) in node["expose"]
        assert any(v.endswith(":/var/lib/agentvm") for v in node["volumes"])
    assert services["postgres"]["healthcheck"]["test"][0] == "CMD-SHELL"
    nginx = services["nginx"]
    [mount] = nginx["volumes"]
    source, target, mode = mount.split(":")
    assert (DEPLOY / source).resolve() == DEPLOY / "nginx" / "agentvm.conf" and mode == "ro"
    assert target.startswith("/etc/nginx/conf.d/")
    assert nginx["ports"] == [f"127.0.0.1:{PORT}:{PORT}"]
    assert set(nginx["depends_on"]) == {"node1", "node2"}


def test_nginx_upstreams_are_compose_nodes():
    conf = (DEPLOY / "nginx" / "agentvm.conf").read_text()
    upstream = re.search(r"upstream agentvm \{(.*?)\n\}", conf, re.S)
    assert upstream
    servers = re.findall(r"^\s*server (\S+?)(?: |;)", upstream.group(1), re.M)
    assert servers == [f"node1:{PORT}", f"node2:{PORT}"]
    assert re.search(rf"^\s*listen {PORT};", conf, re.M)


def test_dockerfile_is_multi_stage_slim_and_non_root():
    lines = [ln for ln in (DEPLOY / "Dockerfile").read_text().splitlines() if ln and not ln.startswith("#")]
    stages = [ln.split()[1] for ln in lines if ln.startswith("FROM ")]
    assert len(stages) == 2 and all(s.startswith("python:3.11-slim") for s in stages)
    final = lines[max(i for i, ln in enumerate(lines) if ln.startswith("FROM ")) :]
    user = next(ln for ln in final if ln.startswith("USER "))
    assert user.split()[1].split(":")[0] not in {"0", "root"}
    assert any(ln.startswith("COPY --from=build ") for ln in final)
    assert f"EXPOSE {PORT}" in final
    assert any(ln.startswith("HEALTHCHECK ") for ln in final)
    assert (DEPLOY / "image" / "healthcheck.py").is_file() and (DEPLOY / "image" / "install.sh").is_file()
    assert final[-1] == 'CMD ["avm", "serve"]'
