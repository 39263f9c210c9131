"""Spellings of a question's words that the user wrote another way (variants.py), on toy corpora ranked by hand."""

from __future__ import annotations

import random

import numpy as np
import pytest
from helpers import T0, add

from refind_cli import search as S
from refind_cli import variants
from refind_cli.expand import max_edits
from refind_cli.index import bm25_scores, build_index
from refind_cli.store import StoredMessage
from refind_cli.tokenize import analyze
from refind_cli.turns import Turn


def _index(texts):
    turns = []
    for i, text in enumerate(texts):
        m = StoredMessage(i + 1, f"m{i}", "u", "s", "r", i, "user", text, None, 1_000)
        turns.append(Turn(m.id, "s", (m,)))
    return build_index(turns, tokenize=lambda turn: analyze(turn.messages[0].content))


def _terms(texts, question):
    return variants.variant_terms(_index(texts), question, analyze(question))


def _cuts(texts, question):
    return variants.split(variants.words(question), variants.present_in(_index(texts)))


def test_two_words_of_the_question_match_the_compound_the_user_wrote():
    texts = ["Mein Zahnarzttermin ist am Dienstag", "Die Stromrechnung ist hoch", "Der Termin beim Arzt"]
    assert _terms(texts, "Wann ist der Zahnarzt Termin?") == [("zahnarzttermin", 1.0)]
    assert _terms(texts, "Strom-Rechnung") == [("stromrechnung", 1.0)]
    # with a linking s, and a word with accents (its token and its accent-free twin: the first is asked)
    assert _terms(["Verjaardagsfeest op zaterdag"], "verjaardag feest") == [("verjaardagsfeest", 1.0)]
    assert _terms(["Födelsedagskalas på lördag"], "födelsedag kalas") == [("födelsedagskala", 1.0)]
    # not across punctuation, not with a stop-word or a word under 3 letters, not a compound nobody wrote
    assert _terms(texts, "Zahnarzt. Termin") == []
    assert _terms(["an apple", "theapple"], "the apple") == []
    assert _terms(texts, "Strom Termin") == []
    # an English particle beside a word, at half weight ("in" only after it: "in San Francisco" is no "insane")
    assert _terms(["My login for the portal"], "log in details") == [("login", 0.5)]
    assert _terms(["an ongoing project"], "on going") == [("ongo", 0.5)]
    assert _terms(["that was insane"], "in sane") == []
    assert _terms(["My login for the portal"], "log. In") == []  # (not across punctuation)


def test_two_words_of_the_question_apart_or_in_the_other_order_match_the_compound_when_one_is_not_the_users():
    texts = ["Ich habe meinen Zahnarzttermin verschoben", "Die Stromrechnung ist hoch"]
    assert _terms(texts, "Termin beim Zahnarzt?") == [("zahnarzttermin", 1.0)]  # one word between, the other order
    assert _terms(texts, "Rechnung Strom") == [("stromrechnung", 1.0)]  # adjacent, the other order
    assert _terms(texts, "Strom und Rechnung") == [("stromrechnung", 1.0)]  # one word between, in their order
    assert _terms(texts, "Termin mit dem Zahnarzt") == []  # two words between: too far
    assert _terms(texts, "Termin. Beim Zahnarzt") == []  # (not across punctuation)
    # both words the user's own: their turns match already, and no pair is tried
    assert _terms([*texts, "ein Termin", "beim Zahnarzt"], "Termin beim Zahnarzt") == []


def test_a_join_also_asks_its_spellings_with_umlauts_typed_as_two_letters():
    texts = ["Meine Steuererklärung ist fertig", "Die Steuer ist hoch"]
    assert _terms(texts, "Steuer Erklaerung") == [("steuererklärung", 1.0)]
    assert _terms(texts, "Erklaerung der Steuer") == [("steuererklärung", 1.0)]  # (apart, in the other order)
    # each choice of them: "steuer"'s "ue" is no ü; none for a word of more than MAX_TYPED_UMLAUTS
    assert variants.typed_umlauts("steuererklaerung") == ["steürerklaerung", "steuererklärung", "steürerklärung"]
    assert variants.typed_umlauts("haus") == variants.typed_umlauts("aeoeueae") == []
    assert _terms(texts, "Steuererklaerung") == []  # (one word: fuzzy matching's, one edit from "steuererklarung")
    # only when the user never wrote one of the two words: they type "ae" themselves
    assert _terms([*texts, "Die Erklaerung"], "Steuer Erklaerung") == []


def test_a_word_that_starts_with_an_umlaut_typed_as_two_letters_matches_the_umlaut():
    texts = ["Die Äpfel sind reif", "Das Öl ist teuer", "Übung macht den Meister", "Die Übergröße passt", "Apfel"]
    assert _terms(texts, "aepfel") == [("äpfel", 1 - 1 / 6)]  # (weighted as one edit of "aepfel")
    assert _terms(texts, "wo ist das Oel") == [("öl", 1 - 1 / 3)]
    assert _terms(texts, "Uebung") == [("übung", 1 - 1 / 6)]
    assert _terms(texts, "uebergroesse") == [("übergröss", 1 - 1 / 11)]  # (with the other pairs, each choice)
    # only a word the user never wrote: one who types "Aepfel" themselves is not asked for "Äpfel"
    assert _terms([*texts, "Aepfel kaufen"], "aepfel") == []
    # an English word: its spelling with an umlaut is no word the user wrote, and "queue", "toe" start with none
    english = ["the Ärger was real", "Öl", "que sera", "to be", "aerob"]
    assert _terms(english, "aerobic queue toe oedema") == []


def test_a_hindi_compound_is_joined_and_split_between_whole_clusters():
    assert [m.group() for m in variants.words("मेरी नोट बुक कहाँ है।")] == ["मेरी", "नोट", "बुक", "कहां", "है"]
    assert _terms(["मेरी नोटबुक कहाँ है"], "नोट बुक") == [("नोटबुक", 1.0)]
    assert _cuts(["नोट बुक खरीदी", "नोट"], "नोटबुक") == [[("नोट", "बुक")]]
    # never before a vowel sign (कित|ाबघर) nor after a virama (डाक्|टर); a Latin word anywhere
    assert list(variants.cut_points("किताबघर")) == [4] and list(variants.cut_points("डाक्टरसाहब")) == [5, 6]
    assert list(variants.cut_points("zahnarzt")) == [3, 4, 5]


def test_a_compound_the_user_never_wrote_is_cut_into_two_words_they_did_most_evenly_first():
    texts = ["Termin beim Zahnarzt", "ein neuer Termin", "Geburtstag und Feier", "ihr Geburt", "the car", "a toon"]
    assert _cuts(texts, "Zahnarzttermin?") == [[("zahnarzt", "termin")]]
    # the German linking s goes with the stemmer ("geburtstags" is "geburtstag"); "geburt|stagsfeier" holds no word
    assert _cuts(texts, "Geburtstagsfeier") == [[("geburtstag", "feier")]]
    both = ["neuer Termin", "Zahn", "Arzttermin", "Zahnarzt"]  # two cuts: the more even first
    assert _cuts(both, "Zahnarzttermin") == [[("zahnarzt", "termin"), ("zahn", "arzttermin")]]
    # a word the user wrote is never split, nor one whose parts they did not both write
    assert _cuts(["zahnarzttermin", "zahnarzt", "termin"], "zahnarzttermin") == []
    assert _cuts(texts, "Zahnarztpraxis") == []
    assert _cuts(texts, "cartoon") == [[("car", "toon")]]  # a cut; it scores only where both are said (below)


def test_a_split_word_scores_only_the_turns_holding_both_parts_at_half_weight_each():
    idx = _index(["Termin beim Zahnarzt", "ein Termin", "Zahnarzt", "the car and the toon", "my car"])
    got = variants.variant_scores(idx, "Zahnarzttermin", analyze("Zahnarzttermin"))
    want = 0.5 * bm25_scores(idx, ["zahnarzt", "termin"])
    assert got is not None and np.allclose(got, np.where(np.arange(5) == 0, want, 0)) and got[0] > 0
    assert np.flatnonzero(variants.variant_scores(idx, "cartoon", ["cartoon"])).tolist() == [3]
    idx = _index(["my car", "a toon"])  # never said together: no cut scores
    assert variants.variant_scores(idx, "cartoon", ["cartoon"]) is None


def test_a_number_and_a_word_written_apart_match_them_glued_and_glued_ones_match_them_apart():
    texts = ["Dentist appointment at 3pm", "I bought an iphone15", "the 3 kids at 5 pm"]
    assert _terms(texts, "at 3 pm?") == [("3pm", 1.0)]
    assert _terms(texts, "iphone 15 case") == [("iphone15", 1.0)]
    assert _terms(texts, "at 3, pm") == []  # (not across punctuation)
    assert _terms(["at 3pm"], "at 3pm") == []  # the question's own word: nothing to add
    # the other way: a glued token nobody wrote, cut into its number and its word when a turn holds both
    present = variants.present_in(_index(["meet at 3 pm", "3 cats", "pm me"]))
    assert variants.number_cuts(analyze("3pm meeting"), present) == [[("3", "pm")]]
    assert variants.number_cuts(analyze("iphone15"), variants.present_in(_index(["iphone 15"]))) == [[("15", "iphon")]]
    assert variants.number_cuts(analyze("3pm"), variants.present_in(_index(["at 3pm", "3 pm"]))) == []  # (written)
    assert variants.number_cuts(analyze("4pm"), present) == []  # (no turn holds 4)


def test_a_dates_day_and_month_without_their_leading_zero_match_them_with_it():
    texts = ["Kaution bis zum 01.03.2024 überweisen", "Urlaub vom 15.07.2024", "Flug am 2024-03-01"]
    assert _terms(texts, "1.3.2024") == [("01", 1.0), ("03", 1.0)]
    assert _terms(texts, "on 3/1/2024?") == [("03", 1.0), ("01", 1.0)]  # (either order: both are asked)
    assert _terms(texts, "2024-3-1") == [("03", 1.0), ("01", 1.0)]
    assert _terms(texts, "1.3.24") == [("01", 1.0), ("03", 1.0)]
    assert _terms(["version 01.03.05"], "1.3.5") == []  # no year: no date
    assert _terms(texts, "build 2.1.3.2024") == _terms(texts, "build 1.3.2024.7") == []  # nor part of a longer run
    assert _terms(["bis zum 1.3.2024", "seit 2001"], "01.03.2024") == []  # not the other way: most chats hold a 1
    idx = _index(texts)
    scores = variants.variant_scores(idx, "1.3.2024", analyze("1.3.2024"))
    assert scores is not None and np.flatnonzero(scores).tolist() == [0, 2]


def test_a_hebrew_or_arabic_word_matches_it_with_a_clitic_prefix_or_without_one():
    texts = ["בשבוע הבא אני טס לאילת", "הבת שלי בגן", "نسيت كلمة السر الخاصة بالبريد", "גן חיות"]
    assert _terms(texts, "אילת") == [("לאילת", 0.5)]  # to Eilat
    assert _terms(["קניתי לחם ומהחנות החדשה"], "חנות") == [("ומהחנות", 0.5)]  # and + from + the: stacked, in order
    assert _terms(["הוחנות"], "חנות") == []  # (not in that order: "the" before "and")
    assert _terms(["כשבחנות היה תור"], "חנות") == [("כשבחנות", 0.5)]  # when + in
    assert _terms(texts, "הבת") == []  # the question's own word: nothing to add
    assert _terms(texts, "הגן") == [("גן", 0.5), ("בגן", 0.5)]  # "the garden": the bare word, and in the garden
    # Arabic: the stemmer takes a bare noun's ب for a prefix (بريد → ريد), and keeps بالبريد's
    assert analyze("بريد") == ["ريد"] and analyze("بالبريد") == ["بريد"]
    assert _terms(texts, "بريد") == [("بريد", 0.5)]


def test_an_arabic_word_matches_the_stem_its_prefixed_forms_are_given():
    # by hand: Snowball's Arabic stemmer strips a final ا after ال but not on the bare word, and keeps و before ا:
    # the question's الشاورما is شاورما, the user's شاورما is شاورم and والشاورما is والشاورم — no token in common
    texts = ["المطعم جنب الشغل والشاورما بـ٢٥ ريال", "أكلت شاورما وتعبت", "فاتورة الكهرباء ٤٥٠ ريال"]
    assert analyze("الشاورما") == ["شاورما"] and analyze(texts[1])[1] == "شاورم" and analyze(texts[0])[-3] == "والشاورم"
    assert _terms(texts, "الشاورما") == [("شاورم", 0.5), ("والشاورم", 0.5)]
    assert _terms(texts, "الكهرباء") == []  # the question's own token: nothing to add


def test_a_persian_word_with_a_glued_pronoun_matches_the_word_the_user_wrote():
    # by hand: گوشیم "my phone" is no token of the turns; the user wrote گوشی‌ام (the word, a zero-width non-joiner,
    # ام "my"), whose گوشی the analyzer stems to گوش; کتابشان "their book" finds کتاب; a word the user wrote, or one
    # whose rest is under two letters, adds nothing
    texts = ["گوشی‌ام خراب شد", "این کتاب خوب است"]
    assert analyze("گوشی") == ["گوش"]
    assert _terms(texts, "گوشیم کجاست") == [("گوش", 0.5)]
    assert _terms(texts, "کتابشان") == [("كتاب", 0.5)]  # (the analyzer writes Persian ک as Arabic ك)
    assert _terms(texts, "کتاب") == []
    assert _terms(["ام"], "شم") == []


def test_a_hindi_loanword_matches_its_other_vowel_spelling_only_when_the_user_never_wrote_it():
    assert _terms(["डॉक्टर ने कहा"], "डाक्टर") == [("डॉक्टर", 1 - 1 / 6)]
    assert _terms(["डॉक्टर ने कहा", "डाक्टर आया"], "डाक्टर") == []  # (बाल "hair" never finds बॉल "ball")


def test_a_words_token_read_from_the_stem_cache_is_what_the_analyzer_gives():
    rng = random.Random(5)
    words = [
        "the",
        "zahnarzttermin",
        "running",
        "and",
        "a" * 70,
        *("".join(rng.choices("abeinorstz", k=rng.randrange(1, 12))) for _ in range(3000)),
    ]
    for word in words:
        tokens = analyze(word)
        assert variants._spaced_token(word) == (tokens[0] if tokens else None), word


def test_a_huge_question_asks_for_a_bounded_number_of_variants():
    # review: a 100,000-character Devanagari token asked for 50,000 copies of itself (11.5 GB), 11,111 distinct
    # Hebrew tokens for 59 prefixed copies each; and words of any length were remembered by the token cache
    nobody = variants.present_in(_index(["nothing here"]))
    assert variants.loan_vowels(analyze("का" * 10_000), nobody) == []
    hebrew = [f"וכשב{a}{b}{c}" for a in "אבגדה" for b in "אבגדה" for c in "אבגדה"]  # 125 distinct tokens
    assert variants.clitics(hebrew) == variants.clitics(hebrew[: variants.MAX_WORDS]) != []  # the first 64 only
    assert variants.clitics(["ב" * (variants.MAX_WORD_CHARS + 1)]) == []
    assert [m.group() for m in variants.words(" ".join(["word"] * 500))] == ["word"] * variants.MAX_WORDS
    assert [m.group() for m in variants.words("x" * 41 + " short words")] == ["short", "words"]


def test_fuzzy_matching_reads_the_alphabets_but_not_abjads_or_abugidas():
    assert [max_edits(w) for w in ("львів", "κινητο", "բարեւ", "გამარჯობა")] == [1, 2, 1, 2]
    assert [max_edits(w) for w in ("לאילת", "بالبريد", "डाक्टर", "北京北京")] == [0, 0, 0, 0]


def test_the_variants_scores_are_their_terms_bm25_scores_weighed():
    idx = _index(["Mein Zahnarzttermin ist am Dienstag", "Termin beim Zahnarzt", "Dienstag"])
    joined = variants.variant_scores(idx, "Zahnarzt Termin", analyze("Zahnarzt Termin"))
    assert joined is not None and np.allclose(joined, bm25_scores(idx, ["zahnarzttermin"]))
    assert variants.variant_scores(idx, "Dienstag", analyze("Dienstag")) is None


@pytest.mark.parametrize(
    ("messages", "question"),
    [
        (["Mein Zahnarzttermin ist am Dienstag um 10 Uhr", "Die Stromrechnung ist hoch"], "Zahnarzt Termin"),
        (["Termin beim Zahnarzt am Dienstag", "Die Stromrechnung ist hoch"], "Zahnarzttermin"),
        (["Ich habe meinen Zahnarzttermin verschoben", "Die Stromrechnung ist hoch"], "Termin beim Zahnarzt"),
        (["My login for the insurance portal", "The tickets for the trip"], "log in"),
        (["Meine Steuererklärung ist fertig", "Die Stromrechnung ist hoch"], "Steuer Erklaerung"),
        (["मेरी नोटबुक कहाँ है", "बिजली का बिल आया"], "नोट बुक"),
        (["Dentist appointment at 3pm on Friday", "The kids are 4 and 5"], "at 3 pm"),
        (["Dentist appointment at 3 pm on Friday", "The kids are 3 and 5"], "3pm"),
        (["הבת שלי התחילה ללמוד בגן חדש", "קניתי מחשב נייד"], "גן"),
        (["امروز رفتم کتاب\u200cخانه\u200cی مرکزی", "ماشینم را بردم تعمیرگاه"], "کتابخانه"),
        (["گوشی\u200cام خراب شد", "ماشین را بردم تعمیرگاه"], "گوشیم"),
        (["المطعم جنب الشغل والشاورما ممتازة", "فاتورة الكهرباء عالية"], "الشاورما"),
    ],
)
def test_search_finds_what_only_a_variant_matches_and_the_stage_can_be_turned_off(store, messages, question):
    for i, text in enumerate(messages):
        add(store, "u", f"s{i}", ("user", text), at=T0 + i * 60_000)
    hits = S.search(store, "u", question, top_k=1)
    assert hits and hits[0].session_id == "s0"
    # (compound tails off too: "Termin" is the last part of "Zahnarzttermin", which that stage finds by itself)
    off = S.SearchConfig(variants=False, backfill=False, compound_tails=0)
    assert S.search(store, "u", question, top_k=1, config=off) == []
