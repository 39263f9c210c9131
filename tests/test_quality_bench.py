"""bench/quality.py stays runnable: every variant of its grid names a real SearchConfig field with a valid value."""

from __future__ import annotations

import importlib.util

from conftest import FIXTURES, ROOT

from refind_cli.evaluate import EvalSettings, evaluate

EVAL = FIXTURES / "eval"


def load_bench():
    spec = importlib.util.spec_from_file_location("quality_bench", ROOT / "bench" / "quality.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quality_grid_runs_on_fixtures():
    quality = load_bench()
    for dataset, path, settings in [
        ("memdaily", EVAL / "memdaily", EvalSettings(limit=3)),
        ("longmemeval-rf", EVAL / "longmemeval_small.json", EvalSettings(role_faithful=True)),
    ]:
        systems = quality.systems_for(dataset)
        report = evaluate(path, settings=settings, systems=systems)
        assert list(report["systems"]) == list(systems)
        lines = quality.table(report)
        assert sum(line.startswith("| ") for line in lines) == len(systems) + 1  # header + one row each
        assert any(line.startswith("Best SearchConfig variant") for line in lines)


def test_quality_grid_option_parses_variant_sets():
    quality = load_bench()
    assert quality.parse_grid(";neighbours=1,neighbour_chars=500;overlap=repeat") == [
        (),
        ("neighbours=1", "neighbour_chars=500"),
        ("overlap=repeat",),
    ]
    systems = quality.systems_for("locomo", quality.parse_grid(";neighbours=0"), extras=False)
    assert list(systems) == ["baseline (plain BM25)", "defaults", "neighbours=0"]


def test_ceiling_and_probes_run_on_the_realtalk_fixture(tmp_path):
    import subprocess
    import sys

    misses = tmp_path / "misses.jsonl"
    run = [sys.executable, str(ROOT / "bench" / "ceiling.py"), "--dataset", str(EVAL / "realtalk")]
    out = subprocess.run([*run, "--misses", str(misses)], capture_output=True, text=True, check=True).stdout
    assert "| refind |" in out and "| plain BM25 |" in out and "Lexical ceiling at 8k" in out
    probe = [sys.executable, str(ROOT / "bench" / "probes.py"), "--dataset", str(EVAL / "realtalk")]
    out = subprocess.run([*probe, "--misses", str(misses)], capture_output=True, text=True, check=True).stdout
    assert "| defaults, all questions |" in out and "Questions with a message both systems miss" in out
