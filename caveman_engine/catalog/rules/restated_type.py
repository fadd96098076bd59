"""restated_type: drop the words a parameter description opens with when they only name the
schema's ``type`` (``toolschema-max``).

"A list of tags" on ``type: array`` says "Tags" and the type; "A string representing the
user's name" on ``type: string`` says "User's name" and the type; the type is in the schema.
At the start of the first sentence of a schema description, only when the node's ``type``
(or one of its types) is the one named:

* array: "A list of" / "An array of" / "List of" / "Array of";
* string: "A string representing/containing/specifying/indicating/describing", "String
  that represents…";
* integer or number: "An integer/A number/A numeric value representing/specifying/indicating";
* boolean: "A boolean (flag/value) indicating/specifying/determining whether|if" →
  "Whether";
* object: "An object/A dictionary/A map containing/representing/with/of".

"A comma-separated list of" (a format, on a string) and anything on another type stay.
Annotations only: validation is unchanged.
"""

from __future__ import annotations

import re

from ._telegraph import Edit, Rule, rule

NAME = "restated_type"
SUMMARY = "Drop \"A list of\"/\"A string representing\"-style openers that only name the type"

_ART = r"(?:(?:A|An|The)[ \t]+)?"
_LINK = (r"(?:that[ \t]+|which[ \t]+)?(?:represent(?:s|ing)|contain(?:s|ing)|specif(?:ies|ying)"
         r"|indicat(?:es|ing)|describ(?:es|ing)|defin(?:es|ing))[ \t]+(?:(?:the|a|an)[ \t]+)?")
_NEXT = r"(?=[a-z])"

BY_TYPE = {
    "array": [Edit(re.compile(r"^" + _ART + r"(?:[Ll]ist|[Aa]rray)[ \t]+of[ \t]+" + _NEXT), "")],
    "string": [Edit(re.compile(r"^" + _ART + r"(?:[Ss]tring|[Tt]ext)(?:[ \t]+value)?[ \t]+" + _LINK + _NEXT),
                    "")],
    "integer": [Edit(re.compile(r"^" + _ART + r"(?:[Ii]nteger|[Nn]umber|[Nn]umeric[ \t]+value)(?:[ \t]+value)?"
                                r"[ \t]+" + _LINK + _NEXT), "")],
    "boolean": [Edit(re.compile(r"^" + _ART + r"[Bb]oolean(?:[ \t]+(?:flag|value))?[ \t]+"
                                r"(?:that[ \t]+|which[ \t]+)?(?:indicat(?:es|ing)|specif(?:ies|ying)"
                                r"|determin(?:es|ing)|control(?:s|ling))[ \t]+(?:whether|if)\b"), "Whether")],
    "object": [Edit(re.compile(r"^" + _ART + r"(?:[Oo]bject|[Dd]ictionary|[Mm]ap)[ \t]+"
                               r"(?:" + _LINK + r"|with[ \t]+|of[ \t]+)" + _NEXT), "")],
}
BY_TYPE["number"] = BY_TYPE["integer"]


def _for_schema(node, index, sentence):
    if index != 0:
        return []
    from .. import schema as js

    types = js.type_set(node.get("type")) or []
    out = []
    for t in types:
        out.extend(BY_TYPE.get(t, ()))
    return out


RULE = Rule(_for_schema, None, in_constraints=True)
apply, apply_tool = rule(RULE)
