"""zephyr_debug: find what is wrong with a Zephyr pipeline, and what to run next."""

from zephyr_debug.errors import ZdebugError

__version__ = "0.1.0"
__all__ = ["ZdebugError", "__version__", "load"]


def load(target: str, **options):
    """Load evidence from a job id, job dir, URL or file (see `zephyr_debug.sources`)."""
    from zephyr_debug.sources import load as _load

    return _load(target, **options)
