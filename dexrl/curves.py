"""Learning curves of runs as one PNG, read from the TensorBoard event files RLinf writes.

RLinf logs every global step's metrics to ``RUN_DIR/tensorboard`` (``env/*``, ``train/*``,
``time/*``). :func:`read_run` turns a run folder into scalar series, :func:`draw` lays out one
panel per quantity with the runs overlaid. matplotlib and tensorboard are imported inside the
functions: ``dexrl --help`` must not pay for them.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from dexrl.config.modes import ASYNC, run_mode
from dexrl.errors import DexrlError
from dexrl.runs import durable
from dexrl.runs.layout import CONFIG_FILE, CURVES, TENSORBOARD

EVENT_GLOB = "events.out.tfevents.*"  # RLinf's (TensorBoard's) event files

# How RLinf splits a step's time (its ``time/*`` metrics), coarsest level only.
TIME_SPLIT = (
    ("rollout", "time/generate_rollouts"),
    ("advantages", "time/cal_adv_and_returns"),
    ("training", "time/actor/run_training"),
    ("weight_sync", "time/sync_weights"),
)
# The same parts under RLinf's async runner's names; "waiting" is the actor waiting for
# trajectories (rollouts themselves run beside training there).
ASYNC_TIME_SPLIT = (
    ("waiting", "time/construct_rollout_batch"),
    ("advantages", "time/cal_adv_and_returns"),
    ("training", "time/actor_training"),
    ("weight_sync", "time/update_rollout_weights"),
)


def time_split(tags: Container[str]) -> tuple[tuple[str, str], ...]:
    """The (label, tag) pairs of a step's time split present in ``tags``: the async runner's
    when it logged them, else the synchronous runner's."""
    split = ASYNC_TIME_SPLIT if "time/actor_training" in tags else TIME_SPLIT
    return tuple((label, tag) for label, tag in split if tag in tags)

# (panel title, tag) of the metrics drawn one per panel, in reading order.
PANELS = (
    ("success rate", "env/success_once"),
    ("return", "env/return"),
    ("policy loss", "train/actor/policy_loss"),
    ("value loss", "train/critic/value_loss"),
    ("approx KL", "train/actor/approx_kl"),
    ("clip fraction", "train/actor/clip_fraction"),
    ("grad norm", "train/actor/grad_norm"),
)


@dataclass(frozen=True)
class RunCurves:
    """The scalar series of one run: tag -> (steps, values), sorted by step."""

    label: str
    series: dict[str, tuple[list[int], list[float]]]
    run_dir: Path | None = None  # the folder it was read from


def event_files(run_dir: Path) -> list[Path]:
    """The TensorBoard event files of a run folder (or of a tensorboard folder itself)."""
    roots = [run_dir / TENSORBOARD, run_dir]
    for root in roots:
        if root.is_dir():
            found = sorted(root.rglob(EVENT_GLOB))
            if found:
                return found
    return []


def read_run(run_dir: Path, label: str | None = None) -> RunCurves:
    """Every scalar RLinf logged for a run; the last value wins for a step logged twice (resume).

    RLinf's synchronous runner logs global step ``k`` (1-based, as ``train`` prints it) at
    TensorBoard step ``k - 1``, its async runner at ``k`` (:func:`logged_offset`); the series
    use ``k``.

    Raises:
        DexrlError: the path is not a folder, or holds no event file with scalars.
    """
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise DexrlError("no such run folder", "pass a run folder, e.g. runs/<name>",
                         where=str(run_dir), code="run-not-found")
    if not run_dir.is_dir():
        raise DexrlError("not a run folder (a file)",
                         "pass the run folder that holds tensorboard/, e.g. runs/<name>",
                         where=str(run_dir), code="run-not-a-folder")
    files = event_files(run_dir)
    if not files:
        raise DexrlError(f"no TensorBoard event files in {run_dir / TENSORBOARD}",
                         "pass a folder written by `dexrl train` with the tensorboard logger "
                         "(runner.logger.logger_backends includes tensorboard) after its first "
                         "step", where=str(run_dir), code="plot-no-event-files")
    points: dict[str, dict[int, float]] = {}
    offset = logged_offset(run_dir)
    for path in files:  # sorted by name: event files of a resumed run come later
        for tag, step, value in _scalars(path):
            points.setdefault(tag, {})[step + offset] = value
    if not points:
        raise DexrlError("the event files hold no scalars yet",
                         "wait for the run's first global step to finish, then plot again",
                         where=str(run_dir), code="plot-no-scalars")
    series = {tag: (sorted(by_step), [by_step[s] for s in sorted(by_step)])
              for tag, by_step in points.items()}
    return RunCurves(label or _label(run_dir), series, run_dir)


def logged_offset(run_dir: Path) -> int:
    """What to add to a TensorBoard step of this run for its global step: 1, or 0 for a run of
    RLinf's async runner (``runner.mode: async`` in its config.yaml), which logs after counting
    the step."""
    config = run_dir / "config.yaml"
    if not config.is_file():
        return 1
    try:
        return 0 if run_mode(OmegaConf.load(config)) == ASYNC else 1
    except Exception:  # an unreadable config is reported by the verbs that need it
        return 1


def _label(run_dir: Path) -> str:
    path = run_dir.resolve()
    return path.parent.name if path.name == TENSORBOARD else path.name


def _scalars(path: Path) -> list[tuple[str, int, float]]:
    """(tag, step, value) of every scalar in one event file, written by add_scalar."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    out = []
    for event in EventFileLoader(str(path)).Load():
        for value in event.summary.value:
            if value.HasField("simple_value"):
                out.append((value.tag, int(event.step), float(value.simple_value)))
            elif value.HasField("tensor") and not value.tensor.string_val:
                array = tensor_util.make_ndarray(value.tensor)
                if array.size == 1:
                    out.append((value.tag, int(event.step), float(array.reshape(()))))
    return out


# A run folder under a parent that has nothing to draw yet is skipped there, not an error.
_NOTHING_YET = ("plot-no-event-files", "plot-no-scalars")


def is_run_folder(path: Path) -> bool:
    """A folder ``plot`` reads as one run: a dexrl run folder (``config.yaml``), one with RLinf's
    ``tensorboard/``, or a tensorboard folder itself (event files directly in it)."""
    path = Path(path)
    return ((path / CONFIG_FILE).is_file() or (path / TENSORBOARD).is_dir()
            or (path.name == TENSORBOARD and path.is_dir()) or any(path.glob(EVENT_GLOB)))


def run_folders_under(parent: Path) -> list[Path]:
    """The run folders directly under ``parent`` (hidden ones left out), sorted by name."""
    return sorted(p for p in Path(parent).iterdir()
                  if p.is_dir() and not p.name.startswith(".") and is_run_folder(p))


def read_given(path: Path, note: Callable[[str], None] = lambda _: None) -> list[RunCurves]:
    """The runs a path given to ``plot`` stands for: a run folder is one run; a folder that is not
    one but holds run folders directly is each of them (those with nothing logged yet are
    skipped, and ``note`` says so).

    Raises:
        DexrlError: nothing at ``path``, a file, a folder that is neither, or nothing to draw.
    """
    path = Path(path)
    if not path.is_dir() or is_run_folder(path):
        return [read_run(path)]  # it says what is wrong with a missing path or a file
    children = run_folders_under(path)
    shown = str(path).rstrip("/") + "/"
    if not children:
        raise DexrlError("not a run folder (no config.yaml, no tensorboard/) and no run folders "
                         "directly under it",
                         "pass a run folder `dexrl train` wrote (e.g. runs/<name>), or a folder "
                         "that holds run folders (e.g. runs/)", where=str(path),
                         code="plot-not-a-run-folder")
    note(f"found {len(children)} run folder{'s' if len(children) != 1 else ''} under {shown}")
    runs, skipped = [], []
    for child in children:
        try:
            runs.append(read_run(child))
        except DexrlError as exc:
            if exc.code not in _NOTHING_YET:
                raise
            skipped.append(exc)
    if not runs:
        raise skipped[0]
    for exc in skipped:
        note(f"skipped {exc.where}: {exc.message}")
    return runs


def plot_runs(run_dirs: list[Path], out: Path | None = None,
              note: Callable[[str], None] = lambda _: None,
              drawn: list[RunCurves] | None = None) -> Path:
    """Read each run's TensorBoard events and draw them into one PNG; returns its path.

    A path that is not a run folder but holds run folders stands for all of them
    (:func:`read_given`; ``note`` gets what was found). ``out`` defaults to ``PATH/curves.png``
    for one path given (a run folder or such a parent) and ``./curves.png`` for several. Every
    input is read before anything is written. ``drawn``, if given, receives the runs drawn, in
    legend order (``dexrl plot --json`` lists them).
    """
    runs = [run for d in run_dirs for run in read_given(Path(d), note)]
    if out is None:
        out = run_dirs[0] / CURVES if len(run_dirs) == 1 else Path(CURVES)
    if out.suffix.lower() != ".png":
        raise DexrlError(f"the output must be a .png file, not '{out.name}'",
                         "pass --out FILE.png", where="--out", code="plot-out-not-png")
    if not out.parent.is_dir():
        raise DexrlError("the output's folder does not exist",
                         "create it first or pass --out in an existing folder",
                         where=str(out.parent), code="plot-out-folder-missing")
    if drawn is not None:
        drawn.extend(runs)
    return draw(runs, out)


def draw(runs: list[RunCurves], out: Path) -> Path:
    """Draw the panels of :data:`PANELS` and the time split into one PNG, runs overlaid.

    The file is written durably (:mod:`dexrl.runs.durable`), so a reader (or a crash) never sees
    half
    a PNG.
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib import pyplot as plt

    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, axes = plt.subplots(2, 4, figsize=(16, 7.5), constrained_layout=True)
    flat = list(axes.flat)
    for ax, (title, tag) in zip(flat, PANELS, strict=False):
        _panel(ax, title, [(run.label, colors[i % len(colors)], run.series.get(tag))
                           for i, run in enumerate(runs)])
    _time_panel(flat[len(PANELS)], runs, colors)
    handles = [plt.Line2D([], [], color=colors[i % len(colors)], marker="o", label=run.label)
               for i, run in enumerate(runs)]
    fig.legend(handles=handles, loc="outside upper center", ncols=min(len(runs), 4),
               frameon=False)
    try:
        with durable.replacing(Path(out)) as tmp:
            try:
                fig.savefig(tmp, dpi=80, format="png")
            except OSError as exc:  # a failed write names no file: name the PNG's
                if exc.filename is not None or exc.errno is None:
                    raise
                raise OSError(exc.errno, exc.strerror, str(out)) from exc
    finally:
        plt.close(fig)
    return Path(out)


def _panel(ax, title: str, lines: list[tuple[str, str, tuple | None]]) -> None:  # noqa: ANN001
    _axes(ax, title)
    if title == "success rate":
        ax.set_ylim(-0.05, 1.05)
    drawn = False
    for label, color, data in lines:
        if data is None:
            continue
        steps, values = data
        ax.plot(steps, values, color=color, marker="o", markersize=3, label=label)
        drawn = True
    if not drawn:
        ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes,
                color="grey")


def _axes(ax, title: str) -> None:  # noqa: ANN001
    from matplotlib.ticker import MaxNLocator

    ax.set_title(title)
    ax.set_xlabel("global step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)


def _time_panel(ax, runs: list[RunCurves], colors: list[str]) -> None:  # noqa: ANN001
    """Seconds per step by part: a stacked area for one run, lines per part for several."""
    _axes(ax, "time per step (s)")
    tags = {tag for r in runs for tag in r.series}
    parts = list(time_split(tags))
    if not parts:
        ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes,
                color="grey")
        return
    if len(runs) == 1:
        series = runs[0].series
        steps = series[parts[0][1]][0]
        stacked = [[dict(zip(*series[tag], strict=True)).get(s, 0.0) for s in steps]
                   if tag in series else [0.0] * len(steps) for _, tag in parts]
        ax.stackplot(steps, stacked, labels=[label for label, _ in parts], alpha=0.8)
        ax.legend(fontsize="small", loc="lower left", framealpha=0.6)
        return
    from matplotlib.lines import Line2D

    styles = ("-", "--", ":", "-.")
    for i, run in enumerate(runs):
        for j, (_, tag) in enumerate(parts):
            if tag in run.series:
                ax.plot(*run.series[tag], color=colors[i % len(colors)],
                        linestyle=styles[j % len(styles)])
    ax.legend(handles=[Line2D([], [], color="black", linestyle=styles[j % len(styles)],
                              label=label) for j, (label, _) in enumerate(parts)],
              fontsize="small", loc="lower left", framealpha=0.6)
