"""A Glassbox custom step in Python: redacts e-mail addresses and phone
numbers from one text field of the request, and routes on whether it found
any (`pii` or `no_pii`).

Build it into a WebAssembly component with componentize-py (PyPI):

    componentize-py -d ../../crates/nodes/wit -w step componentize app -o redactor.wasm

Settings (checked against CONFIG_SCHEMA by `glassbox validate`): `field`
(the input field holding the text, default `question`) and `mask` (the
replacement, default `[redacted]`).
"""

import json
import re

import wit_world
from wit_world.imports import types
from componentize_py_types import Err

CONFIG_SCHEMA = {
    "type": "object",
    "properties": {
        "field": {"type": "string", "minLength": 1},
        "mask": {"type": "string"},
    },
    "additionalProperties": False,
}

OUTPUT_SCHEMA = {
    "type": "object",
    "required": ["text", "redacted"],
    "properties": {
        "text": {"type": "string"},
        "redacted": {"type": "integer", "minimum": 0},
    },
    "additionalProperties": False,
}

EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")
PHONE = re.compile(r"\+?\d[\d -]{7,}\d")


class WitWorld(wit_world.WitWorld):
    def describe(self) -> types.About:
        return types.About(
            name="pii-redactor",
            version="0.1.0",
            config_schema=json.dumps(CONFIG_SCHEMA),
            output_schema=json.dumps(OUTPUT_SCHEMA),
            labels=["pii", "no_pii"],
        )

    def run(self, settings: str, input: str) -> types.Reply:
        conf = json.loads(settings)
        field = conf.get("field", "question")
        mask = conf.get("mask", "[redacted]")
        text = json.loads(input).get("input", {}).get(field)
        if not isinstance(text, str):
            raise Err(f"the input has no text field `{field}`")
        text, emails = EMAIL.subn(mask, text)
        text, phones = PHONE.subn(mask, text)
        found = emails + phones
        if found:
            fact = types.Fact(
                en=f"the PII redactor removed {emails} e-mail address(es) and {phones} phone number(s)",
                zh=f"隐私清理移除了 {emails} 个邮箱地址和 {phones} 个电话号码",
            )
        else:
            fact = types.Fact(en="the PII redactor found no personal data", zh="隐私清理未发现个人信息")
        return types.Reply(
            output=json.dumps({"text": text, "redacted": found}),
            label="pii" if found else "no_pii",
            facts=[fact],
        )
