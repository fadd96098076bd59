"""echo_description: drop a property description whose words only repeat the property name.

``user_id: {"description": "The user ID"}`` tells the model nothing the key did not: the
content words (case styles split, stop-words such as "the", "of", "value" removed) are exactly
the name's. Any other word ("Unique user ID") keeps it. Descriptions are annotations, so
validation is unchanged. Tool descriptions are never touched.
"""

from __future__ import annotations

from .. import schema as js
from ._text import content_words

NAME = "echo_description"
SUMMARY = "Drop property descriptions that only repeat the property name"


def apply(root, ctx):
    for node in js.nodes(root):
        props = node.get("properties")
        if not isinstance(props, dict):
            continue
        for name, sub in props.items():
            if not isinstance(sub, dict):
                continue
            d = sub.get("description")
            if isinstance(d, str):
                words = content_words(d)
                if words and words == content_words(name):
                    del sub["description"]
    return root
