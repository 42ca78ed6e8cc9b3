"""docs/kubernetes/: the manifests parse (pyyaml), hold the kinds the docs promise, and the
arguments they give the binary are ones it takes. The Indexed Job's pods, run here one per
completion index over a local job file, take every table exactly once."""

from __future__ import annotations

import subprocess

import tomllib
import yaml
from wheel_site import ROOT

DOCS = ROOT / "docs" / "kubernetes"


def documents(name: str) -> dict:
    docs = [d for d in yaml.safe_load_all((DOCS / name).read_text()) if d]
    return {d["kind"]: d for d in docs}


def container(pod_spec: dict) -> dict:
    [c] = pod_spec["containers"]
    return c


def pods_take_each_table_once(binary: str, job_spec: dict, tmp_path) -> None:
    """Run every index's args over a local job file of 50 (missing) tables."""
    assert job_spec["completionMode"] == "Indexed"
    n = job_spec["completions"]
    args = container(job_spec["template"]["spec"])["args"]
    assert f"$(JOB_COMPLETION_INDEX)/{n}" in args and "--once" in args
    locations = [f"{tmp_path}/t{i:02}" for i in range(50)]
    config = tmp_path / "tables.toml"
    config.write_text("".join(f'[[tables]]\nlocation = "{t}"\n' for t in locations))
    taken = []
    for i in range(n):
        pod = [str(config) if a == "/etc/xlake/tables.toml" else a for a in args]
        pod = [a.replace("$(JOB_COMPLETION_INDEX)", str(i)) for a in pod]
        run = subprocess.run([binary, *pod], capture_output=True, text=True)
        assert run.returncode in (0, 1), run.stderr
        taken += [
            line.split(" ", 1)[1].split(": ", 1)[0]
            for line in run.stdout.splitlines()
            if line.startswith("FAILED ")
        ]
    assert sorted(taken) == locations


def test_the_job_file_parses():
    config = documents("tables.yaml")["ConfigMap"]
    tables = tomllib.loads(config["data"]["tables.toml"])
    assert tables["tables"] and all("location" in t for t in tables["tables"])


def test_indexed_job_shards_the_fleet(xlake, tmp_path):
    job = documents("indexed-job.yaml")["Job"]
    assert job["spec"]["parallelism"] == job["spec"]["completions"]
    pods_take_each_table_once(xlake.find_xlake_bin(), job["spec"], tmp_path)


def test_cronjob_runs_the_indexed_job_on_a_schedule(xlake, tmp_path):
    cron = documents("cronjob.yaml")["CronJob"]
    assert cron["spec"]["schedule"] and cron["spec"]["concurrencyPolicy"] == "Forbid"
    pods_take_each_table_once(xlake.find_xlake_bin(), cron["spec"]["jobTemplate"]["spec"], tmp_path)


def test_deployment_and_service_for_serve(xlake):
    docs = documents("serve.yaml")
    deployment, service = docs["Deployment"], docs["Service"]
    pod = deployment["spec"]["template"]
    assert pod["metadata"]["labels"] == service["spec"]["selector"]
    c = container(pod["spec"])
    assert "serve" in c["args"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert all(p["targetPort"] in ports for p in service["spec"]["ports"])
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["port"] in ports
    # Every option name is one `serve` takes (clap refuses an unknown one before --help).
    run = subprocess.run(
        [xlake.find_xlake_bin(), *c["args"], "--help"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
