"""The GitHub Actions workflows: valid against the workflow schema, and doing their jobs."""

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def load(name):
    data = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())
    return data, data.get("on", data.get(True))  # YAML 1.1 reads the key `on` as True


def test_workflows_validate_against_the_schema():
    assert len(WORKFLOWS) >= 2
    exe = Path(sys.executable).with_name("check-jsonschema")
    run = subprocess.run(
        [str(exe), "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_pull_requests_run_the_readme_test_command_and_main_publishes_pages():
    wf, on = load("book.yml")
    assert "pull_request" in on and on["push"]["branches"] == ["main"]
    test_steps = " ".join(str(s.get("run", "")) for s in wf["jobs"]["test"]["steps"])
    assert "make test" in test_steps and "make test" in (ROOT / "README.md").read_text()
    publish = wf["jobs"]["publish"]
    uses = [s.get("uses", "") for s in publish["steps"]]
    assert any(u.startswith("actions/upload-pages-artifact") for u in uses)
    assert any(u.startswith("actions/deploy-pages") for u in uses)
    assert publish["permissions"]["pages"] == "write"
    assert any("make html" in str(s.get("run", "")) for s in publish["steps"])


def test_full_profile_runs_by_hand_on_a_gpu_runner_and_uploads_the_edition():
    wf, on = load("full-profile.yml")
    assert "workflow_dispatch" in on
    job = wf["jobs"]["execute"]
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    script = " ".join(str(s.get("run", "")) for s in job["steps"])
    assert "--profile full" in script and "--device cuda" in script
    upload = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload")]
    assert len(upload) == 1
    # it uploads where scripts/book.py writes that edition, not the committed book/
    sys.path.insert(0, str(ROOT / "scripts"))
    import book

    folder = book.edition_folder("full", "cuda").relative_to(ROOT).as_posix()
    assert f"{folder}/*.ipynb" in upload[0]["with"]["path"]


def test_a_version_tag_releases_the_course_archive():
    wf, on = load("release.yml")
    assert on["push"]["tags"] == ["v*"]
    steps = wf["jobs"]["release"]["steps"]
    script = " ".join(str(s.get("run", "")) for s in steps)
    assert "make release" in script and "gh release create" in script
    assert "dist/*.tar.gz" in script
    assert wf["permissions"]["contents"] == "write"
