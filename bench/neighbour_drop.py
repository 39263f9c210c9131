"""Prototype, measured before the engine has it: DROP neighbour messages longer than N characters instead of
cutting them to N (SearchConfig.neighbour_chars cuts). Patches a copy of ``search._render`` for the run only;
refuses to run (assertion) once ``_render`` no longer contains the cutting code it replaces.

    .venv/bin/python bench/neighbour_drop.py PATH [--limit N]

Prints a markdown table: plain BM25, refind's defaults, neighbour_chars cutting, and dropping at 300/500/1000.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from quality import table  # noqa: E402

from refind_cli import search  # noqa: E402
from refind_cli.evaluate import BaselineBM25, EvalSettings, evaluate, refind_bm25, search_config  # noqa: E402

CUT = """                if not is_anchor and cfg.neighbour_chars is not None and len(text) > cfg.neighbour_chars:
                    text = text[: cfg.neighbour_chars].rstrip() + " …\""""
DROP = """                if not is_anchor and cfg.neighbour_chars is not None and len(text) > cfg.neighbour_chars:
                    continue"""


def dropping_render():
    src = inspect.getsource(search._render)
    assert CUT in src, "search._render changed: this prototype no longer applies"
    namespace = dict(vars(search))
    exec(src.replace(CUT, DROP), namespace)  # noqa: S102 — a benchmark-only patch of our own function
    return namespace["_render"]


def variant(pairs: tuple[tuple[str, str], ...], render=None):
    inner = refind_bm25(search_config(pairs))

    def run(store, **kw):
        original = search._render
        search._render = render or original
        try:
            return inner(store, **kw)
        finally:
            search._render = original

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path")
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    drop = dropping_render()
    systems = {"baseline (plain BM25)": BaselineBM25(), "defaults": variant(())}
    systems["cut neighbours to 500 (neighbour_chars=500)"] = variant((("neighbour_chars", "500"),))
    for n in (2, 1):
        for chars in (300, 500, 1000):
            systems[f"drop neighbours > {chars} chars, neighbours={n}"] = variant(
                (("neighbours", str(n)), ("neighbour_chars", str(chars))), drop)
    report = evaluate(args.path, settings=EvalSettings(limit=args.limit), systems=systems)
    print("\n".join(table(report)))


if __name__ == "__main__":
    main()
