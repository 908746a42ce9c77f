"""The documentation stands on its own and keeps up with the code: every link in the README and
``docs/`` resolves (files and headings), every setting the configuration models accept is
described in ``docs/configuration.md``, and nothing in the repository narrates how it was built."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from pydantic import AliasChoices, BaseModel

from datastore.settings import PoolSettings
from fixgw.cli import EMBEDDED_SETTINGS
from fixgw.config import GatewaySettings, MatchingLink, OperatorConfig, ScheduleSettings, SessionConfig, TlsSettings
from matching.config import CellSettings
from sessionstore.settings import SessionStoreSettings
from tests.gateway_helpers import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", markdown, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_in_the_documentation_resolves(doc: Path) -> None:
    broken = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        resolved = (doc.parent / path).resolve() if path else doc
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text()):
            broken.append(f"{target}: no heading #{anchor} in {resolved.name}")
    assert not broken, f"{doc.name}: " + "; ".join(broken)


def names_of(model: type[BaseModel]) -> dict[str, set[str]]:
    """Each field of the model with every name a user may write it under."""
    out = {}
    for name, info in model.model_fields.items():
        names = {name} | ({info.alias} if info.alias else set())
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            names |= {c for c in alias.choices if isinstance(c, str)}
        elif isinstance(alias, str):
            names.add(alias)
        out[name] = names
    return out


def test_every_setting_is_described_in_the_configuration_reference() -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text()
    tables = {"pool": "[session_store.pool]", "partition": "[[matching.partition]]", "tls": "[gateway.tls]",
              "session": "[[gateway.session]]", "operator": "[[gateway.operator]]", "schedule": "[gateway.schedule]"}
    missing = []
    for model in (PoolSettings, SessionStoreSettings, SessionConfig, MatchingLink, TlsSettings, GatewaySettings,
                  CellSettings, OperatorConfig, ScheduleSettings):
        for field, names in names_of(model).items():
            if field in tables and tables[field] in doc:
                continue
            if not any(f"`{n}`" in doc or f"`{n} " in doc or f"`{n}=" in doc for n in names):
                missing.append(f"{model.__name__}.{field} ({' / '.join(sorted(names))})")
    missing += [f"[embedded] {key}" for key in sorted(EMBEDDED_SETTINGS) if f"`{key}`" not in doc]
    assert not missing, "not in docs/configuration.md: " + ", ".join(missing)


def test_nothing_in_the_repository_narrates_how_it_was_developed() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    pattern = re.compile(r"session [0-9]+('s)? (code|figures|column|runs?|machine)|in session [0-9]|"
                         r"(start|end) of (the|this) session|\bsession [0-9]+:", re.I)
    found = []
    for name in tracked:
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".toml", ".txt", ""} or "conformance" in path.parts or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if pattern.search(line):
                found.append(f"{name}:{number}: {line.strip()[:100]}")
    assert not found, "\n".join(found)


def test_the_repository_needs_nothing_beside_it() -> None:
    """A clone in an empty directory has everything: no tracked file reaches outside the repository
    (QuickFIX's acceptance definitions and the full dictionaries are vendored, with their licence)."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    outside = re.compile(r"\.\./shared|ROOT\.parent\b|parents\[[2-9]\]")
    found = [name for name in tracked if (ROOT / name).is_file() and (ROOT / name).suffix in {".py", ".md", ".toml", ""}
             and name != "tests/test_docs.py" and outside.search((ROOT / name).read_text(errors="replace"))]
    assert not found, found
    assert (ROOT / "tests" / "conformance" / "quickfix-at" / "LICENSE-quickfix.txt").is_file()
    assert (ROOT / "config" / "dictionaries" / "full" / "LICENSE-quickfix.txt").is_file()
