"""The word helpers behind ``titles`` and ``echo_description``."""

import pytest

from caveman_engine.catalog.rules._text import meaning, squash, words


@pytest.mark.parametrize("text, expected", [
    ("user_id", ["user", "id"]),
    ("pageSize", ["page", "size"]),
    ("page-size", ["page", "size"]),
    ("HTTPServer", ["http", "server"]),
    ("getHTTPResponseCode", ["get", "http", "response", "code"]),
    ("ipv6Address", ["ipv", "6", "address"]),
    ("ABC", ["abc"]),
    ("The user's ID.", ["the", "user", "id"]),
    ("the caller\u2019s zone", ["the", "caller", "zone"]),
    ("it's", ["it"]),
    ("'s", []),
    ("", []),
    ("  --  ", []),
])
def test_words(text, expected):
    assert words(text) == expected


def test_squash():
    assert squash("User Id") == squash("user_id") == squash("userId") == "userid"
    assert squash("Zeitzone \u00e4") == "zeitzone"


def test_meaning_leaves_filler_out():
    assert meaning("The page size value") == meaning("page_size") == {"page", "size"}
    assert meaning("ID of the user") == meaning("userId")
    assert meaning("User ID to fetch") == {"user", "id", "fetch"}
    assert meaning("the value") == frozenset()


def test_non_ascii_text_never_equals_a_name():
    assert meaning("Identifiant de l\u2019utilisateur") != meaning("Identifiant de l utilisateur")
    assert meaning("\u00e9") != meaning("e")
