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


def test_worst_set_table_names_each_variants_weakest_set():
    quality = load_bench()

    def report(name, plain, defaults, variant, instructed):
        def system(r):
            return {"recall": {"2000": r[0], "8000": r[1], "32000": r[2]}}

        return {
            "dataset": name,
            "systems": {
                "baseline (plain BM25)": system(plain),
                "defaults": system(defaults),
                "neighbours=0": system(variant),
                "defaults + answer one word": system(instructed),  # another question: not a ranking to choose
                "defaults, options not passed": system((0.0, 0.0, 0.0)),
            },
        }

    reports = [
        report("a", (0.40, 0.50, 0.60), (0.45, 0.62, 0.70), (0.39, 0.65, 0.71), (0.0, 0.0, 0.0)),
        report("b", (0.50, 0.60, 0.70), (0.52, 0.64, 0.80), (0.55, 0.70, 0.69), (0.0, 0.0, 0.0)),
        # plain BM25 finds 99% at 8k and 32k: no room for a margin there, so only its 2k counts
        report("c", (0.94, 0.99, 0.99), (0.95, 1.00, 1.00), (0.96, 0.98, 0.99), (0.0, 0.0, 0.0)),
    ]
    rows = quality.worst_sets(reports)
    assert rows[2:4] == ["| variant | R@2k | R@8k | R@32k | below plain BM25 |", "|---|---|---|---|---|"]
    assert rows[4] == "| defaults | +1.0 (c) | +4.0 (b) | +10.0 (a) | none |"
    assert rows[5] == "| neighbours=0 | -1.0 (a) | +10.0 (b) | -1.0 (b) | a 2k -1.0; b 32k -1.0; c 8k -1.0 |"
    assert len(rows) == 7 and rows[6] == ""
    assert quality.worst_sets(reports[:1]) == []  # one set: its own table says it all
