"""What marks a word as a person's name or a relative, in Chinese and English."""

from __future__ import annotations

SURNAMES_ZH = (
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢"
    "姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤欧上司诸"
)
"""Common Chinese surnames, one character each (上, 司, 诸 for 上官, 司马, 诸葛)."""

_COMPOUND_LEADS = frozenset("上司诸")


def is_zh_name(word: str) -> bool:
    """Whether ``word`` reads as a Chinese given name with its surname: two or three Han
    characters led by a common one-character surname (李娜, 王芳; not 上线, whose 上 leads
    only compound surnames)."""
    return (
        2 <= len(word) <= 3
        and word[0] in SURNAMES_ZH
        and word[0] not in _COMPOUND_LEADS
        and all("\u4e00" <= c <= "\u9fff" for c in word)
    )
