"""The cluster's files, checked offline (there is no cluster here): hub/z2jh-values.yaml against the Zero to
JupyterHub chart's own schema, with the chart's defaults as Helm merges them; every manifest in hub/k8s/ against
Kubernetes' schemas (kubernetes-validate, strict: an unknown field fails); and the facts in them that graded work
rests on. Each check is also shown a broken copy, which it must refuse. Fast: reads files, builds nothing.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import tomllib
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from traitlets.config import Config

from addnorm_grading.feedback_service import remote

ROOT = Path(__file__).resolve().parent.parent
K8S = ROOT / "hub" / "k8s"
VALUES = ROOT / "hub" / "z2jh-values.yaml"
CHART = "4.4.0"                               # the z2jh chart whose schema and defaults hub/k8s/ keeps
KUBERNETES = ["1.28.0", "1.37.0"]             # the chart's oldest (its kubeVersion: >=1.28) and the newest bundled
LEARNER = {"app": "jupyterhub", "component": "singleuser-server", "release": "addnorm",     # a learner's pod, as
           "hub.jupyter.org/network-access-hub": "true", "hub.jupyter.org/username": "alice",  # KubeSpawner labels
           "addnorm/role": "student"}                                                          # it, and our hook
INSTRUCTOR = {**LEARNER, "hub.jupyter.org/username": "instructor", "addnorm/role": "instructor"}
HUB = {"app": "jupyterhub", "component": "hub", "release": "addnorm", "hub.jupyter.org/network-access-proxy-api": "true"}


def values() -> dict:
    return yaml.safe_load(VALUES.read_text(encoding="utf-8"))


def coalesce(defaults, given):
    """Helm's merge of a values file over the chart's defaults: maps merge, null removes a key, the rest replaces."""
    if not (isinstance(defaults, dict) and isinstance(given, dict)):
        return copy.deepcopy(given)
    merged = copy.deepcopy(defaults)
    for key, value in given.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = coalesce(merged.get(key), value)
    return merged


def z2jh_errors(given: dict) -> list[str]:
    """What the chart's schema says about these values merged over its defaults (as `helm install` checks them)."""
    schema = json.loads((K8S / f"z2jh-values.schema-{CHART}.json").read_text())
    defaults = json.loads((K8S / f"z2jh-values.defaults-{CHART}.json").read_text())
    found = jsonschema.Draft7Validator(schema).iter_errors(coalesce(defaults, given))
    return sorted(f"{'.'.join(map(str, error.absolute_path))}: {error.message}" for error in found)


def manifests() -> list[dict]:
    return [doc for path in sorted(K8S.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def manifest(kind: str, name: str) -> dict:
    (found,) = [doc for doc in manifests() if doc["kind"] == kind and doc["metadata"]["name"] == name]
    return found


def k8s_errors(doc: dict, version: str) -> list[str]:
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.ValidationError as error:
        return [f"{doc['kind']} {doc['metadata'].get('name')}: {'.'.join(map(str, error.path))}: {error.message}"]
    return []


# ---------------------------------------------------------------------------------------------- the chart's values

def test_the_values_validate_against_the_charts_schema():
    assert z2jh_errors(values()) == []


@pytest.mark.parametrize("path, value, said", [
    (("singleuser", "imag"), {"name": "x"}, "Additional properties are not allowed ('imag'"),     # a misspelt key
    (("singleuser", "uid"), "1000", "'1000' is not of type 'integer', 'null'"),                  # a wrong type
    (("hub", "services"), [{"name": "exchange"}], "is not of type 'object'"),                   # z2jh wants a map
])
def test_a_broken_values_file_is_refused_by_the_schema(path, value, said):
    broken = values()
    broken[path[0]][path[1]] = value
    assert any(said in error for error in z2jh_errors(broken)), z2jh_errors(broken)


def hub_pod(given: dict) -> dict:
    """The values' exchange container and volumes as a Pod (the chart's schema only says they are lists)."""
    hub = given["hub"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hub"},
            "spec": {"containers": hub["extraContainers"], "volumes": hub["extraVolumes"]}}


@pytest.mark.parametrize("version", KUBERNETES)
def test_the_exchange_container_in_the_values_is_a_valid_kubernetes_container(version):
    assert k8s_errors(hub_pod(values()), version) == []
    broken = values()
    broken["hub"]["extraContainers"][0]["volumeMount"] = broken["hub"]["extraContainers"][0].pop("volumeMounts")
    assert k8s_errors(hub_pod(broken), version) != []


def claims(tree) -> list[str]:
    """Every persistentVolumeClaim.claimName in a tree of manifests or values."""
    if isinstance(tree, list):
        return [name for item in tree for name in claims(item)]
    if isinstance(tree, dict):
        own = [tree["persistentVolumeClaim"]["claimName"]] if "persistentVolumeClaim" in tree else []
        return own + [name for value in tree.values() for name in claims(value)]
    return []


def container(given: dict, name: str) -> dict:
    (found,) = [c for c in given["hub"]["extraContainers"] if c["name"] == name]
    return found


def test_graded_work_goes_through_the_http_exchange_whose_store_only_the_hub_pod_mounts():
    given = values()
    exchange = container(given, "exchange")
    env = {item["name"]: item.get("value", item.get("valueFrom")) for item in exchange["env"]}
    assert list(given["hub"]["services"]) == ["exchange"]
    assert env["JUPYTERHUB_SERVICE_PREFIX"] == "/services/exchange/"
    assert given["singleuser"]["extraEnv"]["ADDNORM_EXCHANGE_URL"].endswith(env["JUPYTERHUB_SERVICE_PREFIX"])
    assert env["JUPYTERHUB_API_TOKEN"]["secretKeyRef"]["key"] == "hub.services.exchange.apiToken"
    assert "--url" in exchange["command"] and exchange["command"][exchange["command"].index("--url") + 1].endswith(
        f":{given['hub']['service']['extraPorts'][0]['port']}")
    claim = manifest("PersistentVolumeClaim", "addnorm-exchange-store")
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert claim["metadata"]["name"] in claims(given["hub"]["extraVolumes"])
    hook = given["hub"]["extraConfig"]["addnorm-roles"]
    assert claim["metadata"]["name"] not in claims([given["singleuser"], *manifests()]) + re.findall(
        r'"claimName": "([^"]+)"', hook), "another pod mounts it"
    assert "storage" not in given["singleuser"], "a shared exchange volume for graded work"
    groups = given["hub"]["config"]["JupyterHub"]["load_groups"]
    course = tomllib.loads((ROOT / "course.toml").read_text())
    assert list(groups) == [course["exchange"]["instructors"]]
    for role in ("user", "server"):
        assert "access:services!service=exchange" in given["hub"]["loadRoles"][role]["scopes"]


def test_learners_servers_run_as_jovyan():
    singleuser = values()["singleuser"]
    assert (singleuser["uid"], singleuser["fsGid"]) == (1000, 100)


class FakeSpawner:
    """What the values' pre_spawn_hook reads and sets of a KubeSpawner (7.x: volumes and mounts are dicts)."""

    def __init__(self, name: str, groups: list[str]):
        self.user = type("User", (), {"name": name, "groups": [type("Group", (), {"name": g}) for g in groups]})
        self.environment, self.extra_labels = {}, {"component": "singleuser-server"}
        self.volumes, self.volume_mounts = {"home": {"name": "home"}}, {"home": {"name": "home"}}


def test_the_pre_spawn_hook_labels_roles_and_gives_the_gradebook_password_to_instructors_only():
    c = Config()
    exec(compile(values()["hub"]["extraConfig"]["addnorm-roles"], "hub.extraConfig", "exec"), {"c": c})
    instructor, learner = FakeSpawner("instructor", ["instructors"]), FakeSpawner("alice", [])
    for spawner in (instructor, learner):
        c.KubeSpawner.pre_spawn_hook(spawner)
    assert instructor.extra_labels["addnorm/role"] == "instructor" and learner.extra_labels["addnorm/role"] == "student"
    assert learner.environment["JUPYTER_CONFIG_PATH"] == "/etc/addnorm/student"
    assert instructor.volumes["gradebook-password"]["secret"]["secretName"] == "addnorm-gradebook"
    assert instructor.volumes["course-folder"]["persistentVolumeClaim"]["claimName"] == "addnorm-course"
    assert instructor.volume_mounts["course-folder"]["mountPath"] == "/home/jovyan/addnorm"
    assert set(learner.volumes) == set(learner.volume_mounts) == {"home"}


def test_the_feedback_service_grades_what_the_exchange_stored_on_the_workers_into_the_instructors_folder():
    given = values()
    feedback, exchange = container(given, "feedback"), container(given, "exchange")
    command = feedback["command"]
    flags = dict(word.split("=", 1) for word in command if word.startswith("--") and "=" in word)
    service = manifest("Service", "addnorm-dask-scheduler")
    assert command[:3] == ["python", "-m", "addnorm_grading.feedback_service"]
    assert flags["--FeedbackService.engine"] == "dask" and flags["--FeedbackService.identity"] == "exchange"
    assert flags["--FeedbackService.scheduler"] == \
        f"tls://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}"
    mounts = {m["name"]: m for m in feedback["volumeMounts"]}
    store = exchange["command"][exchange["command"].index("--store") + 1]
    (store_mount,) = [m for m in exchange["volumeMounts"] if m["name"] == "exchange-store"]
    assert mounts["exchange-store"]["mountPath"] == store_mount["mountPath"]
    assert flags["--FeedbackService.exchange"] == store                 # what the exchange writes, it reads
    course = flags["--course"]
    assert mounts["course-folder"]["mountPath"] == course
    assert mounts["grading-tls"]["mountPath"] == f"{course}/feedback-service/tls"        # the service's <state>/tls
    assert mounts["grading-tls"]["readOnly"] and mounts["gradebook-password"]["readOnly"]
    volumes = {v["name"]: v for v in given["hub"]["extraVolumes"]}
    assert volumes["grading-tls"]["secret"]["secretName"] == pod_spec("addnorm-grading-worker")["volumes"][0][
        "secret"]["secretName"]
    assert volumes["gradebook-password"]["secret"]["secretName"] == "addnorm-gradebook"
    claim = manifest("PersistentVolumeClaim", "addnorm-course")
    assert volumes["course-folder"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]          # the hub's pod and the instructor's server
    assert claim["metadata"]["name"] not in claims([given["singleuser"], *manifests()]), "a learner's pod mounts it"


# ---------------------------------------------------------------------------------------------- hub/k8s/

@pytest.mark.parametrize("version", KUBERNETES)
def test_every_manifest_validates_strictly(version):
    docs = manifests()
    assert sorted(doc["kind"] for doc in docs) == ["Deployment", "Deployment", "NetworkPolicy", "NetworkPolicy",
                                                   "PersistentVolumeClaim", "PersistentVolumeClaim", "Service",
                                                   "Service", "StatefulSet"]
    assert [error for doc in docs for error in k8s_errors(doc, version)] == []


@pytest.mark.parametrize("version", KUBERNETES)
def test_a_manifest_with_an_unknown_field_or_a_wrong_type_is_refused(version):
    unknown = manifest("Deployment", "addnorm-grading-worker")
    unknown["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    wrong_type = manifest("StatefulSet", "addnorm-gradebook")
    wrong_type["spec"]["replicas"] = "one"
    assert "imagePullPolicyy" in " ".join(k8s_errors(unknown, version))
    assert "'one' is not of type 'integer'" in " ".join(k8s_errors(wrong_type, version))


def pod_spec(name: str, kind: str = "Deployment") -> dict:
    return manifest(kind, name)["spec"]["template"]["spec"]


def test_the_scheduler_and_the_workers_speak_tls_with_the_course_certificate(tmp_path):
    files = {Path(path).name for path in remote.certificates(tmp_path).values()}      # what the service makes
    service = manifest("Service", "addnorm-dask-scheduler")
    address = f"tls://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}"
    for name, program in (("addnorm-dask-scheduler", "scheduler"), ("addnorm-grading-worker", "worker")):
        spec = pod_spec(name)
        (container,) = spec["containers"]
        command = container["command"]
        assert command[:2] == ["dask", program]
        if program == "worker":
            assert command[2] == address
        else:
            assert command[command.index("--protocol") + 1] == "tls"
        mount = container["volumeMounts"][0]["mountPath"]
        named = {Path(command[command.index(flag) + 1]) for flag in ("--tls-ca-file", "--tls-cert", "--tls-key")}
        assert {p.name for p in named} == files and {str(p.parent) for p in named} == {mount}
        assert spec["volumes"][0]["secret"]["secretName"] == "addnorm-grading-tls"
        assert spec["securityContext"]["runAsUser"] == 1000
        # Dask's HTTP pages (workers, logs, exceptions) need no login: none served, the port on loopback
        assert {e["name"]: e["value"] for e in container.get("env", [])}.items() >= remote.NO_PAGES.items(), name
        assert command[command.index("--dashboard-address") + 1].startswith("127.0.0.1:"), name


def reaches(policy: dict, labels: dict) -> bool:
    """Whether a pod with these labels, in the policy's namespace, may connect to the pods the policy selects."""
    for rule in policy["spec"].get("ingress", []):
        if "from" not in rule:
            return True                                     # a rule with no `from` admits everyone
        for peer in rule["from"]:
            if "ipBlock" in peer or "namespaceSelector" in peer:
                return True                                 # a learner's pod has an address and a namespace too
            selector = peer["podSelector"]
            if set(selector) - {"matchLabels"}:
                return True                                 # matchExpressions: not read here, so not trusted
            if selector.get("matchLabels", {}).items() <= labels.items():
                return True
    return False


def test_no_learners_server_reaches_the_scheduler_the_workers_or_the_gradebook():
    policy = manifest("NetworkPolicy", "addnorm-grading")
    assert "Ingress" in policy["spec"]["policyTypes"]
    selected = policy["spec"]["podSelector"]["matchLabels"].items()
    for kind, name in (("Deployment", "addnorm-dask-scheduler"), ("Deployment", "addnorm-grading-worker"),
                       ("StatefulSet", "addnorm-gradebook")):
        assert selected <= manifest(kind, name)["spec"]["template"]["metadata"]["labels"].items(), name
    assert not reaches(policy, LEARNER)
    assert reaches(policy, INSTRUCTOR)
    assert reaches(policy, HUB)                                     # the feedback service, in the hub's pod
    assert reaches(policy, manifest("Deployment", "addnorm-grading-worker")["spec"]["template"]["metadata"]["labels"])
    open_to_all = copy.deepcopy(policy)
    open_to_all["spec"]["ingress"][0]["from"].append({"podSelector": {"matchLabels": {"component": "singleuser-server"}}})
    assert reaches(open_to_all, LEARNER)


def test_the_gradebook_password_comes_from_a_secret():
    (postgres,) = pod_spec("addnorm-gradebook", "StatefulSet")["containers"]
    env = {item["name"]: item for item in postgres["env"]}
    assert env["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "addnorm-gradebook", "key": "password"}
    assert "value" not in env["POSTGRES_PASSWORD"]


# ---------------------------------------------------------------------------------------------- the Dockerfile

def instructions(text: str) -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (INSTRUCTION, arguments), continuation lines joined, comments left out."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip()) for line in joined.splitlines()
            if line.strip()]


def dockerfile_problems(text: str) -> list[str]:
    """What would make the image pull another torch or run as root."""
    steps = instructions(text)
    problems = []
    if re.search(r"torch\s*(==|>=|<=|~=|!=)\s*\d", text):
        problems.append("the Dockerfile names a torch version of its own")
    runs = " ".join(arguments for instruction, arguments in steps if instruction == "RUN")
    if "pyproject.toml" not in runs or "/whl/cpu" not in text:
        problems.append("torch is not installed from pyproject.toml's pin and PyTorch's CPU wheels")
    users = [arguments for instruction, arguments in steps if instruction == "USER"]
    if not users or users[-1] in {"root", "0"}:
        problems.append("the image ends as root")
    return problems


def test_the_dockerfile_installs_pyprojects_torch_from_cpu_wheels_and_ends_as_jovyan():
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    pin = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert "torch==2.13.0" in pin
    assert dockerfile_problems(dockerfile) == []
    assert [a for i, a in instructions(dockerfile) if i == "USER"][-1] == "1000"
    assert dockerfile_problems(dockerfile + "\nRUN pip install torch==2.5.1\n")[0].startswith("the Dockerfile names")
    assert dockerfile_problems(dockerfile + "\nUSER root\n") == ["the image ends as root"]


def test_the_build_context_holds_what_the_dockerfile_copies_and_no_solution_or_check():
    ignore = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    assert ignore[0] == "*", "the context is what .dockerignore lets in, and nothing else"
    let_in = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    copied = {source.rstrip("/") for instruction, arguments in instructions((ROOT / "Dockerfile").read_text())
              if instruction == "COPY" for source in [w for w in shlex.split(arguments) if not w.startswith("--")][:-1]}
    assert copied <= let_in, copied - let_in
    assert not {"solutions", "checks", "exercises", "."} & let_in
