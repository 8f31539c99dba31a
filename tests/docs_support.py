"""The user's documentation as the tests read it: README.md and every page under docs/.

Tests look a text up by its heading (`section("Costs")`), wherever the page holding it is, so that
moving a section to another page moves no test. Headings inside fenced code blocks are not headings.
"""

from __future__ import annotations

import functools
import re
import textwrap
from pathlib import Path

import yaml

from config.stack_files import PROJECT_DIR

README_PATH = PROJECT_DIR / "README.md"
DOCS_DIR = PROJECT_DIR / "docs"

_FENCE = re.compile(r"^```.*?^```[ \t]*$", flags=re.M | re.S)
_HEADING = re.compile(r"^(#{1,6}) +(.+?) *#*$", flags=re.M)


def page_paths() -> list[Path]:
    """README.md, then the docs pages in name order."""
    return [README_PATH, *sorted(DOCS_DIR.glob("*.md"))]


@functools.cache
def pages() -> dict[str, str]:
    """Each page's text by its path from the repository root (`README.md`, `docs/costs.md`)."""
    return {path.relative_to(PROJECT_DIR).as_posix(): path.read_text() for path in page_paths()}


def page(name: str) -> str:
    return pages()[name]


def all_text() -> str:
    """Every page, one after the other (for what the documentation says anywhere, or never says)."""
    return "\n\n".join(pages().values())


def without_code(text: str) -> str:
    """The text with fenced code blocks blanked out (spaces, newlines kept), so offsets stay."""
    return _FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def headings(text: str) -> list[tuple[int, str, int]]:
    """(level, title, offset) of each heading of a page, code blocks left out."""
    return [(len(m.group(1)), m.group(2), m.start()) for m in _HEADING.finditer(without_code(text))]


def slug(title: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped (word characters,
    spaces and hyphens stay), each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)  # a link's text only
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(name: str) -> set[str]:
    """The anchors of a page's headings, as GitHub numbers repeated ones (`x`, `x-1`, …)."""
    seen: dict[str, int] = {}
    result = set()
    for _, title, _ in headings(page(name)):
        base = slug(title)
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def page_of(title: str) -> str:
    """The page whose heading is `title`: the docs page that has it (exactly one may), else README.md.
    README repeats some headings of the docs pages ("Add a team") for its summaries of them."""
    found = [name for name, text in pages().items() if any(t == title for _, t, _ in headings(text))]
    in_docs = [name for name in found if name != "README.md"]
    assert len(in_docs) == 1 or found == ["README.md"], f"heading {title!r} is on {found or 'no page'}: expected exactly one docs page"
    return (in_docs or found)[0]


def section(title: str, name: str | None = None) -> str:
    """A heading and its text up to the next heading of the same or a higher level (so a page's
    title gives the whole page), on its page or on the page `name`."""
    name = name or page_of(title)
    text, found = page(name), headings(page(name))
    matches = [(level, offset) for level, heading, offset in found if heading == title]
    assert len(matches) == 1, f"{name}: {len(matches)} headings {title!r}, expected one"
    [(level, start)] = matches
    end = next((offset for lvl, _, offset in found if offset > start and lvl <= level), len(text))
    return text[start:end]


# A code block with its language; `name` is a file name in backticks ending the paragraph just
# before it (`Pulumi.team-robotics-dev.yaml`:), as the examples of stack files are introduced.
_BLOCK = re.compile(r"(?:`([^`\n]+)`:\n\n)?```(\w*)\n(.*?)```", flags=re.S)


def code_blocks(language: str) -> list[tuple[str, str, str]]:
    """(page, name or "", text) of every fenced block of `language`, page by page, in order."""
    return [(name, m.group(1) or "", m.group(3)) for name, text in pages().items() for m in _BLOCK.finditer(text) if m.group(2) == language]


def yaml_blocks() -> list[tuple[str, str]]:
    """(name, text) of every YAML example, text dedented as a user pastes it into a file."""
    return [(name, textwrap.dedent(text)) for _, name, text in code_blocks("yaml")]


def yaml_example(name: str) -> dict:
    """The one YAML example the docs introduce as the file `name`, parsed."""
    [text] = [text for found, text in yaml_blocks() if found == name]
    return yaml.safe_load(text)


def sh_lines() -> list[str]:
    """Every line of every sh example, on every page."""
    return [line for _, _, text in code_blocks("sh") for line in text.splitlines()]


def _sh_commands() -> list[tuple[str, str]]:
    """(page, command) of every sh example line, lines continued with a backslash joined."""
    return [(page, line) for page, _, text in code_blocks("sh") for line in text.replace("\\\n", " ").splitlines() if line.strip()]


def commands() -> list[tuple[str, str]]:
    """(page, command) of every command a user may paste: each line of an sh example, and each
    inline code span outside the examples that starts with a word an sh line starts with
    (`make plan STACK=prod`)."""
    sh = _sh_commands()
    words = {line.split()[0] for _, line in sh if not line.lstrip().startswith("#")}
    inline = [
        (name, m.group(1))
        for name, text in pages().items()
        for m in re.finditer(r"`([^`\n]+)`", without_code(text))
        if m.group(1).split()[0] in words
    ]
    return sh + inline


# A word that opens with `[`, outside quotes and comments: usage notation for an optional argument
# (`make team NAME=x [GPU=y]`), which the shell passes on as it is, brackets and all.
_QUOTED = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"")
_OPTIONAL = re.compile(r"(?:^|\s)(\[[^\]]*\]?)")


def optional_arguments(command: str) -> list[str]:
    """The bracketed optional-argument forms of a command line (none when it works as pasted)."""
    code = re.split(r"(?:^|\s)#", _QUOTED.sub("''", command), maxsplit=1)[0]
    return _OPTIONAL.findall(code)
