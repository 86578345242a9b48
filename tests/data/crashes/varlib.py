"""Real bugs whose message varies with the input while the raise site stays the same, copied by
variations.py into run directories (`run-<hex>/`, Ray's `_ray_pkg_<hex>/`, a scratch job dir)
and run there. `run_shard.py` (copied beside it) is the runner that reports a child's exit.

BUGS: bug id -> (entry points = call paths into the bug, input maker(rng, scratch) -> args).
"""

from __future__ import annotations

import json
import os
import random
import subprocess

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq


# -- one raise site, many printed argument lists -------------------------------------
def verify_archive(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, shell=isinstance(cmd, str))


def verify_shard(cmd):
    return verify_archive(cmd)


def verify_manifest(cmd):
    return [verify_archive(cmd)]


# -- a bare unquoted path as the whole message (pyarrow raises it so) ------------------
def load_part(path):
    return pq.read_table(path)


def read_shard(path):
    return load_part(path)


def read_side_input(path):
    return load_part(path)


# -- input-dependent phrases from the libraries ----------------------------------------
def parse_event(header, body):
    meta = json.loads(header)
    payload = json.loads(body)
    return meta, payload


def ingest_header(header, body):
    return parse_event(header, body)


def ingest_body(header, body):
    return parse_event(header, body)


def load_manifest(text):
    return json.loads(text)


def decode_line(raw):
    return raw.decode("utf-8")


def read_lines(raw):
    return decode_line(raw)


def to_column(values):
    return pa.array(values)


def build_batch(values):
    return to_column(values)


def join_users(left, right):
    return left.merge(right, on="user")


def enrich_orders(left, right):
    return join_users(left, right)


# -- native crashes (run in a `python -X faulthandler` child by run_shard.py) -----------
def decode_block():
    import ctypes

    ctypes.string_at(0)


def verify_footer():
    os.abort()


def finish_shard(code):
    raise SystemExit(code)


def _word(rng: random.Random) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))


def _data_path(rng: random.Random, scratch: str) -> str:
    """Where a pipeline's input lives: varied roots, names and extensions."""
    root = rng.choice([f"/mnt/data/{_word(rng)}/2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                       f"/mnt/scratch/{_word(rng)}/jobs/{rng.getrandbits(48):012x}/run-{rng.getrandbits(24):06x}",
                       f"{scratch}/_ray_pkg_{rng.getrandbits(64):016x}/data", f"/data/{_word(rng)}/v{rng.randint(1, 9)}"])
    name = rng.choice(["part", "shard", "chunk"]) + f"-{rng.randint(0, 99_999):05d}"
    return f"{root}/{name}.{rng.choice(['parquet', 'pq', 'arrow', 'parquet.tmp'])}"


def _command(rng: random.Random, scratch: str):
    """A failing archive check: argument lists, nested quotes, `sh -c '…'`, plain strings."""
    bad = os.path.join(scratch, f"part-{rng.randint(0, 99_999):05d}.{rng.choice(['gz', 'zst'])}")
    with open(bad, "wb") as fh:
        fh.write(os.urandom(rng.randint(8, 64)))
    return rng.choice([["gzip", "-t", bad], ["zstd", "-q", "-t", bad], ["sh", "-c", f"gzip -t '{bad}'"],
                       f"sh -c 'zstd -q -t {bad}'", ["sh", "-c", f"test -s \"{bad}\" && exit {rng.randint(1, 9)}"],
                       f"gzip -t {bad} && echo ok"])


BAD_JSON = ['{"id": %d "name": "x"}', '{id: %d}', '{"id": "%d', '{"id": %d} trailing', '', '[%d,]', '{"id" %d}']
BAD_UTF8 = [b"caf\xe9 %d", b"\xff\xfe%d", b"ok %d \xe2\x82", b"\xc3\x28 %d"]


def _bad_json(rng: random.Random) -> str:
    text = rng.choice(BAD_JSON)
    return text % rng.randint(0, 9999) if "%d" in text else text


def _mixed(rng: random.Random) -> list:
    first = rng.choice([rng.random() * 100, rng.randint(0, 99), True])
    return [first] * rng.randint(1, 20) + [_word(rng)]


def _frames(rng: random.Random, swap: bool) -> tuple:
    ints = pd.DataFrame({"user": range(rng.randint(2, 20)), "n": 1})
    strs = pd.DataFrame({"user": [_word(rng) for _ in range(rng.randint(2, 20))], "m": 2})
    return (strs, ints) if swap else (ints, strs)


BUGS = {
    "check-archive": (["verify_shard", "verify_manifest"], lambda rng, s: (_command(rng, s),)),
    "missing-part": (["read_shard", "read_side_input"], lambda rng, s: (_data_path(rng, s),)),
    "json-header": (["ingest_header", "ingest_body"], lambda rng, s: (_bad_json(rng), "{}")),
    "json-body": (["ingest_header", "ingest_body"], lambda rng, s: ('{"v": 1}', _bad_json(rng))),
    "json-manifest": (["load_manifest"], lambda rng, s: (_bad_json(rng),)),
    "utf8-line": (["read_lines"], lambda rng, s: (rng.choice(BAD_UTF8).replace(b"%d", b"%d" % rng.randint(0, 99)),)),
    "arrow-mixed-column": (["build_batch"], lambda rng, s: (_mixed(rng),)),
    "merge-key-types": (["enrich_orders"], lambda rng, s: _frames(rng, rng.random() < 0.5)),
}
# Run by run_shard.py in a child: bug id -> (entry, exit code or None for a native crash).
CHILD = {"segv-decode-block": ("decode_block", None), "abort-verify-footer": ("verify_footer", None),
         "exit-1": ("finish_shard", 1), "exit-code-3": ("finish_shard", 3), "exit-75": ("finish_shard", 75)}
