"""The training record's figures, sent to the grading parent as they are taken.

The learner's code runs in the process that measures it: whatever the
record holds once the file's code has run again (its next batch, a
finalizer, a thread, ``REGISTRY.clear()``) may have been rewritten. So each
batch's figures leave the worker as soon as they are taken, as a signed line
of the result channel (``stream_figures``, called by the recorder's per-batch
hook through ``bench.Bench.record``), and the parent keeps them
(``FigureStream``). Each contract's result carries a digest of every record
it read (``digest_of``); the parent computes the same digest of the figures it
received, and a record that differs is tampering.
"""
import hashlib

#: The per-batch signals that the contracts read, streamed batch by batch.
STREAMED = ("traced_current", "traced_peak", "live_objects", "tracked_objects")
#: The figures taken once, after the record's final collection.
FINAL = ("final_collected", "live_after_collect")


def stream_figures(send, batch, figures):
    """Send batch ``batch``'s ``figures`` (``{signal: number}``) with
    ``send(**event)``: ``{"event": "figures", "batch": i, signal: value...}``;
    ``batch`` None sends the final figures, ``{"event": "figures_end", ...}``."""
    if batch is None:
        send(event="figures_end", **{name: int(figures[name]) for name in FINAL})
    else:
        send(event="figures", batch=int(batch), **{name: int(figures[name]) for name in STREAMED})


def _digest(values):
    return hashlib.sha256(",".join(str(int(value)) for value in values).encode()).hexdigest()


def digest_of(record):
    """``{signal: sha256 of its figures}`` of a record (its ``STREAMED``
    signals, and ``FINAL`` as one-figure signals): what a result says the
    contract read, in a few hundred bytes however many batches."""
    digests = {name: _digest(getattr(record, name)) for name in STREAMED}
    digests.update({name: _digest([getattr(record, name)]) for name in FINAL})
    return digests


class Forged(Exception):
    """A figures line that the record did not stream in its order, or a
    result whose record differs from the figures streamed."""


class FigureStream:
    """The parent's copy of one worker's training record, batch by batch.

    ``receive(event, contract)`` takes a ``figures`` or ``figures_end``
    event that came while ``contract`` ran; ``check(digests, contract)`` holds
    the records a result says it read against the figures received. Both
    raise ``Forged`` naming what is wrong: a batch out of order or twice, a
    field missing, extra or not a whole number, figures after the record
    ended, a record read before it was streamed whole, or a figure that
    differs from the one streamed."""

    def __init__(self, batches):
        self.batches = batches
        self._begun_in = None  # the contract during which the stream began
        self._received = {name: [] for name in STREAMED}
        self._final = None

    @property
    def ended(self):
        return self._final is not None

    def receive(self, event, contract):
        kind = event.get("event")
        fields = STREAMED if kind == "figures" else FINAL
        extra = sorted(set(event) - {"event", "batch", *fields} if kind == "figures"
                       else set(event) - {"event", *fields})
        if extra:
            raise Forged(f"a {kind} line with fields that the record does not send: "
                         f"{', '.join(extra[:3])}")
        for name in fields + (("batch",) if kind == "figures" else ()):
            if type(event.get(name)) is not int:
                raise Forged(f"a {kind} line whose {name} is {event.get(name)!r}, not a whole "
                             "number")
        if self.ended:
            raise Forged(f"a {kind} line after the record had ended")
        received = len(self._received[STREAMED[0]])
        if kind == "figures_end":
            if received != self.batches:
                raise Forged(f"the record's end after {received} of its {self.batches} batches")
            self._final = {name: event[name] for name in FINAL}
            return
        batch = event["batch"]
        if batch == 0 and received and contract != self._begun_in:
            # The record raised in an earlier contract (the file's code did) and
            # is taken anew: its first attempt's figures are no one's verdict.
            self._received = {name: [] for name in STREAMED}
            received = 0
        if batch != received or batch >= self.batches:
            raise Forged(f"figures of batch {batch} where batch {received} was due (of "
                         f"{self.batches})")
        if batch == 0:
            self._begun_in = contract
        for name in STREAMED:
            self._received[name].append(event[name])

    def check(self, digests, contract, required=False):
        """Hold each of ``digests`` (a result's ``digest_of`` list) against
        the figures received; ``required``: the contract's verdict reads the
        record (``Contract.reads_record``, and it ran), so that a result
        without a digest is forged too."""
        if not isinstance(digests, list) or not all(isinstance(d, dict) for d in digests):
            raise Forged(f"{contract}'s result with records in no form the worker sends")
        if required and not digests:
            raise Forged(f"{contract}'s result without the record that its verdict reads")
        if digests and not self.ended:
            raise Forged(f"{contract} read a record that was not streamed whole")
        for digest in digests:
            for name in (*STREAMED, *FINAL):
                values = self._received[name] if name in STREAMED else [self._final[name]]
                if digest.get(name) != _digest(values):
                    raise Forged(f"{contract} read a record whose {name} differs from the "
                                 "figures streamed as they were taken (rewritten after it "
                                 "was measured)")
            if set(digest) != {*STREAMED, *FINAL}:
                raise Forged(f"{contract}'s result with records in no form the worker sends")
