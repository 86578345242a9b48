"""A small 'user pipeline' with real bugs, copied by generate.py into several checkout roots
(temp dirs, the home dir) and run there, so tracebacks differ in paths as they do in real runs.

Each BUGS entry: bug id -> (entry points = call paths into the bug, argument maker).
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import threading
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq


# -- pandas --------------------------------------------------------------------------
def select_features(df):
    return df[["user_id", "score"]]


def daily_features(df):
    return select_features(df.assign(day=1))


def backfill_features(df):
    frame = df.copy()
    return select_features(frame)


def to_cents(df):
    return df["amount"].astype(int) * 100


def bill_daily(df):
    return to_cents(df)


def bill_monthly(df):
    return to_cents(df).sum()


# -- pyarrow -------------------------------------------------------------------------
def encode_ids(values):
    return pa.array(values, type=pa.int64())


def write_ids(values):
    return encode_ids(values)


def export_ids(values):
    return [encode_ids(values)]


def load_split(path):
    return pq.read_table(path)


def read_input(path):
    return load_split(path)


def read_lookup(path):
    return load_split(path)


# -- json ----------------------------------------------------------------------------
def decode_record(line, lineno):
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"bad record at line {lineno}") from exc


def ingest_events(line, lineno):
    return decode_record(line, lineno)


def ingest_clicks(line, lineno):
    return [decode_record(line, lineno)]


def parse_config(text):
    return json.loads(text)


def load_settings(text):
    return parse_config(text)


def load_overrides(text):
    return parse_config(text)


# -- numpy ---------------------------------------------------------------------------
def combine_embeddings(a, b):
    return a + b


def mix_user(a, b):
    return combine_embeddings(a, b)


def mix_item(a, b):
    return combine_embeddings(b, a)


def whiten(matrix):
    return np.linalg.inv(matrix)


def whiten_users(matrix):
    return whiten(matrix)


def whiten_items(matrix):
    return whiten(matrix * 2)


# -- plain Python --------------------------------------------------------------------
def normalize_scores(scores):
    total = sum(scores)
    return [s / total for s in scores]


def rank_users(scores):
    return normalize_scores(scores)


def rank_items(scores):
    return normalize_scores(list(scores))


def lookup_user(record):
    return record["user_id"]


def lookup_country(record):
    return record["country"]


def enrich_user(record):
    return lookup_user(record)


def enrich_geo(record):
    return lookup_country(record)


def clean_text(value):
    return value.strip()


def clean_title(record):
    return clean_text(record.get("title"))


def clean_body(record):
    return clean_text(record.get("body"))


def merge_counts(a, b):
    return a + b


def merge_daily(a, b):
    return merge_counts(a, b)


def merge_hourly(a, b):
    return merge_counts(b, a)


def parse_row(row, part):
    if part == "age":
        age = row["age"]
        return int(age)
    name = row["name"]
    return name.title()


def parse_people(row):
    return parse_row(row, "age")


def parse_names(row):
    return parse_row(row, "name")


CACHE: dict = {}


def cached_fetch(key, retries):
    try:
        return CACHE[key]
    except KeyError:
        raise RuntimeError(f"cache miss for {key} after {retries} retries")


def fetch_profile(key, retries):
    return cached_fetch(key, retries)


def fetch_avatar(key, retries):
    return cached_fetch(key, retries)


def validate_batch(rows):
    errors = [ValueError(f"row {r}: negative amount") for r in rows if r % 2] + [
        TypeError(f"row {r}: amount is not a number") for r in rows if not r % 2]
    raise ExceptionGroup(f"validation failed for {len(rows)} rows", errors)


def validate_orders(rows):
    return validate_batch(rows)


def validate_refunds(rows):
    return validate_batch(rows)


# -- native crashes (run in a child with -X faulthandler) -----------------------------
def native_decode():
    ctypes.string_at(0)


def native_checksum():
    ctypes.memset(0, 0, 64)


def fatal_assert():
    os.abort()


def decode_page():
    native_decode()


def decode_index():
    native_decode()


def checksum_block():
    native_checksum()


def verify_block():
    fatal_assert()


def with_background_thread(fn):
    """A second thread, so the dump lists other threads too."""
    threading.Thread(target=time.sleep, args=(30,), daemon=True, name="prefetch").start()
    time.sleep(0.05)
    fn()


def _word(rng: random.Random) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))


def args_for(bug: str, rng: random.Random, scratch: str):
    """Arguments that trigger `bug`, with values that differ per call."""
    n = rng.randint(2, 50)
    if bug == "pandas-missing-column":
        return (pd.DataFrame({"user_id": range(n), _word(rng): range(n)}),)
    if bug == "pandas-astype-int":
        return (pd.DataFrame({"amount": [str(rng.randint(1, 9)) for _ in range(n)] + [_word(rng)]}),)
    if bug == "arrow-cast-str-int":
        return ([rng.randint(0, 99)] * n + [_word(rng)],)
    if bug == "arrow-missing-file":
        return (os.path.join(scratch, f"part-{rng.randint(0, 9999):05d}.parquet"),)
    if bug == "json-bad-record":
        return ('{"id": %d, "name": "%s"' % (n, _word(rng)), rng.randint(1, 10_000))
    if bug == "json-bad-config":
        return ("{'%s': %d}" % (_word(rng), n),)
    if bug == "numpy-broadcast":
        return (np.ones(n), np.ones(n + rng.randint(1, 5)))
    if bug == "numpy-singular":
        return (np.zeros((n, n)),)
    if bug == "zero-division":
        return ([0] * n,)
    if bug == "missing-user-id":
        return ({_word(rng): n},)
    if bug == "missing-country":
        return ({_word(rng): n},)
    if bug == "none-strip":
        return ({_word(rng): n},)
    if bug == "int-plus-str":
        return (n, _word(rng))
    if bug in ("parse-row-age", "parse-row-name"):
        return ({_word(rng): n},)
    if bug == "cache-miss":
        return (f"{_word(rng)}:{n}", rng.randint(1, 5))
    if bug == "validation-group":
        return (list(range(rng.randint(2, 6))),)
    raise KeyError(bug)


# bug id -> call paths (entry functions) into it.
BUGS = {
    "pandas-missing-column": ["daily_features", "backfill_features"],
    "pandas-astype-int": ["bill_daily", "bill_monthly"],
    "arrow-cast-str-int": ["write_ids", "export_ids"],
    "arrow-missing-file": ["read_input", "read_lookup"],
    "json-bad-record": ["ingest_events", "ingest_clicks"],
    "json-bad-config": ["load_settings", "load_overrides"],
    "numpy-broadcast": ["mix_user", "mix_item"],
    "numpy-singular": ["whiten_users", "whiten_items"],
    "zero-division": ["rank_users", "rank_items"],
    "missing-user-id": ["enrich_user"],
    "missing-country": ["enrich_geo"],
    "none-strip": ["clean_title", "clean_body"],
    "int-plus-str": ["merge_daily", "merge_hourly"],
    "parse-row-age": ["parse_people"],
    "parse-row-name": ["parse_names"],
    "cache-miss": ["fetch_profile", "fetch_avatar"],
    "validation-group": ["validate_orders", "validate_refunds"],
}
# Native crashes: bug id -> entry functions (each run in its own child process).
NATIVE = {
    "native-decode-segv": ["decode_page", "decode_index"],
    "native-checksum-segv": ["checksum_block"],
    "fatal-assert-abort": ["verify_block"],
}
