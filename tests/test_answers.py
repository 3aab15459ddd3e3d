"""jiyi.text.answers: the kind of answer a question asks for, and texts that hold one."""

from __future__ import annotations

import pytest

from jiyi.text.answers import about_asking, about_the_assistant, asked_kind, holds, only_asks, without_framing


@pytest.mark.parametrize(
    ("query", "kind"),
    [
        ("When did Melanie paint a sunrise?", "time"),
        ("when is the dentist appointment", "time"),
        ("Remind me, when did we move to Berlin?", "time"),
        ("What year did Caroline start transitioning?", "time"),
        ("How long ago was the trip to Japan?", "time"),
        ("我什么时候去看牙医？", "time"),
        ("婚礼是哪天", "time"),
        ("会议几点开始？", "time"),
        ("How many kids does Melanie have?", "number"),
        ("How much is the rent now?", "number"),
        ("How old is the user's son?", "number"),
        ("房租多少钱一个月？", "number"),
        ("儿子几岁了", "number"),
        ("What is the total weight of the new feed I purchased?", "number"),
        ("What was my score in the last round?", "number"),
        ("What's the price of the tickets?", "number"),
        ("How many hours did I spend in total?", "number"),
        ("What is the total time it takes me to get to work?", "number"),
        ("What was the name of my first dog?", None),
        ("What time is the meeting?", "time"),
        ("What does the user do for work?", None),
        ("Where does the user live?", "place"),
        ("用户现在住在哪里？", "place"),
        ("Which city did they move to?", "place"),
        ("用户开什么车？", None),
        ("", None),
    ],
)
def test_the_kind_a_question_asks_for(query: str, kind: str | None) -> None:
    assert asked_kind(query) == kind


@pytest.mark.parametrize(
    "text",
    [
        "We went camping last weekend with the kids.",
        "I'm starting the new job on Monday",
        "She got married in May 2019",
        "in May we painted the fence",
        "the flight leaves at 7:30 pm",
        "I ran my first marathon two years ago",
        "我上周五去的",
        "婚礼定在10月3号",
        "昨天刚搬完家",
        "下午三点的会",
    ],
)
def test_texts_that_say_when(text: str) -> None:
    assert holds(text, "time")


@pytest.mark.parametrize(
    "text",
    [
        "I may go to the gym",  # "may" the verb is no month
        "I love painting sunsets with my kids",
        "我一直很喜欢画画",
        "帮我想一下周年纪念日吃什么",  # 周年 is no day of the week
    ],
)
def test_texts_that_do_not_say_when(text: str) -> None:
    assert not holds(text, "time")


@pytest.mark.parametrize(
    "text",
    ["I have two kids", "rent is $1,400", "my son turned 9", "我们家有三个孩子", "房租5200", "我养了两只猫"],
)
def test_texts_that_give_a_number(text: str) -> None:
    assert holds(text, "number")


@pytest.mark.parametrize("text", ["I love my kids", "我一直很喜欢画画", "一起去吧", "she's my best friend"])
def test_texts_that_give_no_number(text: str) -> None:
    assert not holds(text, "number")


@pytest.mark.parametrize(
    "text",
    [
        "we finally moved to Seattle last spring",
        "I grew up in Portland",
        "she's from Sweden originally",
        "我现在在上海上班",
        "上个月搬到了朝阳区",
        "搬家到了闵行七宝，通勤要四十分钟",
    ],
)
def test_texts_that_name_a_place(text: str) -> None:
    assert holds(text, "place")


@pytest.mark.parametrize(
    "text",
    [
        "I talked to my sister about it",
        "see you in May",
        "we went to the park",
        "我在家里做饭",
        "去吃饭吧",
        "主要是为了用更好的分区表",
    ],
)
def test_texts_that_name_no_place(text: str) -> None:
    assert not holds(text, "place")


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("How many different doctors did I visit?", "how many doctors did i visit?"),
        ("What is the total number of siblings I have?", "what is the siblings i have?"),
        ("How much total money did I spend on workshops?", "how much money did i spend on workshops?"),
        ("What is the total weight of the new feed?", "what is the weight of the new feed?"),
        ("How many times did I bake something?", "how many did i bake something?"),
        ("How many different types of citrus fruits have I used?", "how many citrus fruits have i used?"),
        ("How much did I raise in total?", "how much did i raise ?"),
        ("How many pairs of shoes do I own?", "how many shoes do i own?"),
        ("我一共去过几次北京？", "我 去过几次北京？"),
        ("我去过几个不同的城市？", "我去过几个 城市？"),
        # Not a count's framing: the words stay.
        ("What is my phone number?", "what is my phone number?"),
        ("What are the types of cheese I like?", "what are the types of cheese i like?"),
        ("Totally different: what is totalitarianism?", "totally different: what is totalitarianism?"),
        ("Which times suit the dentist?", "which times suit the dentist?"),
        # A request to the assistant: what it asks for stays, the asking goes.
        ("My cookies need something extra. Any advice?", "my cookies need something extra. ?"),
        ("Can you recommend a show or movie for tonight?", "a show or movie for tonight?"),
        ("Could you please suggest a hotel in Miami?", "a hotel in miami?"),
        ("Do you have any helpful tips for Tokyo?", "for tokyo?"),
        ("I'm looking for some ideas for a gift", "for a gift"),
        ("Do you think it would be a good idea to go to the reunion?", "to go to the reunion?"),
        ("Recommend a podcast about history", "a podcast about history"),
        ("推荐一下周末去哪玩", "周末去哪玩"),
        ("有什么好吃的推荐吗", "有什么好吃的"),
        ("你觉得我该买哪个手机", "我该买哪个手机"),
        # A pointer back to the conversation: where to look, not what for.
        (
            "I was going through our previous conversation about fashion brands, and I was "
            "wondering if you could remind me of the brand?",
            "about fashion brands, and of the brand?",
        ),
        (
            "I mentioned cooking something for my friend. What was it?",
            "cooking something for my friend. what was it?",
        ),
        ("Do you remember my dog's name?", "my dog's name?"),
        ("我之前说过我喜欢什么运动？", "我喜欢什么运动？"),
        ("你上次推荐过的那本书叫什么？", "那本书叫什么？"),
        ("What did Melanie mention about her kids?", "what did melanie mention about her kids?"),
        # A question about what was said keeps its verb.
        ("What did I recommend to Sarah?", "what did i recommend to sarah?"),
        ("我推荐给小王的书是哪本？", "我推荐给小王的书是哪本？"),
        ("Do you have any cats?", "cats?"),
        # Nothing but framing: then the framing is what is asked.
        ("total", "total"),
        ("Any advice?", "any advice?"),
        ("一共", "一共"),
    ],
)
def test_the_framing_of_a_count_a_request_or_a_recall_is_no_keyword(query: str, words: str) -> None:
    assert " ".join(without_framing(query).lower().split()) == " ".join(words.split())


def test_the_quick_test_before_the_framing_patterns_misses_nothing() -> None:
    """``without_framing`` runs its patterns only on a query holding one of a few words;
    on every framed query above, and the same in upper case, the result is the patterns'."""
    from jiyi.text.answers import _FRAME

    framed = [
        "How many different doctors?",
        "THE TOTAL NUMBER OF siblings",
        "What's the number of cats",
        "Could you help me with my garden?",
        "What would you suggest for dinner?",
        "I'd like some fresh inspiration",
        "It would be a good idea to go?",
        "Please recommend a podcast",
        "In our last session about taxes",
        "We chatted about the trip",
        "I'm looking back at our earlier discussions",
        "I want to follow up on the plan",
        "我们上次聊过的电影",
        "你建议过的路线",
        "帮我想想周末去哪",
        "加起来花了多少钱",
    ]
    for text in framed + [q.upper() for q in framed]:
        query = f"{text} garden 花园"  # a subject, so the framing goes
        assert without_framing(query) == _FRAME.sub(" ", query), query
        assert _FRAME.search(query), query


@pytest.mark.parametrize(
    "text",
    [
        "What time is it?",
        "Hey Mel! How was the camping trip?",
        "Thanks! Can you help me find a hotel in Tokyo?",
        "Next.js or Remix?",
        "Have you used TV.com before? Can you recommend any shows?",
        "How can I see the difference between 1.9 and 1.7 cubic feet?",
        "Did you see it?! Wow.",
        "你好！周末去哪了？",
        "太好了！你们什么时候出发？",
        "Привет! Как дела?",
        "안녕! 잘 지냈어?",
        "ねえ、元気？",
        "¡Hola! ¿Qué tal?",
        "Genial 🎉 ¿Y tú?",
    ],
)
def test_texts_that_only_ask(text: str) -> None:
    assert only_asks(text)


@pytest.mark.parametrize(
    "text",
    [
        "I went to Paris last May. How about you?",
        "I just got diagnosed with sinusitis by Dr. Patel. Can you give me some tips?",
        "We adopted a puppy.",
        "我昨天去了北京。你呢？",
        "我们决定用 Next.js。你觉得怎么样？",
        "Hey Calvin, how's the car doing? You were stoked to get back on the road, right?",
        "That was your first marathon, wasn't it?",
        "你去过北京吧？",
        "",
        # Words of every script count, not only Latin and Han: a Russian, Korean or Japanese
        # statement before a question tells something too.
        "Огонь. И ещё: записался на курсы английского, вторник и четверг вечером. Как совместить?",
        "서울로 이사했어요. 근처에 맛집 있어요?",
        "三鷹に引っ越しました。近くにいいパン屋ある？",
        "Me mudé a Mérida en marzo. ¿Conoces algún dentista?",
        # Spanish opens its question with "¿": what comes before it in the sentence is said.
        "Ya tengo el B2 de euskera y quiero celebrarlo con mis amigas, ¿alguna idea para cenar?",
        # An emoji before a capital ends a sentence in chat.
        "¡He aprobado! Ya tengo el B2 de euskera 🎉 Quiero celebrarlo, ¿alguna idea para cenar?",
    ],
)
def test_texts_that_tell_something(text: str) -> None:
    assert not only_asks(text)


@pytest.mark.parametrize(
    ("query", "asking"),
    [
        ("Any tips for rearranging my bedroom?", True),
        ("Can you recommend a show for tonight?", True),
        ("I wanted to follow up on our previous conversation about YouTube videos.", True),
        ("你之前推荐过哪家餐厅？", True),
        ("有什么推荐的书吗？", True),
        ("What did Jolene ask Deb to help with?", True),
        ("我上次问过你什么？", True),
        ("How many doctors did I visit?", False),
        ("What did Caroline research?", False),
        ("What did you do last weekend?", False),
        ("我一共去过几次北京？", False),
    ],
)
def test_queries_about_asking(query: str, asking: bool) -> None:
    assert about_asking(query) is asking


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did you recommend for my trip?", True),
        ("Can you remind me what you said about the hotel?", True),
        ("I was going through our previous conversation about knitting", True),
        ("你之前推荐的那本书叫什么？", True),
        ("¿Qué libro me recomendaste?", True),
        ("Can you recommend a show for tonight?", False),  # a request: what the user likes
        ("What hobby does the user have?", False),
        ("我住在哪里？", False),
    ],
)
def test_about_the_assistant(query: str, expected: bool) -> None:
    assert about_the_assistant(query) is expected
