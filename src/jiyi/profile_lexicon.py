"""Names of programming languages, frameworks, data stores, infrastructure and tools.

Profiles (:mod:`jiyi.profile`) read these names out of memory items to fill
``programming_languages``, ``frequently_used_tools`` and a project's ``tech_stack``.
:func:`find_terms` returns each name in its canonical spelling, in order of first
appearance, whatever the surrounding language (Chinese text has no spaces around them).

Names that are also ordinary English words (Go, Rust, Swift, C, R ...) only count when
written capitalised as names, and "Go" not as the verb ("Go with Redis").
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from functools import cache
from typing import Literal

Category = Literal["language", "framework", "datastore", "infra", "tool"]

# canonical name -> other spellings (matched case-insensitively, as whole words)
_LANGUAGES: dict[str, tuple[str, ...]] = {
    "Python": ("python3", "python 3"),
    "JavaScript": ("js", "ecmascript"),
    "TypeScript": ("ts",),
    "Java": (),
    "Kotlin": (),
    "C++": ("cpp", "c plus plus"),
    "C#": ("csharp", "c sharp"),
    "Objective-C": ("objc", "objective c"),
    "PHP": (),
    "Scala": (),
    "Haskell": (),
    "Elixir": (),
    "Erlang": (),
    "Clojure": (),
    "OCaml": (),
    "F#": ("fsharp",),
    "Lua": (),
    "Perl": (),
    "MATLAB": (),
    "SQL": (),
    "Bash": ("shell script", "shell scripting"),
    "PowerShell": (),
    "Fortran": (),
    "COBOL": (),
    "Solidity": (),
    "Groovy": (),
    "Visual Basic": ("vb.net", "vba"),
    "Assembly": ("汇编",),
    "WebAssembly": ("wasm",),
    "Golang": (),  # folded into Go below
}
# Ordinary words too: matched only capitalised (and "Go" not as the verb).
_LANGUAGES_CASED: dict[str, tuple[str, ...]] = {
    "Go": ("Go", "GO", "Go语言", "Go 语言"),
    "Rust": ("Rust",),
    "Swift": ("Swift",),
    "Ruby": ("Ruby",),
    "Dart": ("Dart",),
    "Julia": ("Julia",),
    "Zig": ("Zig",),
    "Nim": ("Nim",),
    "C": ("C", "C语言", "C 语言"),
    "R": ("R语言", "R 语言", "R language"),
}
_FRAMEWORKS: dict[str, tuple[str, ...]] = {
    "React": ("reactjs", "react.js"),
    "React Native": (),
    "Vue": ("vue.js", "vuejs", "vue3", "vue 3"),
    "Angular": ("angularjs",),
    "Svelte": ("sveltekit",),
    "Next.js": ("nextjs", "next js"),
    "Nuxt": ("nuxt.js", "nuxtjs"),
    "Remix": (),
    "Django": (),
    "Flask": (),
    "FastAPI": (),
    "Spring Boot": ("springboot",),
    "Spring": (),
    "Ruby on Rails": ("rails",),
    "Express": ("express.js", "expressjs"),
    "NestJS": ("nest.js",),
    "Laravel": (),
    ".NET": ("dotnet", "asp.net"),
    "Gin": (),
    "Tailwind CSS": ("tailwind", "tailwindcss"),
    "Node.js": ("nodejs", "node js"),
    "Deno": (),
    "Bun": (),
    "TensorFlow": (),
    "PyTorch": ("torch",),
    "LangChain": (),
    "LangGraph": (),
    "pandas": (),
    "NumPy": (),
    "scikit-learn": ("sklearn",),
    "Spark": ("pyspark", "apache spark"),
    "Flutter": (),
    "Electron": (),
    "Celery": (),
    "GraphQL": (),
    "gRPC": (),
    "jQuery": (),
    "Qt": (),
    "Unity": (),
    "Hadoop": (),
    "Airflow": ("apache airflow",),
}
_DATASTORES: dict[str, tuple[str, ...]] = {
    "PostgreSQL": ("postgres", "pg", "postgre"),
    "MySQL": (),
    "MariaDB": (),
    "SQLite": (),
    "MongoDB": ("mongo",),
    "Redis": (),
    "Elasticsearch": ("elastic search",),
    "OpenSearch": (),
    "Kafka": ("apache kafka",),
    "RabbitMQ": (),
    "ClickHouse": (),
    "Cassandra": (),
    "DynamoDB": (),
    "pgvector": (),
    "Oracle Database": ("oracle db",),
    "SQL Server": ("mssql",),
    "Neo4j": (),
    "Milvus": (),
    "Qdrant": (),
    "Pinecone": (),
    "Supabase": (),
    "Firebase": (),
    "Snowflake": (),
    "BigQuery": (),
    "TiDB": (),
    "etcd": (),
    "MinIO": (),
    "S3": ("amazon s3",),
}
_INFRA: dict[str, tuple[str, ...]] = {
    "Docker": (),
    "Kubernetes": ("k8s",),
    "Helm": (),
    "Terraform": (),
    "Ansible": (),
    "AWS": ("amazon web services",),
    "GCP": ("google cloud",),
    "Azure": (),
    "阿里云": ("aliyun", "alibaba cloud"),
    "腾讯云": ("tencent cloud",),
    "Vercel": (),
    "Netlify": (),
    "Cloudflare": (),
    "Nginx": (),
    "Linux": (),
    "GitHub Actions": (),
    "GitLab CI": (),
    "Jenkins": (),
    "CircleCI": (),
    "Prometheus": (),
    "Grafana": (),
    "Sentry": (),
    "Datadog": (),
    "Serverless": (),
    "Lambda": ("aws lambda",),
}
_TOOLS: dict[str, tuple[str, ...]] = {
    "VS Code": ("vscode", "visual studio code"),
    "Visual Studio": (),
    "Vim": (),
    "Neovim": ("nvim",),
    "Emacs": (),
    "IntelliJ IDEA": ("intellij",),
    "PyCharm": (),
    "WebStorm": (),
    "GoLand": (),
    "Xcode": (),
    "Android Studio": (),
    "Eclipse": (),
    "Sublime Text": ("sublime",),
    "Cursor": (),
    "Git": (),
    "Git Flow": ("gitflow", "git-flow"),
    "GitHub": (),
    "GitLab": (),
    "Jira": (),
    "Confluence": (),
    "Notion": (),
    "Obsidian": (),
    "Slack": (),
    "飞书": ("feishu", "lark"),
    "钉钉": ("dingtalk",),
    "Figma": (),
    "Postman": (),
    "tmux": (),
    "zsh": ("oh-my-zsh",),
    "iTerm2": ("iterm",),
    "Homebrew": ("brew",),
    "npm": (),
    "pnpm": (),
    "Yarn": (),
    "pip": (),
    "uv": (),
    "Conda": ("anaconda", "miniconda"),
    "Jupyter": ("jupyter notebook", "jupyterlab"),
    "webpack": (),
    "Vite": (),
    "ESLint": (),
    "Prettier": (),
    "Ruff": (),
    "mypy": (),
    "pytest": (),
    "Jest": (),
    "Vitest": (),
    "Cypress": (),
    "Playwright": (),
    "Selenium": (),
    "Excel": (),
    "Photoshop": (),
    "Copilot": ("github copilot",),
    "ChatGPT": (),
    "Claude": (),
    "Wireshark": (),
    "DBeaver": (),
}

_FOLD = {"Golang": "Go"}

NATURAL_LANGUAGES: dict[str, str] = {
    # spelling (lower-case) -> language tag
    "中文": "zh-CN",
    "汉语": "zh-CN",
    "普通话": "zh-CN",
    "简体中文": "zh-CN",
    "chinese": "zh-CN",
    "mandarin": "zh-CN",
    "simplified chinese": "zh-CN",
    "繁体中文": "zh-TW",
    "繁體中文": "zh-TW",
    "traditional chinese": "zh-TW",
    "粤语": "yue",
    "cantonese": "yue",
    "英文": "en",
    "英语": "en",
    "english": "en",
    "日语": "ja",
    "日文": "ja",
    "japanese": "ja",
    "韩语": "ko",
    "韩文": "ko",
    "korean": "ko",
    "法语": "fr",
    "french": "fr",
    "德语": "de",
    "german": "de",
    "西班牙语": "es",
    "spanish": "es",
    "俄语": "ru",
    "russian": "ru",
    "葡萄牙语": "pt",
    "portuguese": "pt",
    "意大利语": "it",
    "italian": "it",
}


@dataclass(frozen=True)
class Term:
    name: str
    category: Category


# Names that are also ordinary words: they count only written as names (capitalised).
_CASED: frozenset[str] = frozenset(
    {
        "Spring",
        "Express",
        "Unity",
        "Gin",
        "Bun",
        "Lambda",
        "Cursor",
        "Excel",
        "Spark",
        "Airflow",
        "Helm",
        "Notion",
        "Slack",
        "Eclipse",
        "Assembly",
        "Yarn",
        "Celery",
        "Electron",
        "Groovy",
        "Remix",
    }
)
_GO_VERB = re.compile(
    r"\s+(?:with|to|ahead|back|for|on|home|out|over|through|into|in|away|up|down|there|here|and)\b", re.I
)
# After these words "Go" is a thing written or known, whatever follows it.
_GO_OBJECT = re.compile(
    r"\b(?:write|writes|writing|wrote|code|codes|coding|program|programming|learn|learning|learned|know|knows|"
    r"use|uses|using|used|in|with|and|or|like|love|prefer)\s+$",
    re.I,
)
# A run of name characters ("Next.js", "C++", "k8s", ".NET"); names of up to three words
# ("Visual Studio Code") are looked up word by word, longest first.
_TOKEN = re.compile(r"(?<![A-Za-z0-9_])\.?[A-Za-z0-9_][A-Za-z0-9_.+#-]*")
_MAX_WORDS = 3
_HAN = re.compile(r"[\u3400-\u9fff]")


@cache
def _tables() -> tuple[dict[str, Term], dict[str, Term]]:
    """(spelling in lower case -> term, spelling as written -> term for ordinary-word names)."""
    folded: dict[str, Term] = {}
    cased: dict[str, Term] = {}
    groups: list[tuple[dict[str, tuple[str, ...]], Category]] = [
        (_LANGUAGES, "language"),
        (_FRAMEWORKS, "framework"),
        (_DATASTORES, "datastore"),
        (_INFRA, "infra"),
        (_TOOLS, "tool"),
    ]
    for table, category in groups:
        for name, others in table.items():
            term = Term(_FOLD.get(name, name), category)
            if name in _CASED:
                cased[name] = term
            else:
                folded[name.lower()] = term
            for spelling in others:
                folded[spelling.lower()] = term
    for name, spellings in _LANGUAGES_CASED.items():
        for spelling in spellings:
            cased[spelling] = Term(name, "language")
    return folded, cased


@cache
def _han_names() -> re.Pattern[str]:
    """Spellings with Chinese characters ("阿里云", "C语言"), which the word scan does not see."""
    folded, cased = _tables()
    spellings = sorted((s for s in (*folded, *cased) if _HAN.search(s)), key=len, reverse=True)
    return re.compile(
        "|".join(("(?<![A-Za-z0-9_])" if s[0].isascii() else "") + re.escape(s) for s in spellings)
    )


def _lookup(spelling: str) -> Term | None:
    folded, cased = _tables()
    return cased.get(spelling) or folded.get(spelling.lower())


def find_terms(text: str) -> list[Term]:
    """The known names in ``text``, canonical, in order of first appearance, de-duplicated.

    A dictionary lookup per word (and per run of two or three words), so it stays fast
    on long texts; a name must be a whole word ("Java" is not found in "JavaScript").
    """
    words = [(m.start(), m.end(), m.group().rstrip(".-")) for m in _TOKEN.finditer(text)]
    found: list[tuple[int, Term]] = []
    i = 0
    while i < len(words):
        for n in range(min(_MAX_WORDS, len(words) - i), 0, -1):
            run = words[i : i + n]
            # only words separated by exactly one space form a multi-word name
            if any(text[a[1] : b[0]] != " " for a, b in itertools.pairwise(run)):
                continue
            spelling = " ".join(w[2] for w in run)
            term = _lookup(spelling)
            if term is None:
                continue
            if (
                spelling in ("Go", "GO")
                and _GO_VERB.match(text, run[-1][1])
                and not _GO_OBJECT.search(text, 0, run[0][0])
            ):
                continue  # "Go with Redis" is the verb; "write Go in GoLand" is the language
            found.append((run[0][0], term))
            i += n - 1
            break
        i += 1
    for m in _han_names().finditer(text):
        term = _lookup(m.group())
        if term is not None:
            found.append((m.start(), term))
    found.sort(key=lambda p: p[0])
    return list(dict.fromkeys(term for _, term in found))


def term_of(value: str) -> Term | None:
    """The known name ``value`` is exactly (ignoring case and surrounding space), if any."""
    return _lookup(" ".join(value.split()))


def natural_language(value: str) -> str | None:
    """The language tag of a language name ("英语", "Japanese" -> "en", "ja"), if it is one."""
    return NATURAL_LANGUAGES.get(value.strip().lower())
