"""`refind eval` on labelled sets that are not what they claim: one error line and exit 2 (invalid input), never a
traceback, naming where in the set and what is wrong in words."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES

EVAL = FIXTURES / "eval"


def _locomo(tmp_path, question):
    data = json.loads((EVAL / "locomo_small.json").read_text(encoding="utf-8"))
    data[0]["qa"][0]["question"] = question
    path = tmp_path / "set.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _longmemeval(tmp_path, *types):
    item = json.loads((EVAL / "longmemeval_small.json").read_text(encoding="utf-8"))[0]
    items = [{**item, "question_id": f"q{i}", "question_type": t} for i, t in enumerate(types)]
    path = tmp_path / "set.json"
    path.write_text(json.dumps(items), encoding="utf-8")
    return path


@pytest.mark.parametrize("question", [5, None, ["where"]])
def test_a_question_that_is_not_text_is_one_error_line(cli, tmp_path, question):
    r = cli("eval", str(_locomo(tmp_path, question)), "--json")
    assert r.exit_code == 2, r.output
    assert r.output.startswith("error: ") and r.output.count("\n") == 1
    assert "item 0's qa[0]: question conv-a:q0: its text must be a string" in r.output
    assert r.output.endswith(": is this a LoCoMo file? (its shape says so; --format reads it as another)\n")
    assert "Error" not in r.output


def test_question_types_of_two_kinds_are_one_error_line_and_a_null_one_is_unknown(cli, tmp_path):
    r = cli("eval", str(_longmemeval(tmp_path, "single-session-user", 3)), "--json")
    assert r.exit_code == 2 and "its category must be a string, got int" in r.output  # sorting them raised
    r = cli("eval", str(_longmemeval(tmp_path, None)), "--json")
    assert r.exit_code == 0, r.output
    assert list(json.loads(r.output)["systems"]["refind"]["by_category"]) == ["?"]


def test_json_nested_past_the_readers_depth_is_one_error_line(cli, tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 200_000 + "]" * 200_000, encoding="utf-8")
    r = cli("eval", str(path), "--format", "locomo")
    assert r.exit_code == 2 and r.output.count("\n") == 1
    assert "cannot read it as JSON: it nests deeper than Python's JSON reader goes" in r.output


def test_a_set_holding_an_unpaired_surrogate_names_the_file_not_an_argument(cli, tmp_path):
    data = json.loads((EVAL / "locomo_small.json").read_text(encoding="utf-8"))
    turn = data[0]["conversation"]["session_1"][0]
    turn["text"] += " \ud800"  # written as the escape \ud800: JSON allows it, Unicode text does not
    path = tmp_path / "set.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    r = cli("eval", str(path), "--json")
    assert r.exit_code == 2, r.output  # invalid input (once "an argument holds bytes that are not UTF-8 text")
    assert "the set holds text that is not Unicode (an unpaired UTF-16 surrogate, '\\ud800'" in r.output


def test_a_file_name_that_is_not_utf8_is_named_as_the_file_name(cli, tmp_path):
    folder = tmp_path / "memdaily"
    folder.mkdir()
    # Python hands the byte 0xff of a file name over as a lone surrogate; MemDaily's user ids are file names
    (folder / "simple\udcff.json").write_bytes((EVAL / "memdaily" / "01_simple_items.json").read_bytes())
    r = cli("eval", str(folder), "--format", "memdaily", "--limit", "1")
    said = " ".join(r.output.split())
    assert r.exit_code == 2 and r.output.count("\n") == 1, said
    assert "escaped in its JSON" not in said  # it is in no JSON: the file's name holds it
    assert (
        "replaying user 'simple\\udcff:0': the user id, the name of a file of the set or an id in it, is not " in said
    )


# ---- a probe of round 17 -------------------------------------------------------------------------------------------


def test_a_number_past_4300_digits_is_one_error_line(cli, tmp_path):
    data = json.loads((EVAL / "locomo_small.json").read_text(encoding="utf-8"))
    raw = json.dumps(data).replace('"qa"', '"big": ' + "9" * 5_000 + ', "qa"', 1)
    path = tmp_path / "set.json"
    path.write_text(raw, encoding="utf-8")
    r = cli("eval", str(path), "--json")
    assert (
        r.exit_code == 2 and r.output == f"error: {path}: cannot read it as JSON: a number of more than 4,300 digits\n"
    )
    data[0]["conversation"]["session_" + "1" * 5_000] = []  # int() of a session's number
    path.write_text(json.dumps(data), encoding="utf-8")
    r = cli("eval", str(path), "--json")
    assert r.exit_code == 2 and f"{path}: item 0 holds a number of more than 4,300 digits: is this a LoCoMo" in r.output


def test_a_user_whose_turns_hold_no_word_is_found_by_nobody_not_a_traceback(cli, tmp_path):
    # bm25s refused a corpus without one token ("max() arg is an empty sequence"): the baseline's index now is none
    data = json.loads((EVAL / "locomo_small.json").read_text(encoding="utf-8"))
    for key, turns in data[0]["conversation"].items():
        if key.startswith("session_") and isinstance(turns, list):
            for turn in turns:
                turn["speaker"], turn["text"] = "A", "is it the"  # stop-words alone ("A: is it the")
    path = tmp_path / "set.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    r = cli("eval", str(path), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["systems"]["baseline"]["recall"]


@pytest.mark.parametrize("role_faithful", [False, True])
def test_a_longmemeval_turn_that_is_not_text_is_one_error_line(cli, tmp_path, role_faithful):
    item = json.loads((EVAL / "longmemeval_small.json").read_text(encoding="utf-8"))[0]
    item["haystack_sessions"][0][0]["content"] = 123
    path = tmp_path / "set.json"
    path.write_text(json.dumps([item]), encoding="utf-8")
    r = cli("eval", str(path), "--json", *(["--role-faithful"] if role_faithful else []))
    assert r.exit_code == 2, r.output
    assert (
        f"{path}: item 0's haystack_sessions[0][0]: a turn's role and content are strings: is this a LongMemEval file?"
        in " ".join(r.output.split())
    )


def test_a_memdaily_target_given_as_one_string_is_that_message_not_its_letters(tmp_path):
    # a probe of round 17: "m1" was read letter by letter, and "1" named another message — scored, silently wrong
    from refind_cli import datasets

    timeline = {
        "tid": 0,
        "message_list": [
            {"mid": "m1", "message": "我把雨伞放在了客厅里。", "time": "2024年04月01日 周一 20:15", "place": "北京"},
            {"mid": "1", "message": "其他", "time": "2024年04月01日 周一 20:16", "place": "北京"},
        ],
        "question_list": [
            {
                "qid": 0,
                "question": "我把雨伞放在哪里了？",
                "answer": "客厅",
                "target_step_id": "m1",
                "choices": {"A": "客厅"},
            }
        ],
    }
    folder = tmp_path / "md"
    folder.mkdir()
    (folder / "01_simple_items.json").write_text(json.dumps([timeline], ensure_ascii=False), encoding="utf-8")
    (question,) = [q for sample in datasets.load(folder, "memdaily") for q in sample.questions]
    assert question.evidence == ("我把雨伞放在了客厅里。",)


def test_two_files_of_one_name_in_a_folder_are_refused_naming_both(cli, tmp_path):
    # a probe of round 17: x.json and x.json.gz were one user, replayed twice: a conflict naming no file
    import gzip
    import shutil

    folder = tmp_path / "rt"
    folder.mkdir()
    chat = next((EVAL / "realtalk").glob("*.json"))
    shutil.copy(chat, folder / "chat.json")
    (folder / "chat.json.gz").write_bytes(gzip.compress(chat.read_bytes()))
    r = cli("eval", str(folder), "--format", "realtalk", "--json")
    assert r.exit_code == 2
    assert " ".join(r.output.split()) == (
        f"error: {folder}: chat.json and chat.json.gz would be one user ('chat'); keep one"
    )


# ---- where in the set (round 18) -----------------------------------------------------------------------------------


def _broken_copy(tmp_path, name, damage):
    """A copy of fixtures/eval/NAME (a file or a folder of files) with DAMAGE applied to one file's data."""
    source = EVAL / name
    if source.is_dir():
        folder = tmp_path / name
        folder.mkdir()
        files = sorted(source.glob("*.json"))
        for file in files:
            (folder / file.name).write_bytes(file.read_bytes())
        target = folder / files[0].name
    else:
        folder = target = tmp_path / name
    data = json.loads((EVAL / name if not source.is_dir() else source / target.name).read_text(encoding="utf-8"))
    damage(data)
    target.write_text(json.dumps(data), encoding="utf-8")
    return folder


def _drop(mapping, key):
    del mapping[key]


@pytest.mark.parametrize(
    ("name", "damage", "where"),
    [
        (
            "locomo_small.json",
            lambda d: _drop(d[0]["conversation"]["session_1"][1], "speaker"),
            "item 0's conversation.session_1[1] has no speaker",
        ),
        ("locomo_small.json", lambda d: _drop(d[0]["qa"][2], "question"), "item 0's qa[2] has no question"),
        (
            "longmemeval_small.json",
            lambda d: _drop(d[0]["haystack_sessions"][2][2], "role"),
            "item 0's haystack_sessions[2][2] has no role",
        ),
        (
            "longmemeval_small.json",
            lambda d: d[0]["haystack_sessions"][1].__setitem__(0, {"role": "user", "content": 5}),
            "item 0's haystack_sessions[1][0]: a turn's role and content are strings",
        ),
        (
            "memdaily",
            lambda d: _drop(d[3]["message_list"][1], "mid"),
            "01_simple_items.json item 3's message_list[1] has no mid",
        ),
        (
            "memdaily",
            lambda d: _drop(d[21]["question_list"][0], "question"),
            "01_simple_items.json item 21's question_list[0] has no question",
        ),
        (
            "realtalk",
            lambda d: _drop(d["session_2"][2], "speaker"),
            "Chat_1_Ana_Ben.json's session_2[2] has no speaker",
        ),
        ("realtalk", lambda d: d["qa"].__setitem__(4, None), "Chat_1_Ana_Ben.json's qa[4] is null, not an object"),
        # a category as a string left every question out as of an unscored category "1", exit 0 (a probe)
        (
            "locomo_small.json",
            lambda d: d[0]["qa"][0].__setitem__("category", "1"),
            "item 0's qa[0]: a question's category is a whole number, got \"1\"",
        ),
        (
            "realtalk",
            lambda d: d["qa"][1].__setitem__("category", 2.0),
            "Chat_1_Ana_Ben.json's qa[1]: a question's category is a whole number, got 2.0",
        ),
        # a session that is not a list was left out, its turns with it, and nothing said so (a probe)
        (
            "locomo_small.json",
            lambda d: d[0]["conversation"].__setitem__("session_1", {"0": {"speaker": "A", "text": "hi"}}),
            "item 0's conversation.session_1: a session is a list of turns, got dict",
        ),
        (
            "realtalk",
            lambda d: d.__setitem__("session_2", "see the other file"),
            "Chat_1_Ana_Ben.json's session_2: a session is a list of messages, got str",
        ),
        # has_answer "false" is true to Python: every turn became evidence, recall silently wrong (a probe)
        (
            "longmemeval_small.json",
            lambda d: d[0]["haystack_sessions"][0][0].__setitem__("has_answer", "false"),
            "item 0's haystack_sessions[0][0]: a turn's has_answer is true or false, got \"false\"",
        ),
    ],
)
def test_a_misshapen_set_names_where_in_it(cli, tmp_path, name, damage, where):
    # (it named only the file: "not a locomo file as expected (KeyError: 'speaker')", in a set of 10,000 turns)
    path = _broken_copy(tmp_path, name, damage)
    r = cli("eval", str(path), "--json")
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert r.output.startswith(f"error: {path}: {where}: is this a "), r.output
    assert r.output.endswith(" file? (its shape says so; --format reads it as another)\n"), r.output


@pytest.mark.parametrize("fmt", [None, "locomo", "longmemeval", "memdaily", "realtalk"])
def test_a_missing_set_is_invalid_input_whether_or_not_its_format_is_given(cli, tmp_path, fmt):
    # a probe of round 25: with --format the file was read without detect_format's check (exit 1, Python's errno text)
    missing = tmp_path / "nope.json"
    r = cli("eval", str(missing), "--mode", "bm25", *(["--format", fmt] if fmt else []))
    assert r.exit_code == 2 and r.output == f"error: {missing}: no such file or folder\n", r.output


def _gz_of_the_set(tmp_path, damage):
    import gzip

    data = bytearray(gzip.compress((EVAL / "locomo_small.json").read_bytes()))
    path = tmp_path / "set.json.gz"
    path.write_bytes(damage(data))
    return path


def _flipped(data):
    middle = len(data) // 2
    data[middle : middle + 8] = bytes(b ^ 0xA5 for b in data[middle : middle + 8])
    return bytes(data)


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda data: bytes(data[: len(data) // 2]), "the .gz file ends before its compressed data does"),  # "Aborted!"
        (_flipped, "the .gz file's compressed data is damaged (Error -3 while decompressing data: "),  # a traceback
    ],
)
@pytest.mark.parametrize("fmt", [None, "locomo"])
def test_a_damaged_gz_set_is_one_error_line_naming_it(cli, tmp_path, damage, said, fmt):
    path = _gz_of_the_set(tmp_path, damage)
    r = cli("eval", str(path), *(["--format", fmt] if fmt else []))
    assert r.exit_code == 1, r.output  # (a file that cannot be read, as `refind add` of a damaged .gz)
    assert r.output.startswith(f"error: {path}: cannot read it: {said}") and r.output.count("\n") == 1, r.output


def test_a_set_of_no_question_to_score_is_refused_not_measured_as_recall_0(cli, tmp_path):
    data = json.loads((EVAL / "locomo_small.json").read_text(encoding="utf-8"))
    for sample in data:
        for qa in sample["qa"]:
            qa["evidence"] = []
    path = tmp_path / "set.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    r = cli("eval", str(path), "--json")
    assert r.exit_code == 2, r.output  # it printed recall 0.000 for both systems, 0 questions, exit 0
    assert r.output == (
        f"error: {path}: no question to score, read as LoCoMo (1 locomo category 5 (not scored); 6 locomo question "
        "without evidence): nothing to measure; is this the labelled set, and of this format? (--format)\n"
    )
    path.write_text("[]", encoding="utf-8")
    r = cli("eval", str(path), "--format", "locomo")
    assert r.exit_code == 2 and "read as LoCoMo (the set holds none): nothing to measure" in r.output, r.output


@pytest.mark.parametrize("fmt", ["memdaily", "realtalk"])
def test_a_misshapen_file_given_alone_is_named_once(cli, tmp_path, fmt):
    # a folder's fault names the file in it; a file given itself was named twice ("X.json: X.json item 0 has no tid")
    path = tmp_path / "X.json"
    path.write_text('[{"x": 1}]' if fmt == "memdaily" else '{"session_2": "see the other file"}', encoding="utf-8")
    r = cli("eval", str(path), "--format", fmt)
    where = "item 0 has no tid" if fmt == "memdaily" else "session_2: a session is a list of messages, got str"
    assert r.exit_code == 2 and r.output.startswith(f"error: {path}: {where}: is this a "), r.output
