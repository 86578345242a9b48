"""sources/unpickle.py: actor replies read with sharing kept, every size bounded, nothing run.

Hostile shapes by hand (a 257-byte DAG of 2^40 nodes, 100k-deep nesting, huge declared sizes,
a memo index that would make CPython allocate gigabytes), then hypothesis: random values with
shared parts, pickled at every protocol, intact, truncated, mutated or replaced by garbage."""

from __future__ import annotations

import os
import pickle
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zephyr_debug.errors import ZdebugError
from zephyr_debug.sources.unpickle import LIMITS, plain_data

# A reply that would blow up (a DAG of 2^40 nodes, gigabytes of memo) hangs or dies here: pytest-timeout
# (pyproject) ends a hang; nothing in this file times a read.


def _read(data: bytes):
    try:
        value, error = plain_data(data), None
    except ZdebugError as exc:
        value, error = None, str(exc)
    assert error is None or "\n" not in error
    return value, error


def _doubling(times: int) -> list:
    x: list = [1]
    for _ in range(times):
        x = [x, x]
    return x


def test_a_257_byte_dag_of_2_to_the_40_nodes_is_refused_at_once():
    data = pickle.dumps(_doubling(40))
    assert len(data) < 300
    value, error = _read(data)
    assert value is None and "objects" in error and f"{LIMITS.objects:,}" in error


def test_a_small_dag_keeps_its_sharing():
    value, error = _read(pickle.dumps({"a": _doubling(12)}))
    assert error is None
    x = value["a"]
    assert x[0] is x[1] and x[0][0] is x[1][1]  # not expanded into a tree of 8k lists
    assert x == _doubling(12)


def test_deep_nesting_is_refused_by_the_depth_limit():
    n = 100_000
    data = b"\x80\x02" + b"]" * n + b"a" * (n - 1) + b"."  # n empty lists, each appended to the one below
    _, error = _read(data)
    assert "nesting deeper than" in error and f"{LIMITS.depth:,}" in error
    ok, error = _read(b"\x80\x02" + b"]" * 10 + b"a" * 9 + b".")
    assert error is None and ok == [[[[[[[[[[]]]]]]]]]]


def test_a_cycle_is_refused():
    x: list = []
    x.append(x)
    _, error = _read(pickle.dumps(x))
    assert "nesting deeper than" in error


@pytest.mark.parametrize(
    "name, data, needle",
    [
        ("unicode8 of 2^60 bytes", b"\x80\x04\x8d" + struct.pack("<Q", 1 << 60) + b"abc.", "unreadable"),
        ("bytes8 of 2^60 bytes", b"\x80\x04\x8e" + struct.pack("<Q", 1 << 60) + b"abc.", "unreadable"),
        ("bytes of 2^31 bytes", b"\x80\x03B" + struct.pack("<I", 1 << 31) + b"abc.", "unreadable"),
        ("long4 of 2^31 bytes", b"\x80\x02\x8b" + struct.pack("<i", (1 << 31) - 1) + b"\x01.", "unreadable"),
        ("memo slot 2^31", b"\x80\x02]r" + struct.pack("<I", 1 << 31) + b".", "memo index"),
        ("text memo slot", b"(lp99999999999\n.", "memo index"),
        ("frame of 2^40 bytes", b"\x80\x04\x95" + struct.pack("<Q", 1 << 40) + b"N.", "declared frame"),
        ("bytearray(3e9)", b"cbuiltins\nbytearray\n(I3000000000\ntR.", None),
        (
            "5,000 class names",
            b"\x80\x02" + b"".join(b"c%d\nC\n0" % i for i in range(5000)) + b"N.",
            "class references",
        ),
        ("a 40 MB reply", b"\x80\x04N" + b"0" * (40 << 20) + b".", "bytes over the limit"),
    ],
)
def test_huge_declared_sizes_are_refused_before_anything_is_allocated(name, data, needle):
    value, error = _read(data)
    if needle is None:
        assert error is not None or value == "bytearray(b'')"  # bytearray(int) builds an empty one
    else:
        assert error is not None and needle in error, (name, error)


def test_strings_shared_many_times_count_each_time():
    big = "x" * (1 << 20)
    _, error = _read(pickle.dumps([big] * 100))  # 1 MB pickled, 100 MB of JSON once expanded
    assert "string bytes" in error


class _Exploit:
    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return os.system, (f"touch {self.path}",)


# -- hypothesis ---------------------------------------------------------------------------------
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20), st.binary(max_size=20)
)
trees = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.tuples(inner, inner), st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=30,
)


@st.composite
def shared_values(draw):
    """A tree whose parts are reused: a list of the same few subtrees, doubled a few times."""
    parts = draw(st.lists(trees, min_size=1, max_size=4))
    value = [parts[i % len(parts)] for i in range(draw(st.integers(1, 6)))]
    for _ in range(draw(st.integers(0, 30))):
        value = [value, value] if draw(st.booleans()) else {"k": value, "v": value}
    return value


@st.composite
def replies(draw):
    value = draw(st.one_of(trees, shared_values()))
    protocol = draw(st.integers(0, 5))
    data = pickle.dumps(value, protocol=protocol)
    how = draw(st.sampled_from(["intact", "truncated", "mutated", "inserted", "garbage"]))
    if how == "truncated":
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif how == "mutated":
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1 :]
    elif how == "inserted":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=16)) + data[at:]
    elif how == "garbage":
        data = draw(st.binary(max_size=200))
    return value, protocol, how, data


def _plain(value):
    """What plain_data should give for a value of only builtin types."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value) if isinstance(value, bytes) else value


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(replies())
def test_fuzz_any_reply_is_read_or_refused_in_one_line_quickly(reply):
    value, protocol, how, data = reply
    got, error = _read(data)
    if how == "intact":
        assert error is None or "over the limit" in error, error
        if error is None and protocol >= 3:  # before 3, bytes pickle as a call of _codecs.encode
            assert got == _plain(value)


def test_a_reply_naming_os_system_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    for protocol in range(6):
        _read(pickle.dumps({"status": _Exploit(str(marker))}, protocol=protocol))
    assert not marker.exists()
