#!/usr/bin/env python3
"""The chart values reference of docs/install.md ("Values"), generated from
charts/vtsnap/values.schema.json and the defaults in values.yaml.

  chart-values-doc.py            print the table
  chart-values-doc.py --check    fail unless docs/install.md holds exactly that table between
                                 its `<!-- values:begin -->` and `<!-- values:end -->` lines
  chart-values-doc.py --write    put the table there
"""
import json
import pathlib
import sys

import yaml  # python3-yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "vtsnap"
BEGIN, END = "<!-- values:begin -->", "<!-- values:end -->"
DOC = ROOT / "docs" / "install.md"
DOC_NAME = "docs/install.md"


def kind(s):
    t = s.get("type", "")
    if "enum" in s:
        return " \\| ".join(f"`{v}`" for v in s["enum"])
    if "pattern" in s and t == "string":
        return "string (pattern)"
    return t


def default_at(defaults, path):
    v = defaults
    for p in path:
        if not isinstance(v, dict) or p not in v:
            return None
        v = v[p]
    return v


def fmt_default(v):
    if v is None:
        return ""
    if isinstance(v, (dict, list)):
        return "`" + json.dumps(v, separators=(",", ":")) + "`"
    if v == "":
        return '`""`'
    return f"`{json.dumps(v) if isinstance(v, bool) else v}`"


def rows(schema, defaults, path=()):
    for name, s in schema.get("properties", {}).items():
        p = path + (name,)
        nested = s.get("type") == "object" and s.get("properties") and s.get("additionalProperties") is False
        if nested:
            yield from rows(s, defaults, p)
            continue
        desc = s.get("description", "").replace("|", "\\|")
        yield f"| `{'.'.join(p)}` | {kind(s)} | {fmt_default(default_at(defaults, p))} | {desc} |"


def table():
    schema = json.loads((CHART / "values.schema.json").read_text())
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    lines += list(rows(schema, defaults))
    return "\n".join(lines) + "\n"


def main():
    t = table()
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if not mode:
        sys.stdout.write(t)
        return 0
    doc = DOC.read_text()
    if BEGIN not in doc or END not in doc:
        print(f"{DOC_NAME} has no {BEGIN} … {END} block", file=sys.stderr)
        return 1
    head, rest = doc.split(BEGIN, 1)
    current, tail = rest.split(END, 1)
    if mode == "--write":
        DOC.write_text(f"{head}{BEGIN}\n{t}{END}{tail}")
        return 0
    if current.strip() != t.strip():
        print(f"{DOC_NAME}'s values reference differs from values.schema.json: "
              "run scripts/chart-values-doc.py --write", file=sys.stderr)
        return 1
    print(f"chart: the values reference in {DOC_NAME} matches values.schema.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
