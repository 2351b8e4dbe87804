"""The house's structural rules, read from the source with ``ast`` (nothing is imported).

- Settings are read through the typed :mod:`dexrl.config.settings`: no dotted config key is
  spelled as a string, and no ``OmegaConf.select`` is called, outside ``dexrl/config/``.
- dexrl's own modules are imported at the top of a module; an import inside a function is kept
  only where it defers a heavy package (torch, RLinf, Ray, ..., and omegaconf, rich and the rest
  that `dexrl VERB --help` must not load) the importer does not load yet.
- ``tests/`` mirrors the package: ``tests/<package>/test_<module>.py`` tests
  ``dexrl/<package>/<module>.py``; what spans the package lives in ``tests/scenarios/``, the
  repository's own rules in ``tests/repository/``, bench scripts' tests in ``tests/bench/``.

Each rule has a control that shows it can fail. Reasons: docs/architecture.md.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from helpers.source_imports import imported_names, module_name

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "dexrl"
TESTS = REPO / "tests"

# The roots of the composed config's sections (conf/ and RLinf's).
_KEY = re.compile(r"(env|actor|rollout|algorithm|runner|cluster|critic|reward|data)"
                  r"\.[A-Za-z_*][A-Za-z0-9_.*]*")
_KEY_PREFIX = re.compile(r"(env|actor|rollout|algorithm|runner|cluster|critic|reward|data)"
                         r"\.([A-Za-z0-9_]+\.)*$")
# What a module may defer: the ML stack, and what `dexrl VERB --help` must not load
# (omegaconf/hydra, rich, pydantic: tests/test_cli.py).
HEAVY = frozenset({"torch", "rlinf", "ray", "transformers", "libero", "robosuite", "mujoco",
                   "scipy", "huggingface_hub", "matplotlib", "tensorboard", "wandb", "PIL",
                   "imageio", "cv2", "gymnasium", "safetensors", "tokenizers", "numpy",
                   "omegaconf", "hydra", "rich", "pydantic"})
# Folders of tests/ that do not mirror a module of dexrl/.
NOT_MIRRORED = ("scenarios", "repository", "helpers", "fixtures")


# What a user reads (an error's message, location and fix) may name keys; code may not read by them.
MESSAGES = frozenset({"DexrlError", "Finding"})


def _messages(tree: ast.Module) -> set[int]:
    """ids of the nodes inside the arguments of an error or finding."""
    inside: set[int] = set()
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) in MESSAGES:
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                inside.update(id(node) for node in ast.walk(arg))
    return inside


def dotted_keys(source: str) -> list[str]:
    """``line: text`` of each string that spells a config key (or an f-string starting one),
    outside the messages of errors and findings."""
    found = []
    tree = ast.parse(source)
    skip = _messages(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _KEY.fullmatch(node.value):
                found.append(f"{node.lineno}: {node.value}")
        elif isinstance(node, ast.JoinedStr) and node.values:
            head = node.values[0]
            if (isinstance(head, ast.Constant) and isinstance(head.value, str)
                    and _KEY_PREFIX.fullmatch(head.value)):
                found.append(f"{node.lineno}: f'{head.value}...'")
                for value in node.values:  # its constant parts are not keys on their own
                    if isinstance(value, ast.Constant):
                        value.value = None
    return found


def selects(source: str) -> list[int]:
    """Lines calling ``OmegaConf.select``."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and node.attr == "select"
            and isinstance(node.value, ast.Name) and node.value.id == "OmegaConf"]


def _outside_config() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py"))
            if p.relative_to(PACKAGE).parts[0] != "config"]


def test_no_config_key_is_spelled_outside_the_config_package() -> None:
    found = [f"{p.relative_to(REPO)}:{hit}" for p in _outside_config()
             for hit in dotted_keys(p.read_text())]
    assert found == []


def test_no_select_outside_the_config_package() -> None:
    found = [f"{p.relative_to(REPO)}:{line}" for p in _outside_config()
             for line in selects(p.read_text())]
    assert found == []


def test_the_key_rules_catch_a_key_and_leave_prose() -> None:
    """A control: keys, f-string keys and ``OmegaConf.select`` are found; prose is not."""
    probe = ('a = "env.train.total_num_envs"\nb = f"env.{split}.rollout_epoch"\n'
             'c = "set runner.save_interval to 5"\nd = "model.safetensors"\n'
             'e = OmegaConf.select(cfg, k)\n'
             'raise DexrlError("bad", where="actor.model.num_steps")\n')
    assert dotted_keys(probe) == ["1: env.train.total_num_envs", "2: f'env....'"]
    assert selects(probe) == [5]


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _type_checking(stmt: ast.stmt) -> bool:
    """``if TYPE_CHECKING:`` (its imports never run)."""
    return isinstance(stmt, ast.If) and "TYPE_CHECKING" in ast.unparse(stmt.test)


def _top_imports(tree: ast.Module) -> set[str]:
    """Names imported at module level (inside ``if``/``try`` at the top too, but not under
    ``if TYPE_CHECKING:``)."""
    return imported_names(node for stmt in tree.body if not _type_checking(stmt)
                          for node in (ast.walk(stmt) if isinstance(stmt, (ast.If, ast.Try))
                                       else [stmt]))


def _inner_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """``(line, name)`` of every import inside a function; ``from a import b`` gives ``a.b``
    (``b`` may be a submodule, which is what then gets imported)."""
    found = []
    for func in ast.walk(tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(func):
                if isinstance(node, ast.Import):
                    found.extend((node.lineno, alias.name) for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.extend((node.lineno, f"{node.module}.{alias.name}")
                                 for alias in node.names)
    return sorted(set(found))


class _Closure:
    """The heavy packages each dexrl module loads when imported (its top-level imports,
    followed through dexrl's own modules and their parent packages)."""

    def __init__(self, trees: dict[str, ast.Module]) -> None:
        self.top = {name: _top_imports(tree) for name, tree in trees.items()}
        self.memo: dict[str, frozenset[str]] = {}

    def known(self, name: str) -> str | None:
        while name and name not in self.top:
            name = name.rpartition(".")[0]
        return name or None

    def heavy(self, module: str, seen: frozenset[str] = frozenset()) -> frozenset[str]:
        if module in self.memo:
            return self.memo[module]
        out: set[str] = set()
        parts = module.split(".")
        parents = [".".join(parts[:i]) for i in range(1, len(parts))]
        for name in [*self.top[module], *parents]:
            root = name.split(".")[0]
            if root in HEAVY:
                out.add(root)
            elif root == "dexrl" and (target := self.known(name)) and target != module \
                    and target not in seen:
                out |= self.heavy(target, seen | {module})
        self.memo[module] = frozenset(out)
        return self.memo[module]


def needless_inner_imports(trees: dict[str, ast.Module]) -> list[str]:
    """``module:line -> target`` for each function-level import of a dexrl module that defers
    no heavy package the importer does not already load."""
    closure = _Closure(trees)
    found = []
    for module, tree in sorted(trees.items()):
        for line, name in _inner_imports(tree):
            target = closure.known(name) if name.split(".")[0] == "dexrl" else None
            hit = f"{module}:{line} -> {target}"
            if target and not closure.heavy(target) - closure.heavy(module) and hit not in found:
                found.append(hit)
    return found


def _package_trees() -> dict[str, ast.Module]:
    return {module_name(p, PACKAGE): _parse(p) for p in PACKAGE.rglob("*.py")
            if "__pycache__" not in p.parts}


def test_own_modules_are_imported_at_the_top() -> None:
    assert needless_inner_imports(_package_trees()) == []


def test_the_import_rule_keeps_a_deferred_heavy_import_only() -> None:
    """A control: a function importing a cheap module is reported; one deferring torch is not,
    whether torch comes from a module, a submodule imported by name from its package, or a
    module the importer only names under ``if TYPE_CHECKING:``."""
    trees = {
        "dexrl": ast.parse(""),
        "dexrl.light": ast.parse("import json\n"),
        "dexrl.heavy": ast.parse("import torch\n"),
        "dexrl.pkg": ast.parse(""),
        "dexrl.pkg.sub": ast.parse("import torch\n"),
        "dexrl.user": ast.parse("if TYPE_CHECKING:\n    from dexrl.heavy import z\n"
                                "def f():\n    from dexrl.light import x, w\n"
                                "def g():\n    from dexrl.heavy import y\n"
                                "def h():\n    from dexrl.pkg import sub\n"),
    }
    assert needless_inner_imports(trees) == ["dexrl.user:4 -> dexrl.light"]


def unmirrored(test_files: list[Path], tests: Path, package: Path, bench: Path) -> list[str]:
    """Test files (relative to ``tests``) that name no module of ``package`` (or of bench/)."""
    modules = {p.relative_to(package).with_suffix("") for p in package.rglob("*.py")}
    modules |= {p.relative_to(package) for p in package.rglob("*") if p.is_dir()}
    scripts = {Path("bench") / p.relative_to(bench).with_suffix("") for p in bench.glob("*.py")}
    found = []
    for path in test_files:
        rel = path.relative_to(tests)
        if rel.parts[0] in NOT_MIRRORED:
            continue
        named = rel.with_name(rel.name.removeprefix("test_")).with_suffix("")
        if named not in modules and named not in scripts:
            found.append(str(rel))
    return sorted(found)


def test_tests_mirror_the_package() -> None:
    files = [p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts]
    assert unmirrored(files, TESTS, PACKAGE, REPO / "bench") == []


def test_the_mirror_rule_reports_a_test_named_for_no_module(tmp_path: Path) -> None:
    """A control: ``tests/runs/test_nothing.py`` is reported; a scenario and a real module's
    test are not."""
    tests = tmp_path / "tests"
    files = [tests / "runs" / "test_nothing.py", tests / "runs" / "test_layout.py",
             tests / "scenarios" / "test_anything.py"]
    assert unmirrored(files, tests, PACKAGE, REPO / "bench") == ["runs/test_nothing.py"]
