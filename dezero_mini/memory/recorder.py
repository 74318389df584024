"""Record the three memory signals while a stage trains, batch after batch.

``record_training``: per batch, the live Variables and Functions, the traced
bytes (tracemalloc current after the batch, peak within it), the process
RSS, and the cyclic collector's work; then one explicit ``gc.collect()``.

The recorder tries not to disturb what it measures: per-batch figures go
into numpy arrays allocated before the first batch (so the record itself does
not grow the traced memory), the counting of objects happens between batches
(outside the window of the batch's peak), and nothing that the record keeps
refers to a Variable or Function.
"""
import csv
import gc
import time
import tracemalloc

import numpy as np

from dezero_mini.atomic import atomic_write
from dezero_mini.memory.counting import LiveObjectCounter, count_live_objects
from dezero_mini.memory.probes import GcWatch, collector, kwargs_text, rss_reader, tracing, trim_heap
from dezero_mini.memory.stages import load_stage, stage_label
from dezero_mini.memory.workload import Workload
from dezero_mini.validation import whole_number

#: The per-batch signals of a TrainingRecord, in CSV column order.
SIGNALS = (
    "live_variables",
    "live_functions",
    "live_objects",
    "traced_current",
    "traced_peak",
    "rss",
    "gc_collections",
    "gc_collected",
    "loss",
    "seconds",
)
_FLOAT_SIGNALS = {"loss", "seconds"}
#: The bytes a record takes per batch: one 8-byte figure per signal (its arrays
#: are allocated whole when the run starts, so a size that cannot fit fails at once).
RECORD_BYTES_PER_BATCH = 8 * len(SIGNALS)



# --- training record -----------------------------------------------------------------
class TrainingRecord:
    """The signals of a training run, one value per batch.

    Attributes: ``label``, ``stage``, ``gc_enabled``, ``workload`` (its
    settings), one numpy array per name in ``SIGNALS`` (``rss``, and the
    three ``live_*`` counts, are None when not recorded; bytes are bytes, times seconds), ``final_collected`` (what
    ``gc.collect()`` returned after the last batch: objects freed),
    ``live_after_collect`` (live Variables + Functions after it),
    ``elapsed`` (wall seconds, instruments included) and ``rss_missing``
    (None, or why RSS was asked for and could not be read: no psutil in a
    browser's Python).
    """

    def __init__(self, label, stage, signals, *, final_collected=None,
                 live_after_collect=None, gc_enabled=False, workload=None, elapsed=None,
                 rss_missing=None):
        self.label = label
        self.stage = stage
        for name in SIGNALS:
            setattr(self, name, signals.get(name))
        self.final_collected = final_collected
        self.live_after_collect = live_after_collect
        self.gc_enabled = gc_enabled
        self.workload = workload
        self.elapsed = elapsed
        self.rss_missing = rss_missing

    @property
    def batches(self):
        return len(self.loss)

    def signal(self, name):
        """The array of a signal, by name (ValueError for an unknown name or
        a signal that was not recorded)."""
        if name not in SIGNALS:
            raise ValueError(f"unknown signal {name!r}; signals: {', '.join(SIGNALS)}")
        values = getattr(self, name)
        if values is None:
            raise ValueError(f"{name!r} was not recorded in {self.label!r}")
        return values

    def slope(self, signal):
        """Least-squares growth of a signal per batch (units per batch)."""
        values = np.asarray(self.signal(signal), dtype=np.float64)
        if len(values) < 2:
            return float("nan")
        return float(np.polyfit(np.arange(len(values)), values, 1)[0])

    def to_csv(self, path):
        """Write a header and one row per batch (``batch`` first, then the
        recorded signals). Floats are written exactly (``repr``)."""
        columns = [name for name in SIGNALS if getattr(self, name) is not None]
        with atomic_write(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["batch", *columns])
            for i in range(self.batches):
                writer.writerow([i, *(repr(getattr(self, c)[i].item()) for c in columns)])
        return path

    @classmethod
    def from_csv(cls, path, label=None, stage=None):
        """Read a record written by ``to_csv`` (the per-batch signals only).

        Everything is checked before it is used: the header (``batch`` and
        known signals, ``loss`` among them, each once), one value per column
        on every line, whole numbers where ``to_csv`` writes them, and the
        batches numbered 0, 1, 2, ... A file that is not such a record is a
        ValueError that names the file, the line and what was wrong; a
        missing file or a folder stays an OSError that names it.
        """
        def refuse(problem, line=None):
            where = f"{path}" if line is None else f"{path}, line {line}"
            raise ValueError(f"TrainingRecord.from_csv: {where}: {problem}; a record's CSV is "
                             "what TrainingRecord.to_csv (or memory --csv) writes") from None

        try:
            with open(path, newline="", encoding="utf-8") as f:
                rows = list(csv.reader(f))
        except UnicodeDecodeError as error:
            refuse(f"not UTF-8 text ({error.reason} at byte {error.start})")
        except csv.Error as error:
            refuse(f"not CSV ({error})")
        if not rows:
            refuse("empty file")
        header, body = rows[0], rows[1:]
        names = header[1:]
        unknown = [name for name in names if name not in SIGNALS]
        if header[:1] != ["batch"] or unknown or len(set(names)) != len(names) \
                or "loss" not in names:
            refuse(f"header {','.join(header)[:200]!r}: expected 'batch' and then signals "
                   f"among {', '.join(SIGNALS)} (each once, loss among them)", 1)
        columns = {name: [] for name in names}
        for number, row in enumerate(body):
            line = number + 2
            if len(row) != len(header):
                refuse(f"{len(row)} values, the header has {len(header)}", line)
            if row[0] != str(number):
                refuse(f"batch {row[0][:40]!r} where batch {number} belongs", line)
            for name, text in zip(names, row[1:]):
                try:
                    columns[name].append(float(text) if name in _FLOAT_SIGNALS else int(text))
                except ValueError:
                    kind = "a number" if name in _FLOAT_SIGNALS else "a whole number"
                    refuse(f"{name} is {text[:40]!r}, not {kind}", line)
        signals = {name: np.array(values, dtype=np.float64 if name in _FLOAT_SIGNALS
                                  else np.int64) for name, values in columns.items()}
        return cls(label if label is not None else str(path), stage, signals)

    def summary(self):
        """The figures of the run as a plain dict (bytes in bytes)."""
        counted = self.live_objects is not None  # (else the object figures are None)
        out = {
            "label": self.label,
            "stage": self.stage,
            "batches": self.batches,
            "gc_enabled": self.gc_enabled,
            "objects_per_batch": self.slope("live_objects") if counted else None,
            "traced_bytes_per_batch": self.slope("traced_current"),
            "traced_peak_max": int(self.traced_peak.max()),
            "live_objects_first": int(self.live_objects[0]) if counted else None,
            "live_objects_last": int(self.live_objects[-1]) if counted else None,
            "gc_collections": int(self.gc_collections.sum()),
            "gc_collected": int(self.gc_collected.sum()),
            "final_collected": self.final_collected,
            "live_after_collect": self.live_after_collect,
            "loss_first": float(self.loss[0]),
            "loss_last": float(self.loss[-1]),
            "seconds_in_batches": float(self.seconds.sum()),
            "elapsed": self.elapsed,
        }
        if self.rss is not None:
            out["rss_growth"] = int(self.rss[-1] - self.rss[0])
        return out

    def report(self, label=True):
        """The figures of the run in words, for a lesson or a terminal: growth
        per batch, the highest peak, the collector's work and what a final
        ``gc.collect()`` freed. One line each, indented, after the record's
        label (``label=False`` leaves it out)."""
        s = self.summary()
        lines = [self.label] if label else []
        peak = f"highest peak within a batch: {s['traced_peak_max'] / 1024**2:.2f} MiB"
        if s["batches"] < 2:  # a slope needs two batches (one gave "+nan per batch")
            if s["objects_per_batch"] is not None:
                lines.append(f"  {s['live_objects_first']} live objects after batch 1 (growth "
                             "per batch needs 2 batches or more)")
            lines.append(f"  {peak}")
        else:
            # round() then + 0.0: a flat slope of -1e-15 reads "+0.0", not "-0.0".
            kib = round(s["traced_bytes_per_batch"] / 1024, 1) + 0.0
            if s["objects_per_batch"] is not None:
                objects = round(s["objects_per_batch"], 1) + 0.0
                lines.append(f"  {objects:+.1f} live objects per batch "
                             f"({s['live_objects_first']} after batch 1, "
                             f"{s['live_objects_last']} after batch {s['batches']})")
            lines.append(f"  {kib:+.1f} KiB traced per batch; {peak}")
        if s["gc_enabled"]:
            lines.append(f"  automatic collections during the run: {s['gc_collections']}, "
                         f"which freed {s['gc_collected']} objects of any kind")
        if s["live_after_collect"] is not None and s["live_objects_last"] is not None:
            freed = s["live_objects_last"] - s["live_after_collect"]
            lines.append(f"  gc.collect() after the last batch: freed {freed} Variables and "
                         f"Functions ({s['final_collected']} objects of any kind); "
                         f"{s['live_after_collect']} still alive")
        return "\n".join(lines)

    def __repr__(self):
        text = f"TrainingRecord({self.label!r}: {self.batches} batches, "
        if self.live_objects is not None:
            text += f"{self.slope('live_objects'):+.1f} objects/batch, "
        text += f"{self.slope('traced_current') / 1024:+.1f} KiB/batch traced"
        if self.final_collected is not None:
            text += (f", gc.collect() freed {self.final_collected}, "
                     f"{self.live_after_collect} alive after")
        return text + ")"


def _record_batch(i, step, count_live, signals, watch, read_rss):
    """Run batch ``i`` (``step(i)`` returns its loss) and write its figures
    into row ``i`` of ``signals``; ``count_live()`` counts the live objects.
    Returns the figures as a dict of plain numbers, made from the values
    measured, not read back from ``signals`` (whose arrays later code could
    rewrite)."""
    collections_before, collected_before = int(watch.counts[0]), int(watch.counts[1])
    tracemalloc.reset_peak()  # the peak *within* this batch
    t0 = time.perf_counter()
    signals["loss"][i] = step(i)  # (the array converts what the step returns, as ever)
    seconds = time.perf_counter() - t0
    loss = float(signals["loss"][i])
    # Read before counting objects: gc.get_objects() builds a large list.
    current, peak = tracemalloc.get_traced_memory()
    figures = {"loss": loss, "seconds": seconds, "traced_current": current, "traced_peak": peak}
    if signals["live_objects"] is not None:
        live = count_live()
        figures["live_variables"] = int(live["variables"])
        figures["live_functions"] = int(live["functions"])
        figures["live_objects"] = int(live["total"])
    if read_rss is not None:
        figures["rss"] = int(read_rss())
    # Collections are attributed to the batch in whose stretch they ran.
    figures["gc_collections"] = int(watch.counts[0]) - collections_before
    figures["gc_collected"] = int(watch.counts[1]) - collected_before
    for name, value in figures.items():
        signals[name][i] = value
    return figures


def record_training(stage_or_module, batches=200, *, gc_enabled=False, rss=True,
                    trim=True, workload=None, label=None, backward_kwargs=None,
                    step=None, count_objects=True, on_batch=None, on_figures=None,
                    **workload_kwargs):
    """Train ``batches`` batches of the standard workload and record the
    memory signals after each one. Returns a ``TrainingRecord``.

    stage_or_module: anything ``load_stage`` accepts, or a module.
    gc_enabled: run with the cyclic collector on (False: reference counting
        alone frees memory, so a cycle leak shows as growth). The
        collector's previous state is restored afterwards.
    rss: also sample the process RSS: True (psutil, cross-checked with
        memory_profiler once), "memory_profiler" (memory_usage every batch),
        or False. Where RSS cannot be read (no psutil, as in a browser), the
        record has no RSS and ``record.rss_missing`` says why.
    trim: when sampling RSS, first return freed heap memory to the OS
        (``trim_heap``), so that RSS growth is not hidden by memory that an
        earlier run freed.
    workload: a ``Workload`` to train (else one is made from ``workload_kwargs``).
    backward_kwargs: keyword arguments for ``loss.backward`` (e.g.
        ``{"retain_grad": True}``).
    step: a callable ``step(i)`` that runs batch ``i`` and returns its loss
        as a float, instead of ``workload.train_step`` (for a training loop
        of your own, such as the loops of ``dezero_mini.memory.user_loops``).
        Whatever it keeps between batches is what the record measures.
    count_objects: count the live Variables and Functions after every batch
        (``gc.get_objects()``: milliseconds in a large process such as a
        notebook's kernel). False leaves the ``live_*`` signals None; the
        count after the final ``gc.collect()`` is still taken.
    on_batch: None, or a callable ``on_batch(done, batches)`` called after
        each batch's figures are taken (``done`` batches of ``batches``), to
        show progress; what it allocates and frees is not in any figure.
    on_figures: None, or a callable ``on_figures(i, figures)`` called as soon
        as batch ``i``'s figures are taken (before ``on_batch`` and before any
        more of the stage's code runs), with ``figures`` a dict of plain
        numbers ``{signal: value}`` of that batch (the signals recorded);
        and once more after the final collection, as ``on_figures(None,
        {"final_collected": ..., "live_after_collect": ...})``. The checker
        sends them out of the measured process from here, as they are taken.

    tracemalloc is started if it is not running (and then stopped at the
    end). The heap is collected once before the first batch so that earlier
    garbage does not show up in this record. After the last batch, with the
    collector still in the recorded state, ``gc.collect()`` is called once:
    its return value (objects freed) is ``record.final_collected``.
    """
    module = load_stage(stage_or_module)
    batches = whole_number(batches, "record_training", "batches", at_least=1)
    if workload is None:
        workload = Workload(module, **workload_kwargs)
    elif workload_kwargs:
        raise TypeError("record_training: pass either workload= or workload settings, not both")
    backward_kwargs = dict(backward_kwargs or {})
    if step is None:
        def step(i):
            return workload.train_step(i, **backward_kwargs)
    elif backward_kwargs:
        raise TypeError("record_training: backward_kwargs go to workload.train_step; "
                        "a step of your own passes its own")
    if label is None:
        label = stage_label(module)
        extras = ["gc on"] if gc_enabled else []
        if backward_kwargs:
            extras.append(kwargs_text(backward_kwargs))
        if extras:
            label += ", " + ", ".join(extras)
    read_rss = rss_reader(rss)
    rss_missing = None
    if read_rss is not None and not getattr(read_rss, "available", True):
        rss_missing, read_rss = read_rss.missing, None

    # Preallocated: filling them allocates nothing that tracemalloc would see.
    signals = {name: np.zeros(batches, dtype=np.float64 if name in _FLOAT_SIGNALS else np.int64)
               for name in SIGNALS}
    if read_rss is None:
        signals["rss"] = None
    if not count_objects:
        for name in ("live_variables", "live_functions", "live_objects"):
            signals[name] = None

    started = time.perf_counter()
    gc.collect()  # a clean floor: earlier garbage is not this run's
    # Made before the first batch: what it keeps is in no batch's growth.
    count_live = LiveObjectCounter(module) if count_objects else None
    if read_rss is not None and trim:
        trim_heap()
    with tracing(), collector(gc_enabled):
        with GcWatch() as watch:
            for i in range(batches):
                figures = _record_batch(i, step, count_live, signals, watch, read_rss)
                if on_figures is not None:
                    on_figures(i, figures)
                del figures
                if on_batch is not None:
                    on_batch(i + 1, batches)
        # After the watch has gone (the explicit collection is reported on its
        # own) but with the collector still in the recorded state.
        final_collected = gc.collect()
        live_after_collect = count_live_objects(module)["total"]
        if on_figures is not None:
            on_figures(None, {"final_collected": final_collected,
                              "live_after_collect": live_after_collect})
    elapsed = time.perf_counter() - started
    return TrainingRecord(
        label,
        getattr(module, "STAGE", module.__name__),
        signals,
        final_collected=final_collected,
        live_after_collect=live_after_collect,
        gc_enabled=gc_enabled,
        workload=workload.describe(),
        elapsed=elapsed,
        rss_missing=rss_missing,
    )
