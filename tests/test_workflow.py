"""The GitHub workflow: `make test`, then the site it built deployed to GitHub Pages;
valid against the GitHub-workflow schema that check-jsonschema ships (no network)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def test_there_is_a_workflow():
    assert WORKFLOWS


def test_workflow_tests_then_deploys_the_built_site():
    wf = yaml.safe_load(WORKFLOWS[0].read_text())
    jobs = wf["jobs"]
    runs = [s.get("run", "") for s in jobs["test"]["steps"]]
    assert any(r.startswith("make test") for r in runs)
    upload = [
        s for s in jobs["test"]["steps"] if "upload-pages-artifact" in s.get("uses", "")
    ]
    assert upload and upload[0]["with"]["path"] == "_build/html"
    deploy = jobs["deploy"]
    assert deploy["needs"] == "test"
    assert any("deploy-pages" in s.get("uses", "") for s in deploy["steps"])
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}


def test_workflow_is_valid_offline(tmp_path):
    exe = Path(sys.executable).parent / "check-jsonschema"
    cmd = [str(exe), "--builtin-schema", "vendor.github-workflows"]
    ok = subprocess.run([*cmd, *map(str, WORKFLOWS)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = tmp_path / "bad.yml"  # the check can fail: a job without runs-on
    bad.write_text(WORKFLOWS[0].read_text().replace("runs-on:", "runs_on:"))
    assert subprocess.run([*cmd, str(bad)], capture_output=True).returncode != 0


def test_workflow_runs_the_portability_and_python_floor_jobs():
    """make portability (other kernels, another torch) and the package's floor each run
    as a job of their own beside make test (CONTRIBUTING.md, "Results that travel")."""
    wf = yaml.safe_load(WORKFLOWS[0].read_text())
    jobs = wf["jobs"]

    def runs(job):
        return [s.get("run", "") for s in jobs[job]["steps"]]

    assert any(r.startswith("make portability") for r in runs("portability"))
    assert any(r.startswith("make student-check") for r in runs("editions"))
    assert any(r.startswith("make colab-check") for r in runs("editions"))
    floor = jobs["python-floor"]
    (setup,) = [s for s in floor["steps"] if "setup-python" in s.get("uses", "")]
    assert setup["with"]["python-version"] == "3.10"
    assert any(r.startswith("make py310") for r in runs("python-floor"))
    text = (ROOT / "pyproject.toml").read_text()
    assert 'requires-python = ">=3.10"' in text
    assert 'python_version = "3.10"' in text
