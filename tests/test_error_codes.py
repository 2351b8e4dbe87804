"""Every DexrlError carries a stable code: a literal at the raise site, documented, on the error
line, and in the ``--json`` error document."""

from __future__ import annotations

import ast
import json
import pickle
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import dexrl
from dexrl.cli import app
from dexrl.errors import DexrlError

PACKAGE = Path(dexrl.__file__).parent
DOCS = PACKAGE.parent / "docs" / "errors.md"
CODE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)+$")  # kebab-case, two words at least
DOC_ROW = re.compile(r"^\| `([^`]+)` \|")


def raise_site_codes(source: str, name: str = "<string>") -> tuple[list[str], list[str]]:
    """(codes, problems) of the ``DexrlError(...)`` calls in ``source``: a problem is a call
    without a ``code=`` keyword, with one that is not a string literal, or of the wrong shape."""
    codes, problems = [], []
    for node in ast.walk(ast.parse(source, filename=name)):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "DexrlError"
                or isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "DexrlError"):
            continue
        kw = next((k for k in node.keywords if k.arg == "code"), None)
        if kw is None:
            problems.append(f"{name}:{node.lineno}: DexrlError(...) without code=")
        elif not (isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str)):
            problems.append(f"{name}:{node.lineno}: code= is not a string literal")
        elif not CODE.match(kw.value.value):
            problems.append(f"{name}:{node.lineno}: code {kw.value.value!r} is not kebab-case")
        else:
            codes.append(kw.value.value)
    return codes, problems


def source_codes() -> tuple[set[str], list[str], int]:
    codes: set[str] = set()
    problems: list[str] = []
    calls = 0
    for path in sorted(PACKAGE.rglob("*.py")):
        found, bad = raise_site_codes(path.read_text(), str(path.relative_to(PACKAGE.parent)))
        codes.update(found)
        problems += bad
        calls += len(found) + len(bad)
    return codes, problems, calls


def documented_codes() -> list[str]:
    return [m.group(1) for line in DOCS.read_text().splitlines() if (m := DOC_ROW.match(line))]


def test_every_raise_site_has_a_literal_code() -> None:
    codes, problems, calls = source_codes()
    assert problems == []
    assert calls > 150 and len(codes) > 100  # the walk found the raise sites


def test_the_check_catches_a_call_without_a_code() -> None:
    """Control: the walk above would notice a new raise site without a code (or a bad one)."""
    source = (
        "from dexrl.errors import DexrlError\n"
        "def f():\n"
        "    raise DexrlError('the run folder is not empty', 'choose another',"
        " code='run-folder-not-empty')\n"
        "def g():\n"
        "    raise DexrlError('no code here', 'a hint', where='x')\n"
        "def h(code):\n"
        "    raise errors.DexrlError('computed', code=code)\n"
        "def i():\n"
        "    raise DexrlError('bad shape', code='Run_Folder')\n"
    )
    codes, problems = raise_site_codes(source)
    assert codes == ["run-folder-not-empty"]
    assert [p.split(": ", 1)[1] for p in problems] == [
        "DexrlError(...) without code=", "code= is not a string literal",
        "code 'Run_Folder' is not kebab-case"]


def test_the_documented_codes_are_the_raised_codes() -> None:
    documented = documented_codes()
    assert len(documented) == len(set(documented)), "a code documented twice"
    codes, _, _ = source_codes()
    assert sorted(set(documented) - codes) == [], "documented but never raised"
    assert sorted(codes - set(documented)) == [], "raised but not in docs/errors.md"


def test_render_puts_the_code_on_the_error_line() -> None:
    exc = DexrlError("the run directory already holds another run", "choose another --run-dir",
                     code="run-folder-not-empty", where="runs/x", details=["one", "two"])
    assert exc.render().splitlines() == [
        "error: runs/x: the run directory already holds another run [run-folder-not-empty]",
        "  one", "  two", "hint: choose another --run-dir"]
    assert DexrlError("no where", code="a-b").render() == "error: no where [a-b]"


def test_the_code_is_required() -> None:
    with pytest.raises(TypeError, match="code"):
        DexrlError("what", "fix")  # type: ignore[call-arg]


def test_an_error_survives_pickling_with_its_code() -> None:
    """Ray and multiprocessing pickle exceptions; the keyword-only code must come through."""
    exc = DexrlError("m", "h", code="ray-node-lost", where="w", details=["d"])
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is DexrlError and str(back) == "m"
    assert back.document() == exc.document() and back.render() == exc.render()


def test_json_error_document_through_the_cli() -> None:
    """A verb given --json that fails answers with a dexrl.error/1 document on stdout as well as
    the error lines on stderr (no network: the repo id is refused before the hub is asked)."""
    result = CliRunner().invoke(app, ["download", "not a repo id", "--json"])
    assert result.exit_code == 2, result.output
    doc = json.loads(result.stdout)
    assert doc["schema"] == "dexrl.error/1"
    assert doc["code"] == "hub-repo-id-invalid" and doc["where"] == "REPO_ID"
    assert doc["message"] == "'not a repo id' is not a Hugging Face repo id"
    assert doc["hint"].startswith("give it as owner/name") and doc["details"] == []
    assert result.stderr.splitlines()[0] == (
        "error: REPO_ID: 'not a repo id' is not a Hugging Face repo id [hub-repo-id-invalid]")

    plain = CliRunner().invoke(app, ["download", "not a repo id"])
    assert plain.exit_code == 2 and plain.stdout == "" and plain.stderr == result.stderr


def test_json_error_document_of_a_flag_conflict() -> None:
    result = CliRunner().invoke(app, ["doctor", "--json", "--markdown"])
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    assert (doc["schema"], doc["code"], doc["where"]) == (
        "dexrl.error/1", "flags-json-markdown", None)
    assert "[flags-json-markdown]" in result.stderr
