"""A failing comparison of two documents prints its first differences, each at its path, not the
documents (tests/assertion_diff.py, hooked in tests/conftest.py); messages stay whole."""

from __future__ import annotations

import copy
import json

import pytest

from config.stack_files import PROJECT_DIR

PROGRAM_DATA = json.loads((PROJECT_DIR / "policy" / "program_data.json").read_text())


def explanation(request, left, right) -> list[str]:
    """What pytest prints under a failing `assert left == right`: the first explanation its hooks give."""
    found = [e for e in request.config.hook.pytest_assertrepr_compare(config=request.config, op="==", left=left, right=right) if e]
    return found[0]


def test_two_documents_differ_in_two_places_and_only_those_are_printed(request):
    """The pack's data (a document of thousands of lines pretty-printed) with two values changed."""
    changed = copy.deepcopy(PROGRAM_DATA)
    changed["vclusterValues"]["gpuResource"] = "amd.com/gpu"
    changed["customRoles"]["keys"].append("extraRole")
    lines = explanation(request, PROGRAM_DATA, changed)
    assert lines[0] == "dict and dict differ in 2 place(s); the first 2 (path: left != right):"
    assert lines[1:] == [
        "  ['customRoles']['keys'][%d]: only on the right: 'extraRole'" % len(PROGRAM_DATA["customRoles"]["keys"]),
        "  ['vclusterValues']['gpuResource']: 'nvidia.com/gpu' != 'amd.com/gpu'",
    ] or lines[1:] == [
        "  ['vclusterValues']['gpuResource']: 'nvidia.com/gpu' != 'amd.com/gpu'",
        "  ['customRoles']['keys'][%d]: only on the right: 'extraRole'" % len(PROGRAM_DATA["customRoles"]["keys"]),
    ]


def test_many_differences_show_the_first_ones_and_count_the_rest(request):
    left = {"items": [{"name": f"item-{i}", "value": i} for i in range(200)]}
    right = {"items": [{"name": f"item-{i}", "value": i + 1} for i in range(200)]}
    lines = explanation(request, left, right)
    assert lines[0] == "dict and dict differ in 200 place(s); the first 12 (path: left != right):"
    assert lines[1] == "  ['items'][0]['value']: 0 != 1" and len(lines) == 14
    assert lines[-1] == "... and 188 more difference(s) not shown"


def test_each_message_of_a_long_list_is_shown_whole(request):
    """A pack's violations against none: the first twelve, each message whole, however long."""
    message = "gke-cluster (cluster 'gpu-prod'): " + "masterAuthorizedNetworksConfig.cidrBlocks[0].cidrBlock opens the control plane; " * 20
    lines = explanation(request, [("mandatory", f"{i}: {message}") for i in range(40)], [])
    assert len(lines) == 14 and lines[-1] == "... and 28 more difference(s) not shown"
    assert lines[1] == f"  [0]: only on the left: {('mandatory', f'0: {message}')!r}"


def test_two_long_texts_show_a_diff_of_their_first_differences(request):
    left = "\n".join(f"key{i}: value{i}" for i in range(3000))
    right = left.replace("key1500: value1500", "key1500: changed")
    lines = explanation(request, left, right)
    assert lines[0].startswith("two texts of 3000 and 3000 lines differ")
    assert "-key1500: value1500" in lines and "+key1500: changed" in lines and len(lines) < 20


def test_small_values_keep_pytests_own_explanation(request):
    from assertion_diff import explain

    assert explain({"a": 1}, {"a": 2}) is None
    assert explain("short message", "another message") is None
    with pytest.raises(AssertionError):
        assert {"a": 1} == {"a": 2}


def test_a_sentence_missing_from_a_page_shows_the_passage_most_like_it(request):
    """`assert sentence in page`: the sentence whole, and where the page says something like it."""
    from docs_support import page

    text = page("docs/teams.md")
    found = [e for e in request.config.hook.pytest_assertrepr_compare(config=request.config, op="in", left="CI deploys it, always the team", right=text) if e]
    lines = found[0]
    assert lines[0] == f"'CI deploys it, always the team' is not in a text of {len(text)} characters; the passage most like it:"
    assert "CI deploys it, never the team" in lines[1] and len(lines) == 2
