"""Index terms (jiyi.text.tokenize) for every script the default embedder reads."""

from __future__ import annotations

import pytest

from jiyi.text.tokenize import index_text, query_terms, terms


def test_chinese_and_english_terms_are_what_they_were() -> None:
    assert terms("我们决定用 Next.js 而不是 Remix") == ["决定", "用", "next", "js", "不是", "remix"]
    assert terms("Alice has strong preferences about editor themes") == [
        "alic",
        "strong",
        "prefer",
        "editor",
        "theme",
    ]
    assert terms("Café au lait, naïve résumé") == ["café", "lait", "naïv", "résumé"]


def test_cyrillic_greek_and_arabic_words_are_stemmed_by_their_language() -> None:
    # Russian inflections meet at one stem: писатель / писатели, любимый / любимые.
    assert terms("Мой любимый писатель") == terms("любимые писатели")  # "мой" is a stop word
    assert terms("Ο Γιάννης μένει στην Αθήνα")[-1] == terms("την Αθήνα")[-1]
    assert query_terms("القاهرة") == query_terms("في القاهرة")[1:]


def test_words_of_one_letter_are_dropped_as_in_english() -> None:
    assert terms("я и Москва") == terms("Москва")


def test_kana_hangul_and_thai_give_overlapping_bigrams() -> None:
    # Korean: the word meets its stored form whatever particle follows it.
    assert terms("서울역") == ["서울", "울역"]
    assert set(query_terms("서울은")) & set(terms("저는 서울에서 일해요")) == {"서울"}
    # Japanese: kanji through the Han segmenter, kana runs as bigrams; a lone hiragana
    # between kanji (a particle) gives none.
    assert terms("柴犬のハナ") == ["柴犬", "ハナ"]  # no bigram across hiragana and katakana
    assert terms("宝石の装飾") == ["宝石", "装飾"]
    assert terms("ไทย") == ["ไท", "ทย"]
    assert terms("집") == ["집"]  # a one-syllable word stays whole


def test_function_words_of_other_languages_give_no_term() -> None:
    assert query_terms("¿En qué ciudad vive la usuaria?")[:3] == ("ciudad", "vive", "usuaria")
    assert query_terms("Wie kommt Jens zur Arbeit?") == ("kommt", "jen", "arbeit")
    assert query_terms("Onde mora a usuária?") == ("mora", "usuária")
    assert query_terms("Где работает Иван?") == query_terms("работает Иван")
    # French and Italian elision: the word is what follows the apostrophe.
    assert "utilisatric" in query_terms("Dans quelle ville habite l'utilisatrice ?")
    assert query_terms("dell'anno") == query_terms("anno")
    # Japanese and Korean particles and endings as bigrams: the commonest give none.
    assert "ます" not in terms("東京に住んでいます") and "住" in terms("東京に住んでいます")
    assert "에서" not in terms("서울에서 일해요") and "서울" in terms("서울에서 일해요")


def test_a_text_in_another_latin_language_also_gets_that_languages_stems() -> None:
    # Spanish: "vive" and "vivo" meet at viv; the English stems stay, first and in order.
    query = query_terms("¿En qué localidad vive la usuaria?")
    memory = terms("Vivo en Barakaldo con mi pareja")
    assert query[:3] == ("localidad", "vive", "usuaria") and "viv" in query and "viv" in memory
    assert memory[:2] == ["vivo", "barakaldo"]
    # Portuguese likewise; a text whose function words are English's gets none.
    assert "mor" in terms("Eu moro em Curitiba com a minha filha")
    assert terms("Alice has strong preferences about the la de") == ["alic", "strong", "prefer"]
    # A short query its words do not place keeps the English stems a text always has.
    assert query_terms("vive") == ("vive",) and "vive" in terms("Ella vive en Mérida con su perro")


def test_english_words_that_are_function_words_elsewhere_stay() -> None:
    # One Latin index for every language: a word English uses as content is no stop word.
    for word in (
        "son",
        "die",
        "hat",
        "war",
        "come",
        "dove",
        "pour",
        "car",
        "ai",
        "eu",
        "sim",
        "han",
        "er",
        "os",
        "al",
        "mi",
        "da",
    ):
        assert terms(word), word
    assert terms("don't won't I'm") == []  # English contractions, not elisions
    assert terms("o'clock") == ["oclock"]


def test_vietnamese_letters_stay_inside_their_words() -> None:
    assert terms("Tôi là giáo viên ở Hà Nội") == ["tôi", "là", "giáo", "viên", "hà", "nội"]


def test_indic_vowel_signs_stay_inside_their_words() -> None:
    assert "डॉक्टर" in terms("मैं दिल्ली में डॉक्टर हूँ")


@pytest.mark.parametrize(
    "text",
    ["Москва2025год", "東京タワーで2回", "Next.jsとReact", "서울 Seoul 首尔"],
)
def test_scripts_side_by_side_split_where_the_script_changes(text: str) -> None:
    out = terms(text)
    assert out and all(" " not in t and t.strip() == t for t in out)
    assert index_text(text) == " ".join(out)


def test_punctuation_of_any_script_gives_no_term() -> None:
    assert terms("・「」『』、。！？،؟।") == []
