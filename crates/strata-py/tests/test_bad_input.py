"""Bad input gives a clear Python exception, never a crash of the interpreter: each case
runs in its own interpreter, whose exit status and last line are checked."""

import subprocess
import sys
import textwrap

import pytest


def run_python(code):
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout.strip(), done.stderr


CASES = {
    "malformed META-URL": ("strata.Client('no-scheme')", "ValueError", "malformed META-URL"),
    "unknown engine": ("strata.Client('ftp://x/y')", "ValueError", "unknown metadata engine"),
    "unreachable engine": ("strata.Client('redis://127.0.0.1:1/0')", "ConnectionError",
                           "cannot open metadata engine"),
    "missing volume": ("strata.Client('sqlite3://' + tmp + '/none.db')", "FileNotFoundError",
                       "no volume here"),
    "bad option": ("strata.Client('sqlite3://' + tmp + '/none.db', cache_size='lots')",
                   "ValueError", "cache_size"),
    "unknown option": ("strata.Client(url, colour='blue')", "ValueError", "unknown option"),
    "closed file": ("f = c.open('/x', 'wb'); f.close(); f.write(b'1')", "ValueError", "closed"),
    "closed client": ("c.close(); c.open('/x', 'wb')", "ValueError", "closed client"),
    "bad mode": ("c.open('/x', 'rw')", "ValueError", "invalid mode"),
    "path type": ("c.open(42)", "TypeError", ""),
    "url type": ("strata.Client(None)", "TypeError", "meta_url"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_raises_cleanly(case, sqlite_volume):
    code, exc, message = CASES[case]
    status, out, err = run_python(f"""
        import strata, sys
        tmp = {str(sqlite_volume.work)!r}
        url = {sqlite_volume.meta_url!r}
        c = strata.Client(url, cache_size=0) if 'c.' in {code!r} else None
        try:
            {code}
        except Exception as e:
            print(type(e).__name__ + ': ' + str(e))
            sys.exit(0)
        print('no exception')
    """)
    assert status == 0, f"interpreter died with {status}: {err}"
    assert out.startswith(exc + ":"), out
    assert message in out, out
    assert "Traceback" not in err and "panicked" not in err, err
