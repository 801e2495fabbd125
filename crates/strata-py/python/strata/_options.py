"""Client options as the CLI writes them: sizes ("100G", "300M"; a plain number is MiB)
and durations ("60s", "2m"; a plain number is seconds), turned into bytes and seconds."""

import re

_SIZE_OPTIONS = {"cache_size", "buffer_size", "max_readahead", "meta_cache_size"}
_DURATION_OPTIONS = {
    "get_timeout", "put_timeout", "backup_meta", "heartbeat", "open_cache", "group_timeout",
}
_SIZE_UNITS = {"": 1 << 20, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
_TIME_UNITS = {"": 1, "ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_size(name, value):
    """Bytes from 100G, 512M, 4K or a plain number of MiB."""
    if isinstance(value, bool):
        raise ValueError(f"option {name}: expected a size such as 100G, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"option {name}: a size cannot be negative")
        return value << 20
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGTP]?)(?:i?B)?\s*", str(value), re.IGNORECASE)
    if not m:
        raise ValueError(f"option {name}: expected a size such as 100G, got {value!r}")
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).upper()])


def parse_duration(name, value):
    """Seconds from 60s, 2m, 1h, 500ms or a plain number of seconds."""
    if isinstance(value, bool):
        raise ValueError(f"option {name}: expected a duration such as 60s, got {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"option {name}: a duration cannot be negative")
        return float(value)
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*", str(value))
    if not m:
        raise ValueError(f"option {name}: expected a duration such as 60s, got {value!r}")
    return float(m.group(1)) * _TIME_UNITS[m.group(2) or ""]


def native_options(options):
    """The keyword options of strata.Client in the units the native module takes."""
    out = {}
    for name, value in options.items():
        if name in _SIZE_OPTIONS:
            out[name] = parse_size(name, value)
        elif name in _DURATION_OPTIONS:
            out[name] = parse_duration(name, value)
        else:
            out[name] = value
    return out
