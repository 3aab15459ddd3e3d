"""Words that carry no topic, per language, for the keyword index (:mod:`jiyi.text.tokenize`).

English and Chinese have their own lists. Spanish, French, German, Portuguese, Italian and
Russian share one set of articles, prepositions, pronouns and auxiliaries: without it
"¿En qué ciudad vive la usuaria?" asks for *en*, *qué* and *la*, which every Spanish
memory holds, and a chatty turn full of them outranks the answer on keyword coverage and
phrase evidence. A word that is also an English content word is left out of the set
("son", "die", "hat", "war", "come", "dove", "pour", "car"), as are words that are
names or abbreviations as often ("Al", "Del", "Di", "Ed", "Ella", "Han", "Mia", "AI", "DA", "ER",
"EU", "OS", "SIM", "Mon", "mi" for miles): Latin
script is one index for every language, and an English memory must keep them.

Japanese and Korean are indexed as character bigrams, so their particles and endings
come as bigrams: the most common of them (です, ます, ている; 에서, 어요, 습니다) are
listed as such.
"""

from __future__ import annotations

# A short list on purpose: words that carry no topic in memory queries.
EN_STOP = frozenset(
    """a about above after again against all am an and any are aren't as at be because been before
    being below between both but by can could did didn't do does doesn't doing don't down during each
    few for from further had has have having he he'd he'll he's her here here's hers herself him
    himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more
    most my myself no nor not of off on once only or other ought our ours ourselves out over own same
    she she'd she'll she's should so some such than that that's the their theirs them themselves
    then there there's these they they'd they'll they're they've this those through to too under
    until up very was wasn't we we'd we'll we're we've were weren't what what's when when's where
    where's which while who who's whom why why's with won't would you you'd you'll you're you've
    your yours yourself yourselves s t d ll m re ve also just us""".split()
)

ZH_STOP = frozenset(
    """的 了 是 在 和 与 及 或 也 就 都 而 但 还 又 着 过 吗 呢 吧 啊 呀 哦 嗯 么 之 其 这 那 这个 那个
    这些 那些 一个 一些 什么 怎么 怎样 如何 哪 哪个 哪些 为什么 因为 所以 如果 就是 还是 已经 可以 会 能
    要 把 被 给 对 从 向 到 让 使 于 以 为 有 没有 没 不 很 更 最 太 非常 我 你 他 她 它 我们 你们 他们
    她们 它们 自己 咱们 您 吗 呢 啦 嘛 吧 个 些 上 下 中 里 时 时候 后 前
    做 去 来 干 弄 搞 说 想 让 看 回 过 得 地 还有 平时 一般 通常 经常""".split()
)

_ES = """el la los las un una unos unas lo le les de en que qué quien quién quienes cual cuál
    cuales cuáles como cómo donde dónde cuando cuándo cuanto cuánto cuánta cuántos cuántas por para
    con sobre entre hasta desde su sus mis tu tus nuestro nuestra nuestros nuestras es está están
    estoy estás estaba fue ser estar muy pero más ya se nos te ti yo él ellos ellas usted ustedes
    este esta estos estas ese esa esos esas eso esto aquí allí también porque pues sí ni otro otra"""
_FR = """le la les une des du de et ou où que qui quoi quel quelle quels quelles dans par avec sur
    sous sa ses tes notre nos votre vos leur leurs il ils elle elles je tu nous vous ce cet cette ces
    est sont était être avoir avait pas ne au aux ça cela ceci très mais donc comme aussi tout tous
    toute toutes"""
_DE = """der das dem des ein eine einen einem einer eines und oder ist sind bist waren wie wo wer
    welche welcher welches welchen zu zur zum von vom bei beim auf für nicht kein keine ich du sie
    es wir ihr mein meine meinen meinem meiner dein deine sein ihre ihren haben habe hatte im ins
    noch schon sehr aber auch dass daß nach aus über unter um als denn doch ja nur"""
_PT = """um uma uns umas do dos das em na nos nas ao aos à às é qual quais quem onde quando
    pelo pela sem seu sua seus suas meu minha meus minhas teu tua ele ela eles elas você vocês nós
    estão estou foi ter tem têm tinha mais muito muita não também já mas isso isto esse essa aqui"""
_IT = """il lo gli della dello dei degli delle dal dalla con su per tra fra chi cui quale quali
    non più anche sono sei essere ho hai hanno mio miei mie tuo tua suo sua nostro nostra loro
    questo questa quello quella molto"""
LATIN_STOP_BY_LANGUAGE = (
    ("spanish", frozenset(_ES.split())),
    ("french", frozenset(_FR.split())),
    ("german", frozenset(_DE.split())),
    ("portuguese", frozenset(_PT.split())),
    ("italian", frozenset(_IT.split())),
)
"""Each language's own list, by its Snowball stemmer's name (which language a text is in)."""
OTHER_LATIN_STOP = frozenset(f"{_ES} {_FR} {_DE} {_PT} {_IT}".split()) - EN_STOP
"""Spanish, French, German, Portuguese and Italian function words (see the module doc)."""

CYRILLIC_STOP = frozenset(
    """и в во не что чем как а но да нет то это этот эта эти тот та те он она оно они я ты мы вы его
    её ее их мне меня тебя тебе ему ей нам вам у к ко с со о об от до из за на по под над при для без
    же ли бы был была было были быть есть так там тут где когда кто какой какая какое какие который
    которая которые уже еще ещё очень тоже также или ни мой моя моё мои твой свой своя свои наш наша""".split()
)
"""Russian function words, matched before stemming."""

KANA_HANGUL_STOP = frozenset(
    """です ます まし した して てい いる いた いて ませ せん でし しょ ょう った って ない から まで ので
    のは には とは では でも ても けど など こと もの すか すね よね んで んだ じゃ くだ ださ さい
    에서 에게 으로 하고 어요 아요 해요 세요 니다 습니 했어 해서 는데 지만 이에 예요 에요 이야 거야 하는
    하게 까요 나요 이랑 는지 은데 인데 이고 라고 다고 했다 한다 합니""".split()
)
"""The commonest particle and ending bigrams of Japanese and Korean (see the module doc)."""
