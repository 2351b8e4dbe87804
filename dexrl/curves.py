"""Learning curves of runs as one PNG, read from the TensorBoard event files RLinf writes.

RLinf logs every global step's metrics to ``RUN_DIR/tensorboard`` (``env/*``, ``train/*``,
``time/*``). :func:`read_run` turns a run folder into scalar series, :func:`draw` lays out one
panel per quantity with the runs overlaid. matplotlib and tensorboard are imported inside the
functions: ``dexrl --help`` must not pay for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dexrl.errors import DexrlError
from dexrl.runs import durable
from dexrl.runs.layout import CURVES, TENSORBOARD

# How RLinf splits a step's time (its ``time/*`` metrics), coarsest level only.
TIME_SPLIT = (
    ("rollout", "time/generate_rollouts"),
    ("advantages", "time/cal_adv_and_returns"),
    ("training", "time/actor/run_training"),
    ("weight_sync", "time/sync_weights"),
)

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


def event_files(run_dir: Path) -> list[Path]:
    """The TensorBoard event files of a run folder (or of a tensorboard folder itself)."""
    roots = [run_dir / TENSORBOARD, run_dir]
    for root in roots:
        if root.is_dir():
            found = sorted(root.rglob("events.out.tfevents.*"))
            if found:
                return found
    return []


def read_run(run_dir: Path, label: str | None = None) -> RunCurves:
    """Every scalar RLinf logged for a run; the last value wins for a step logged twice (resume).

    RLinf logs global step ``k`` (1-based, as ``train`` prints it) at TensorBoard step ``k - 1``;
    the series use ``k``.

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
    for path in files:  # sorted by name: event files of a resumed run come later
        for tag, step, value in _scalars(path):
            points.setdefault(tag, {})[step + 1] = value
    if not points:
        raise DexrlError("the event files hold no scalars yet",
                         "wait for the run's first global step to finish, then plot again",
                         where=str(run_dir), code="plot-no-scalars")
    series = {tag: (sorted(by_step), [by_step[s] for s in sorted(by_step)])
              for tag, by_step in points.items()}
    return RunCurves(label or _label(run_dir), series)


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


def plot_runs(run_dirs: list[Path], out: Path | None = None) -> Path:
    """Read each run's TensorBoard events and draw them into one PNG; returns its path.

    ``out`` defaults to ``RUN_DIR/curves.png`` for one run and ``./curves.png`` for several.
    Every input is read before anything is written.
    """
    runs = [read_run(d) for d in run_dirs]
    if out is None:
        out = run_dirs[0] / CURVES if len(run_dirs) == 1 else Path(CURVES)
    if out.suffix.lower() != ".png":
        raise DexrlError(f"the output must be a .png file, not '{out.name}'",
                         "pass --out FILE.png", where="--out", code="plot-out-not-png")
    if not out.parent.is_dir():
        raise DexrlError("the output's folder does not exist",
                         "create it first or pass --out in an existing folder",
                         where=str(out.parent), code="plot-out-folder-missing")
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
    parts = [(label, tag) for label, tag in TIME_SPLIT if any(tag in r.series for r in runs)]
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
