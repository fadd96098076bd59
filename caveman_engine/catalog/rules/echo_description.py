"""echo_description: drop a property description whose words only repeat the property name.

``user_id: {"description": "The user ID"}`` tells the model nothing the key did not: the
meaningful words (case styles split, filler such as "the", "of", "value" left out) are exactly
the name's. Any other word ("Unique user ID") keeps it. Descriptions are annotations, so
validation is unchanged. Tool descriptions are never touched.
"""

from __future__ import annotations

from .. import schema as js
from ._text import meaning

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
                said = meaning(d)
                if said and said == meaning(name):
                    del sub["description"]
    return root
