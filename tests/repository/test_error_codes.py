"""Every DexrlError carries a stable code: a literal at the raise site, documented, on the error
line, and in the ``--json`` error document. Every Finding carries one too: a literal where dexrl
makes it (or its DexrlError's), documented, never printed."""

from __future__ import annotations

import ast
import json
import pickle
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

import dexrl
from dexrl.cli import app
from dexrl.errors import DexrlError, Finding, findings_from

PACKAGE = Path(dexrl.__file__).parent
DOCS = PACKAGE.parent / "docs" / "errors.md"
CODE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)+$")  # kebab-case, two words at least
DOC_ROW = re.compile(r"^\| `([^`]+)` \|")
FINDINGS_HEADING = "## Finding codes"


def raise_site_codes(source: str, name: str = "<string>") -> tuple[list[str], list[str]]:
    """(codes, problems) of the ``DexrlError(...)`` calls in ``source``: a problem is a call
    without a ``code=`` keyword, with one that is not a string literal, or of the wrong shape."""
    codes: list[str] = []
    problems: list[str] = []
    for node in ast.walk(ast.parse(source, filename=name)):
        if _called(node) == "DexrlError":
            _literal_code(_code_keyword(node), f"{name}:{node.lineno}", "DexrlError(...)",
                          codes, problems, name_the_call=False)
    return codes, problems


def _literal_code(kw: ast.keyword | None, place: str, call: str, codes: list[str],
                  problems: list[str], *, name_the_call: bool = True) -> None:
    """Add the literal kebab-case code of ``kw`` (of ``call`` at ``place``) to ``codes``, or what
    is wrong to ``problems`` (naming the call only where it is missing, unless
    ``name_the_call``)."""
    where = f"{place}: {call}" if name_the_call else place
    if kw is None:
        problems.append(f"{place}: {call} without code=")
    elif not (isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str)):
        problems.append(f"{where}: code= is not a string literal")
    elif not CODE.match(kw.value.value):
        problems.append(f"{where}: code {kw.value.value!r} is not kebab-case")
    else:
        codes.append(kw.value.value)


def _package_codes(
    sites: Callable[[str, str], tuple[list[str], list[str]]],
) -> tuple[set[str], list[str], int]:
    """(codes, problems, calls) of ``sites`` over every module of the package."""
    codes: set[str] = set()
    problems: list[str] = []
    calls = 0
    for path in sorted(PACKAGE.rglob("*.py")):
        found, bad = sites(path.read_text(), str(path.relative_to(PACKAGE.parent)))
        codes.update(found)
        problems += bad
        calls += len(found) + len(bad)
    return codes, problems, calls


def source_codes() -> tuple[set[str], list[str], int]:
    return _package_codes(raise_site_codes)


def documented_codes(part: str = "errors") -> list[str]:
    """The codes of the error table (``part="errors"``) or of the "Finding codes" section."""
    text = DOCS.read_text()
    assert FINDINGS_HEADING in text
    errors_part, _, findings_part = text.partition(FINDINGS_HEADING)
    lines = (findings_part if part == "findings" else errors_part).splitlines()
    return [m.group(1) for line in lines if (m := DOC_ROW.match(line))]


def _called(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    return getattr(node.func, "id", None) or getattr(node.func, "attr", None)


def _code_keyword(node: ast.Call) -> ast.keyword | None:
    return next((k for k in node.keywords if k.arg == "code"), None)


def finding_site_codes(source: str, name: str = "<string>") -> tuple[list[str], list[str]]:
    """(codes, problems) of the calls that make a Finding in ``source``: ``Finding(...)`` itself
    and the helpers that pass their own ``code`` parameter on to it (their calls are checked in
    its place). A Finding may also take the code of the DexrlError it is made from
    (``code=exc.code``). A problem is a call without a ``code=`` keyword, with one that is not a
    string literal, or of the wrong shape."""
    tree = ast.parse(source, filename=name)
    helpers: set[str] = set()
    passed_on: set[int] = set()  # the Finding calls inside a helper, given the helper's code
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        args = func.args
        params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
        for node in ast.walk(func):
            kw = _code_keyword(node) if _called(node) == "Finding" else None
            if kw and isinstance(kw.value, ast.Name) and kw.value.id in params:
                helpers.add(func.name)
                passed_on.add(id(node))
    codes: list[str] = []
    problems: list[str] = []
    for node in ast.walk(tree):
        called = _called(node)
        if called != "Finding" and called not in helpers or id(node) in passed_on:
            continue
        kw = _code_keyword(node)
        if kw is not None and isinstance(kw.value, ast.Attribute) and kw.value.attr == "code":
            continue  # the code of the DexrlError the finding is made from
        _literal_code(kw, f"{name}:{node.lineno}", f"{called}(...)", codes, problems)
    return codes, problems


def finding_codes() -> tuple[set[str], list[str], int]:
    return _package_codes(finding_site_codes)


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


def test_every_finding_site_has_a_literal_code() -> None:
    codes, problems, calls = finding_codes()
    assert problems == []
    assert calls > 50 and len(codes) > 40  # the walk found the sites


def test_the_check_catches_a_finding_without_a_code() -> None:
    """Control: the walk would notice a new finding without a code (or a bad one), also through
    a helper that passes a code on, and accepts the code of the DexrlError it is made from."""
    source = (
        "from dexrl.errors import Finding\n"
        "def f():\n"
        "    return Finding('error', 'k', 'm', 'h', code='placement-gpu-count')\n"
        "def g():\n"
        "    return Finding('warning', 'k', 'no code here', 'h')\n"
        "def h(code):\n"
        "    return errors.Finding('error', 'k', 'computed', 'h', code=code.upper())\n"
        "def i():\n"
        "    return Finding('error', 'k', 'bad shape', 'h', code='Placement_GPU')\n"
        "def j(exc):\n"
        "    return Finding('error', 'k', exc.message, 'h', code=exc.code)\n"
        "def k(where):\n"
        "    def error(key, message, *, code):\n"
        "        return Finding('error', f'{where}.{key}', message, 'h', code=code)\n"
        "    return [error('a', 'm', code='reach-too-few-targets'), error('b', 'm')]\n"
    )
    codes, problems = finding_site_codes(source)
    assert sorted(codes) == ["placement-gpu-count", "reach-too-few-targets"]
    assert [p.split(": ", 1)[1] for p in problems] == [
        "Finding(...) without code=", "Finding(...): code= is not a string literal",
        "Finding(...): code 'Placement_GPU' is not kebab-case", "error(...) without code="]


def test_the_documented_finding_codes_are_the_codes_in_use() -> None:
    documented = documented_codes("findings")
    assert len(documented) == len(set(documented)), "a finding code documented twice"
    codes, _, _ = finding_codes()
    assert sorted(set(documented) - codes) == [], "documented but never found"
    assert sorted(codes - set(documented)) == [], "found but not under Finding codes"


def test_a_finding_code_is_a_keyword_that_is_never_printed() -> None:
    finding = Finding("error", "cluster.component_placement.actor", "device ids [8] exceed",
                      "use ids below that", code="placement-gpu-count")
    assert finding.render() == (
        "cluster.component_placement.actor: device ids [8] exceed (fix: use ids below that)")
    assert Finding("error", "w", "m", "h").code == ""  # a plugin's finding may give none
    with pytest.raises(TypeError):
        Finding("error", "w", "m", "h", "placement-gpu-count")  # type: ignore[misc]
    exc = DexrlError("missing config.json", "copy it", code="model-file-missing", where="c/x",
                     details=["one", "two"])
    assert {(f.code, f.where) for f in findings_from(exc, "c")} == {("model-file-missing", "c/x")}


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
