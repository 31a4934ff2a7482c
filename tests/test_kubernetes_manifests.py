"""The Kubernetes deployment in compat/kubernetes: rendered, checked against the published schemas, and
checked to fit together (labels, ports, probes, settings cllm reads, the endpoint picker's wiring).

Schemas, all offline:
- InferencePool and HTTPRoute: the ``openAPIV3Schema`` of the upstream CRDs vendored in
  tests/data/crds (NOTICE.md there names repository, tag and path), with Kubernetes' own rule that a
  field the schema does not name is an error (kubectl's default strict field validation). The
  ``x-kubernetes-validations`` CEL rules are not evaluated; the InferencePool's two are checked by hand.
- Deployment, Service, PersistentVolumeClaim, ConfigMap, ServiceAccount, Role, RoleBinding: the
  Kubernetes JSON schemas that the kubernetes-validate package ships, in strict mode.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from cllm_ollama.config import Settings, parse_host

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "compat" / "kubernetes"
CRDS = Path(__file__).resolve().parent / "data" / "crds"

# Being added to cllm_ollama/config.py on other branches (the API key and the KV cache's type).
SETTINGS_BEING_ADDED = {"CLLM_API_KEY", "OLLAMA_KV_CACHE_TYPE", "CLLM_KV_CACHE_TYPE"}
# Oldest and newest Kubernetes minor the core objects must be valid for (the inference extension
# supports the three most recent minors; 1.30 leaves room).
KUBERNETES_VERSIONS = ("1.30", kubernetes_validate.latest_version())
CORE_KINDS = {"Deployment", "Service", "PersistentVolumeClaim", "ConfigMap", "ServiceAccount", "Role", "RoleBinding"}
CRD_FILES = {
    ("inference.networking.k8s.io", "InferencePool"): "inference.networking.k8s.io_inferencepools.yaml",
    ("gateway.networking.k8s.io", "HTTPRoute"): "gateway.networking.k8s.io_httproutes.yaml",
}
Doc = dict[str, Any]


# -- rendering ---------------------------------------------------------------------------------


def _kustomization() -> Doc:
    return yaml.safe_load((K8S / "kustomization.yaml").read_text())


def _load_all(path: Path) -> list[Doc]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def _pod_containers(doc: Doc) -> Iterator[Doc]:
    if doc["kind"] == "Deployment":
        pod = doc["spec"]["template"]["spec"]
        yield from pod.get("initContainers", [])
        yield from pod["containers"]


def _render_here() -> list[Doc]:
    """What `kubectl kustomize` makes of this kustomization: its resources, with `images` applied."""
    kustomization = _kustomization()
    images = {image["name"]: image for image in kustomization.get("images", [])}
    docs = [doc for resource in kustomization["resources"] for doc in _load_all(K8S / resource)]
    for doc in docs:
        for container in _pod_containers(doc):
            name, _, tag = container["image"].partition(":")
            if name in images:
                image = images[name]
                container["image"] = f"{image.get('newName', name)}:{image.get('newTag', tag or 'latest')}"
    return docs


def _key(doc: Doc) -> tuple[str, str]:
    return doc["kind"], doc["metadata"]["name"]


@cache
def _rendered_json() -> str:
    docs = _render_here()
    kubectl = shutil.which("kubectl")
    if kubectl is not None:
        # The real renderer where there is one (kubectl has kustomize built in; it needs no cluster).
        out = subprocess.run([kubectl, "kustomize", str(K8S)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        rendered = [doc for doc in yaml.safe_load_all(out.stdout) if doc is not None]
        assert sorted(rendered, key=_key) == sorted(docs, key=_key), "kubectl kustomize renders otherwise"
    return json.dumps(docs)


@pytest.fixture
def rendered() -> list[Doc]:
    return json.loads(_rendered_json())


def _one(docs: list[Doc], kind: str, name: str | None = None) -> Doc:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def _pool(docs: list[Doc]) -> Doc:
    return _one(docs, "InferencePool")


def _server(docs: list[Doc]) -> Doc:
    """The Deployment whose pods the InferencePool selects."""
    selector = _pool(docs)["spec"]["selector"]["matchLabels"]
    found = [
        d
        for d in docs
        if d["kind"] == "Deployment" and selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()
    ]
    assert len(found) == 1, f"the pool's selector {selector} matches {len(found)} Deployments"
    return found[0]


def _container(deployment: Doc, name: str, init: bool = False) -> Doc:
    pod = deployment["spec"]["template"]["spec"]
    return next(c for c in pod["initContainers" if init else "containers"] if c["name"] == name)


# -- schemas -----------------------------------------------------------------------------------


def _closed(schema: Any) -> Any:
    """The schema with every object closed as the API server closes it: fields it does not name are
    errors, except under x-kubernetes-preserve-unknown-fields."""
    if isinstance(schema, list):
        return [_closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _closed(v) for k, v in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@cache
def _crd_validator(group: str, kind: str, version: str) -> jsonschema.Draft7Validator:
    crd = yaml.safe_load((CRDS / CRD_FILES[(group, kind)]).read_text())
    assert crd["spec"]["group"] == group and crd["spec"]["names"]["kind"] == kind
    for served in crd["spec"]["versions"]:
        if served["name"] == version:
            assert served["served"], f"{group}/{version} {kind} is no longer served"
            schema = _closed(served["schema"]["openAPIV3Schema"])
            jsonschema.Draft7Validator.check_schema(schema)
            return jsonschema.Draft7Validator(schema)
    raise LookupError(f"the {kind} CRD has no version {version}")


def _validate(doc: Doc) -> None:
    """Raises if ``doc`` is not a valid object of its kind (jsonschema's or kubernetes-validate's error)."""
    group, _, version = doc["apiVersion"].rpartition("/")
    if (group, doc["kind"]) in CRD_FILES:
        _crd_validator(group, doc["kind"], version).validate(doc)
        return
    if doc["kind"] not in CORE_KINDS:
        raise LookupError(f"no schema to check a {doc['apiVersion']} {doc['kind']} against")
    for kubernetes in KUBERNETES_VERSIONS:
        kubernetes_validate.validate(doc, kubernetes, strict=True)


def _errors(doc: Doc) -> str | None:
    try:
        _validate(doc)
    except (jsonschema.ValidationError, LookupError, kubernetes_validate.SchemaNotFoundError) as exc:
        return getattr(exc, "message", str(exc))
    return None


# -- the files ---------------------------------------------------------------------------------


def test_kustomization_lists_every_manifest() -> None:
    kustomization = _kustomization()
    assert kustomization["apiVersion"] == "kustomize.config.k8s.io/v1beta1"
    assert kustomization["kind"] == "Kustomization"
    listed = kustomization["resources"]
    assert len(listed) == len(set(listed))
    on_disk = sorted(p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed) == on_disk
    assert not list(K8S.glob("*.yml")), "name manifests *.yaml"


def test_every_document_is_a_named_object(rendered: list[Doc]) -> None:
    assert {d["kind"] for d in rendered} == CORE_KINDS | {"InferencePool", "HTTPRoute"}
    for doc in rendered:
        assert {"apiVersion", "kind", "metadata"} <= doc.keys(), doc
        assert "namespace" not in doc["metadata"], "the namespace is kubectl's (-n) or kustomize's to set"
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", doc["metadata"]["name"]), doc["metadata"]
    assert len({_key(d) for d in rendered}) == len(rendered), "two objects of one kind and name"


def test_every_document_matches_its_published_schema(rendered: list[Doc]) -> None:
    for doc in rendered:
        assert _errors(doc) is None, f"{_key(doc)}: {_errors(doc)}"


def test_the_inference_pools_cel_rules(rendered: list[Doc]) -> None:
    """The CRD's x-kubernetes-validations, which jsonschema does not evaluate."""
    spec = _pool(rendered)["spec"]
    numbers = [port["number"] for port in spec["targetPorts"]]
    assert len(numbers) == len(set(numbers)), "port number must be unique"
    ref = spec["endpointPickerRef"]
    assert ref.get("kind", "Service") != "Service" or "port" in ref, "port is required when kind is 'Service'"


def _mutations() -> list[tuple[str, str]]:
    return [
        ("InferencePool", "no selector"),
        ("InferencePool", "v1alpha2's targetPortNumber"),
        ("InferencePool", "a field the CRD does not name"),
        ("InferencePool", "experimental group"),
        ("InferencePool", "port out of range"),
        ("InferencePool", "unknown failure mode"),
        ("HTTPRoute", "backendRef without a name"),
        ("HTTPRoute", "misspelt field"),
        ("Deployment", "misspelt field"),
        ("Service", "port as a word"),
    ]


@pytest.mark.parametrize(("kind", "mutation"), _mutations())
def test_a_broken_manifest_fails_validation(rendered: list[Doc], kind: str, mutation: str) -> None:
    """The validators bite: each of these edits makes a valid object invalid."""
    doc = copy.deepcopy(_one(rendered, kind, "cllm"))
    spec = doc["spec"]
    if mutation == "no selector":
        del spec["selector"]
    elif mutation == "v1alpha2's targetPortNumber":
        spec["targetPortNumber"] = spec.pop("targetPorts")[0]["number"]
    elif mutation == "a field the CRD does not name":
        spec["targetPortNumber"] = spec["targetPorts"][0]["number"]
    elif mutation == "experimental group":
        doc["apiVersion"] = "inference.networking.x-k8s.io/v1alpha2"
    elif mutation == "port out of range":
        spec["targetPorts"][0]["number"] = 70000
    elif mutation == "unknown failure mode":
        spec["endpointPickerRef"]["failureMode"] = "FailSometimes"
    elif mutation == "backendRef without a name":
        del spec["rules"][0]["backendRefs"][0]["name"]
    elif mutation == "misspelt field" and kind == "HTTPRoute":
        spec["parentRef"] = spec.pop("parentRefs")
    elif mutation == "misspelt field":
        spec["replica"] = spec.pop("replicas")
    elif mutation == "port as a word":
        spec["ports"][0]["port"] = "http"
    assert _errors(doc) is not None, f"{kind} with {mutation} passed validation"


# -- how the pieces fit ------------------------------------------------------------------------


def test_labels_select_the_server_pods_and_only_them(rendered: list[Doc]) -> None:
    server = _server(rendered)
    labels = server["spec"]["template"]["metadata"]["labels"]
    assert server["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert server["spec"]["replicas"] >= 2
    service = _one(rendered, "Service", "cllm")
    assert service["spec"]["selector"].items() <= labels.items()
    pool_selector = _pool(rendered)["spec"]["selector"]["matchLabels"]
    for deployment in (d for d in rendered if d["kind"] == "Deployment" and d is not server):
        other = deployment["spec"]["template"]["metadata"]["labels"]
        assert not pool_selector.items() <= other.items(), f"the pool selects {deployment['metadata']['name']}"


def _port_number(container: Doc, port: int | str) -> int:
    if isinstance(port, int):
        return port
    return next(p["containerPort"] for p in container["ports"] if p.get("name") == port)


def test_the_pools_target_port_is_the_servers_port(rendered: list[Doc]) -> None:
    cllm = _container(_server(rendered), "cllm")
    (target,) = [p["number"] for p in _pool(rendered)["spec"]["targetPorts"]]
    assert _port_number(cllm, "http") == target == 11434
    service_port = _one(rendered, "Service", "cllm")["spec"]["ports"][0]
    assert _port_number(cllm, service_port["targetPort"]) == target
    settings = _server_settings(rendered)
    assert settings.host.port == target and settings.host.host == "0.0.0.0"


def test_probes_hit_the_unauthenticated_root(rendered: list[Doc]) -> None:
    cllm = _container(_server(rendered), "cllm")
    (target,) = [p["number"] for p in _pool(rendered)["spec"]["targetPorts"]]
    for probe in ("readinessProbe", "livenessProbe"):
        get = cllm[probe]["httpGet"]
        assert get["path"] == "/", probe
        assert _port_number(cllm, get["port"]) == target, probe
        assert get.get("scheme", "HTTP") == "HTTP" and "httpHeaders" not in get, probe


def _config_data(rendered: list[Doc], container: Doc) -> dict[str, str]:
    data: dict[str, str] = {}
    for source in container.get("envFrom", []):
        data.update(_one(rendered, "ConfigMap", source["configMapRef"]["name"])["data"])
    for var in container.get("env", []):
        if "value" in var:
            data[var["name"]] = var["value"]
    return data


def _env_names(rendered: list[Doc], container: Doc) -> set[str]:
    return set(_config_data(rendered, container)) | {var["name"] for var in container.get("env", [])}


def _server_settings(rendered: list[Doc]) -> Settings:
    return Settings.from_env(_config_data(rendered, _container(_server(rendered), "cllm")))


class _Recorder(dict[str, str]):
    """An empty environment that notes every variable looked up in it."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.asked.add(key)
        return super().get(key, default)


def _names_cllm_reads() -> set[str]:
    env = _Recorder()
    Settings.from_env(env)
    assert {"OLLAMA_HOST", "CLLM_HOST", "OLLAMA_MODELS", "OLLAMA_NUM_PARALLEL"} <= env.asked
    return env.asked


def test_settings_are_ones_cllm_reads_and_parse(rendered: list[Doc]) -> None:
    known = _names_cllm_reads() | SETTINGS_BEING_ADDED
    server = _server(rendered)
    for container in (_container(server, "pull", init=True), _container(server, "cllm")):
        unknown = {n for n in _env_names(rendered, container) if n.startswith(("OLLAMA_", "CLLM_"))} - known
        assert not unknown, f"{container['name']}: cllm reads no {sorted(unknown)}"
    settings = _server_settings(rendered)  # raises on a value cllm cannot parse
    assert settings.keep_alive == float("inf"), "a pool member should keep its model loaded"
    assert settings.max_loaded_models == 1
    cpu_limit = _container(server, "cllm")["resources"]["limits"]["cpu"]
    assert settings.num_thread == int(cpu_limit), "llama.cpp threads should match the CPU limit"
    grace = server["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert settings.shutdown_grace < grace


def test_the_model_volume_is_the_model_store(rendered: list[Doc]) -> None:
    server = _server(rendered)
    pod = server["spec"]["template"]["spec"]
    store = str(_server_settings(rendered).models_dir)
    (volume,) = [v for v in pod["volumes"] if v["name"] == "models"]
    claim = _one(rendered, "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"], "every replica mounts the one store"
    for container in (_container(server, "pull", init=True), _container(server, "cllm")):
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        assert mounts.get(store) == "models", f"{container['name']} does not mount the store at {store}"
        assert str(Settings.from_env(_config_data(rendered, container)).models_dir) == store


def test_the_init_container_pulls_the_model_the_server_preloads(rendered: list[Doc]) -> None:
    server = _server(rendered)
    pull = _container(server, "pull", init=True)
    cllm = _container(server, "cllm")
    assert pull["image"] == cllm["image"]
    assert pull["args"] == ["pull", "$(MODEL)"]
    # Nothing listens in the pod yet: the pull writes the store itself, as it may only when asked.
    assert {"name": "CLLM_LOCAL_STORE", "value": "1"} in pull["env"]
    assert cllm["args"] == ["serve"]
    assert _config_data(rendered, pull)["MODEL"] == _config_data(rendered, cllm)["MODEL"]
    preload = cllm["lifecycle"]["postStart"]["exec"]["command"]
    assert preload[:2] == ["python", "-c"]
    compile(preload[2], "postStart", "exec")
    assert '"keep_alive": -1' in preload[2] and "/api/generate" in preload[2]
    port = parse_host(_config_data(rendered, cllm)["OLLAMA_HOST"]).port
    assert f"127.0.0.1:{port}/" in preload[2]


def test_the_api_key_comes_from_an_optional_secret(rendered: list[Doc]) -> None:
    cllm = _container(_server(rendered), "cllm")
    (key,) = [v for v in cllm["env"] if v["name"] == "CLLM_API_KEY"]
    ref = key["valueFrom"]["secretKeyRef"]
    assert ref["optional"] is True, "the pool must start without the Secret"
    assert "CLLM_API_KEY" not in _one(rendered, "ConfigMap", "cllm")["data"], "a key belongs in a Secret"


def test_images_are_named_by_the_kustomization(rendered: list[Doc]) -> None:
    server = _server(rendered)
    image = _kustomization()["images"][0]
    for container in _pod_containers(server):
        assert container["image"] == f"{image['newName']}:{image['newTag']}"


def test_the_pod_runs_as_the_images_user(rendered: list[Doc]) -> None:
    dockerfile = (K8S / "Dockerfile").read_text()
    pod = _server(rendered)["spec"]["template"]["spec"]
    (user,) = re.findall(r"^USER (\d+):(\d+)$", dockerfile, re.M)
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == tuple(map(int, user))
    assert pod["securityContext"]["runAsNonRoot"] is True
    (expose,) = re.findall(r"^EXPOSE (\d+)$", dockerfile, re.M)
    assert int(expose) == _port_number(_container(_server(rendered), "cllm"), "http")
    assert 'ENTRYPOINT ["cllm"]' in dockerfile and 'CMD ["serve"]' in dockerfile


def test_the_route_sends_openai_traffic_to_the_pool(rendered: list[Doc]) -> None:
    route = _one(rendered, "HTTPRoute")
    (parent,) = route["spec"]["parentRefs"]
    assert (parent["kind"], parent["name"]) == ("Gateway", "inference-gateway")
    (rule,) = route["spec"]["rules"]
    (backend,) = rule["backendRefs"]
    assert (backend["group"], backend["kind"]) == ("inference.networking.k8s.io", "InferencePool")
    assert backend["name"] == _pool(rendered)["metadata"]["name"]
    assert [m["path"] for m in rule["matches"]] == [{"type": "PathPrefix", "value": "/v1"}]


def test_the_endpoint_picker_serves_this_pool(rendered: list[Doc]) -> None:
    pool = _pool(rendered)
    ref = pool["spec"]["endpointPickerRef"]
    service = _one(rendered, "Service", ref["name"])
    assert ref["port"]["number"] in {p["port"] for p in service["spec"]["ports"]}
    epp = next(
        d
        for d in rendered
        if d["kind"] == "Deployment"
        and service["spec"]["selector"].items() <= d["spec"]["template"]["metadata"]["labels"].items()
    )
    pod = epp["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert args[args.index("--pool-name") + 1] == pool["metadata"]["name"]
    assert args[args.index("--pool-group") + 1] == "inference.networking.k8s.io"
    assert any(v["name"] == "NAMESPACE" for v in container["env"]), "the pool's namespace"
    assert not [a for a in args if a.lstrip("-").split("=")[0].endswith("-metric")], (
        "v1.5.0's picker refuses the deprecated metric flags: name metrics in its configuration"
    )
    # It may read the pool and its pods.
    account = pod["serviceAccountName"]
    binding = _one(rendered, "RoleBinding")
    assert {"kind": "ServiceAccount", "name": account} in binding["subjects"]
    rules = _one(rendered, "Role", binding["roleRef"]["name"])["rules"]
    granted = {(group, resource) for r in rules for group in r["apiGroups"] for resource in r["resources"]}
    assert {("", "pods"), ("inference.networking.k8s.io", "inferencepools")} <= granted


def test_the_endpoint_picker_reads_cllms_metric_names(rendered: list[Doc]) -> None:
    epp = next(d for d in rendered if d["kind"] == "Deployment" and d is not _server(rendered))
    (container,) = epp["spec"]["template"]["spec"]["containers"]
    config_file = container["args"][container["args"].index("--config-file") + 1]
    mount = next(m for m in container["volumeMounts"] if config_file.startswith(m["mountPath"] + "/"))
    volume = next(v for v in epp["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"])
    data = _one(rendered, "ConfigMap", volume["configMap"]["name"])["data"]
    config = yaml.safe_load(data[config_file.rpartition("/")[2]])
    assert (config["apiVersion"], config["kind"]) == ("inference.networking.x-k8s.io/v1alpha1", "EndpointPickerConfig")
    plugins = {p.get("name", p["type"]): p for p in config["plugins"]}
    source = plugins["metrics-data-source"]["parameters"]
    assert (source["scheme"], source["path"]) == ("http", "/metrics")
    extractor = plugins["core-metrics-extractor"]["parameters"]
    engine_label = _server(rendered)["spec"]["template"]["metadata"]["labels"][
        "inference.networking.k8s.io/engine-type"
    ]
    assert extractor["defaultEngine"] == engine_label
    (engine,) = [e for e in extractor["engineConfigs"] if e["name"] == engine_label]
    assert engine == {
        "name": engine_label,
        "queuedRequestsSpec": "vllm:num_requests_waiting",
        "runningRequestsSpec": "vllm:num_requests_running",
        "kvUsageSpec": "vllm:kv_cache_usage_perc",
        "loraSpec": "",
        "cacheInfoSpec": "vllm:cache_config_info",
    }
    (wiring,) = config["data"]["sources"]
    assert wiring["pluginRef"] in plugins and [e["pluginRef"] for e in wiring["extractors"]] == [
        "core-metrics-extractor"
    ]
    (profile,) = config["schedulingProfiles"]
    assert {p["pluginRef"] for p in profile["plugins"]} <= plugins.keys()


def test_the_vendored_crds_say_where_they_come_from() -> None:
    notice = (CRDS / "NOTICE.md").read_text()
    for name in CRD_FILES.values():
        assert name in notice
        crd = yaml.safe_load((CRDS / name).read_text())
        bundle = {k: v for k, v in crd["metadata"]["annotations"].items() if k.endswith("/bundle-version")}
        (version,) = bundle.values()
        assert version in notice, f"{name} is {version}"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (kustomize) is not installed")
def test_the_pages_per_pod_volume_overlay_renders(tmp_path: Path) -> None:
    """compat/kubernetes/README.md's overlay for clusters without ReadWriteMany storage."""
    page = (K8S / "README.md").read_text()
    (overlay,) = re.findall(r"```yaml\n# my-overlay/kustomization.yaml\n(.*?)```", page, re.S)
    overlay = overlay.replace("../compat/kubernetes", os.path.relpath(K8S, tmp_path))  # kustomize: relative
    (tmp_path / "kustomization.yaml").write_text(overlay)
    out = subprocess.run(["kubectl", "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    docs = [doc for doc in yaml.safe_load_all(out.stdout) if doc is not None]
    assert not [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    (volume,) = _server(docs)["spec"]["template"]["spec"]["volumes"]
    assert volume["name"] == "models" and "emptyDir" in volume
    for doc in docs:
        assert _errors(doc) is None, f"{_key(doc)}: {_errors(doc)}"
