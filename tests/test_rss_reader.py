"""The RSS reader: it cross-checks memory_profiler against psutil once, and a
fallback to psutil alone is said, never silent."""
import warnings

import pytest

from dezero_mini.memory import probes

MIB = probes.MIB


def _reader_of(value):
    return lambda: value


def _broken():
    raise ModuleNotFoundError("No module named 'memory_profiler'")


# (what memory_profiler does, what the warning must name)
FALLBACKS = [
    pytest.param(_broken, "ModuleNotFoundError", id="missing"),
    pytest.param(lambda: _reader_of(None), "TypeError", id="reads-nothing"),
    pytest.param(lambda: _reader_of(10**12), "MiB apart", id="disagrees"),
]


@pytest.mark.parametrize("source", [True, "psutil", "memory_profiler"])
@pytest.mark.parametrize("memory_profiler, named", FALLBACKS)
def test_a_fallback_to_psutil_warns_and_says_why(monkeypatch, source, memory_profiler, named):
    monkeypatch.setattr(probes, "_memory_profiler_reader", memory_profiler)
    with pytest.warns(RuntimeWarning, match=named) as caught:
        read = probes.rss_reader(source)
    assert "psutil alone" in str(caught[0].message)
    assert read() > 0  # psutil's reading of this process


@pytest.mark.parametrize("source", [True, "psutil", "memory_profiler"])
def test_agreeing_readers_are_used_without_a_warning(monkeypatch, source):
    by_psutil = probes._psutil_reader()
    # memory_profiler a little off, within the tolerance: no fallback
    monkeypatch.setattr(probes, "_memory_profiler_reader",
                        lambda: (lambda: by_psutil() + probes.RSS_AGREEMENT // 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read = probes.rss_reader(source)
    value, now = read(), by_psutil()
    if source == "memory_profiler":
        assert value - now == pytest.approx(probes.RSS_AGREEMENT // 2, abs=4 * MIB)
    else:
        assert abs(value - now) < 4 * MIB


def test_the_real_memory_profiler_agrees_with_psutil():
    pytest.importorskip("memory_profiler")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert probes.rss_reader(True)() > 0


def test_no_reader_when_rss_is_off():
    assert probes.rss_reader(False) is None
